#!/usr/bin/env bash
# The reporters against golden outputs: `ridgeline validate` and `ridgeline report` on a
# committed run, sweep, roofs and collectives file, `ridgeline compare` of the run with itself
# (console, --json, --markdown) and the Python summary, each compared line for line with the text
# committed beside the files in tests/golden/. The files were measured once on the host backend
# (tests/golden/make_fixtures.sh); nothing here measures, so the outputs are fixed and any
# difference is a change of what the reporters print. After an intended change, regenerate with
# RIDGELINE_UPDATE_GOLDEN=1 and review the diff.
# Usage: golden_reports.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
repo=$(cd "$2" && pwd)
golden=$repo/tests/golden
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Relative paths, so that the outputs name the files the same way wherever the tree is.
cp "$golden"/*.h5 "$work/"
cd "$work"

outputs=()
capture() { # capture NAME CMD...: CMD's stdout into NAME
  local name=$1
  shift
  "$@" >"$name"
  outputs+=("$name")
}
for f in run sweep roofs coll; do
  capture "validate_$f.txt" "$bin" validate "$f.h5"
  capture "report_$f.txt" "$bin" report "$f.h5"
done
status=0
"$bin" compare run.h5 run.h5 --json compare_self.json --markdown compare_self.md \
  >compare_self.txt || status=$?
[ "$status" -eq 0 ] || { echo "compare of a file with itself exited $status" >&2; exit 1; }
outputs+=(compare_self.txt compare_self.json compare_self.md)
capture summary_run.txt env PYTHONPATH="$repo/scripts" python3 -m ridgeline_analysis summary run.h5
capture summary_sweep.txt env PYTHONPATH="$repo/scripts" python3 -m ridgeline_analysis summary \
  sweep.h5

if [ "${RIDGELINE_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "${outputs[@]}" "$golden/"
  echo "golden outputs rewritten in $golden: review them with git diff"
  exit 0
fi
failed=0
for name in "${outputs[@]}"; do
  if ! diff -u "$golden/$name" "$name" >"$name.diff"; then
    echo "golden: $name differs from tests/golden/$name:" >&2
    head -40 "$name.diff" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || { echo "regenerate with RIDGELINE_UPDATE_GOLDEN=1 if the change is intended" >&2; exit 1; }
echo "e2e golden reports ok (${#outputs[@]} outputs)"
