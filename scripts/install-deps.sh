#!/usr/bin/env bash
# Installs what ridgeline needs to build and test on Debian 12 / Ubuntu 24.04, skipping what is
# already there (so it also works on machines that reach no package registry).
set -euo pipefail

# libhdf5-openmpi-dev: parallel HDF5 (MPI-IO), installed beside the serial libhdf5-dev; CMake
# prefers it, and every rank then writes its own timeline into one file.
packages=(build-essential cmake ninja-build pkg-config git libopenmpi-dev openmpi-bin
          libhdf5-dev libhdf5-openmpi-dev hdf5-tools libcli11-dev libgtest-dev libopenblas-dev
          python3 python3-pip clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Python analysis: h5py, numpy, matplotlib, pandas, pyarrow, pytest (pip first; Debian packages
# where pip refuses).
if ! python3 -c "import h5py, numpy, matplotlib, pandas, pytest" 2>/dev/null; then
  if ! python3 -m pip install -q h5py numpy matplotlib pandas pyarrow pytest 2>/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
      python3-h5py python3-numpy python3-matplotlib python3-pandas python3-pytest
  fi
fi
python3 -c "import h5py, numpy, matplotlib, pandas, pytest"
# pyarrow writes Parquet only; Debian 12 does not package it, so it comes from pip or not at all.
if ! python3 -c "import pyarrow" 2>/dev/null &&
  ! python3 -m pip install -q pyarrow 2>/dev/null; then
  echo "install-deps: pyarrow could not be installed: export --format parquet is unavailable"
fi

# cuDNN and its frontend for --attention cudnn, from the pip wheels into .deps/cudnn (CMake looks
# there): only where a CUDA compiler will build the CUDA backend, since the cuDNN path needs it.
repo=$(cd "$(dirname "$0")/.." && pwd)
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ ! -f "$repo/.deps/cudnn/include/cudnn_frontend.h" ]; then
    echo "install-deps: installing the cuDNN wheels (nvidia-cudnn-cu13, nvidia-cudnn-frontend)"
    timeout 900 python3 -m pip install -q --target "$repo/.deps/cudnn" nvidia-cudnn-cu13 \
      nvidia-cudnn-frontend ||
      echo "install-deps: the cuDNN wheels could not be installed: --attention cudnn is not compiled"
  fi
else
  echo "install-deps: no CUDA compiler: the CUDA backend and --attention cudnn are not compiled"
fi
