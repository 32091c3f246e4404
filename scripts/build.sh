#!/usr/bin/env bash
# Configures and builds ridgeline into BUILD_DIR (default build/): Release, Ninja, all cores.
# The CUDA backend is compiled whenever nvcc and NCCL are found (a GPU is not needed to build).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
shift $(( $# > 0 ? 1 : 0 ))
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j "$(nproc)"
