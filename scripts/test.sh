#!/usr/bin/env bash
# Every test that runs without a GPU: build, then ctest (unit, mpi, e2e; gpu tests skip
# without a device), the Python analysis tests on a file the binary writes, and the Slurm
# scripts against a real local Slurm, one node and three in network namespaces, when this machine
# allows starting them (root).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
scripts/install-deps.sh
# The sources match the project's .clang-format (a formatting change fails here, not in review).
scripts/format.sh --check
scripts/build.sh "$repo/build"
export NCCL_NVLS_ENABLE=0 OPENBLAS_NUM_THREADS=1
ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)"
# The README's first command, the main job, as a newcomer runs it (the build above is reused).
main_job=$(mktemp -d)
OUT="$main_job/main-job.h5" scripts/setup.sh
rm -rf "$main_job"
RIDGELINE_BIN="$repo/build/src/ridgeline" python3 -m pytest -q scripts/tests
if [ "$(id -u)" -eq 0 ]; then
  scripts/slurm-ci.sh "$repo/build"
  scripts/slurm-multinode-ci.sh "$repo/build"
else
  echo "test.sh: Slurm tests not run: starting slurmctld/slurmd and network namespaces need root"
fi
