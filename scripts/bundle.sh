#!/usr/bin/env bash
# Packs a built ridgeline (binary, GPU test binaries) with the MPI, HDF5 and BLAS runtime it
# was linked against into one relocatable tarball, for GPU nodes that have a driver and the
# CUDA/NCCL libraries but no MPI or HDF5 installed. CUDA, cuBLAS, NCCL and cuDNN are deliberately
# left out: the node's own are used (cuDNN is loaded at run time, only by --attention cudnn), and
# the stack fingerprint records their versions.
# Usage: scripts/bundle.sh BUILD_DIR OUT.tar.xz   (unpack with scripts/gpu-check.sh --bundle)
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/debs"

bins=("$build/src/ridgeline")
for t in "$build"/tests/gpu/test_* "$build"/tests/gpu/bench_*; do [ -x "$t" ] && bins+=("$t"); done
cp "${bins[@]}" "$stage/bin/"

# Shared libraries the binaries resolve here, minus the C runtime and the CUDA stack.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvidia)'
for b in "${bins[@]}"; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
done

# Open MPI's launcher, daemons and plugins as Debian ships them (relocated with OPAL_PREFIX).
(cd "$stage/debs" && apt-get download -q openmpi-bin openmpi-common libopenmpi3 libpmix2 \
   libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 \
   librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libmunge2 libnuma1 >/dev/null)
tar -C "$stage" -cJf "$out" bin lib debs
echo "bundle: $out ($(du -h "$out" | cut -f1))"
