#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, then run the default
# configuration on 2 MPI ranks (tensor parallel 2). Without a GPU this is the host backend
# with the embedded default model; the HDF5 file lands under results/ unless OUT is given.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
scripts/install-deps.sh
scripts/build.sh "$repo/build"
export NCCL_NVLS_ENABLE=0
mpi_flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || mpi_flags+=(--allow-run-as-root)
out=${OUT:-results/ridgeline-$(date -u +%Y%m%dT%H%M%SZ).h5}
mkdir -p "$(dirname "$out")"
mpirun "${mpi_flags[@]}" -np 2 -x OPENBLAS_NUM_THREADS=1 -x NCCL_NVLS_ENABLE \
  build/src/ridgeline run --tp 2 --out "$out" "$@"
build/src/ridgeline validate "$out"
