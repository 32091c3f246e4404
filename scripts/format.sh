#!/usr/bin/env bash
# Formats every C++/CUDA source with the project's .clang-format (not the CMake templates
# *.hpp.in, whose @VARIABLES@ it would split); `--check` reports files that
# would change and exits non-zero instead of rewriting them.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
if [ "${1:-}" = "--check" ]; then
  clang-format --dry-run --Werror "${files[@]}"
else
  clang-format -i "${files[@]}"
fi
