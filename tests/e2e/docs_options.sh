#!/usr/bin/env bash
# Every option the README and docs/ name is one that some `--help` offers: ridgeline's
# subcommands, the Python package's commands, or one of the few other tools the pages show
# (mpirun, srun, sbatch, the GPU check and benchmark scripts), listed below.
# Usage: docs_options.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bin" --help >"$work/help.txt"
for cmd in run sweep roofs collectives env validate report compare model; do
  "$bin" "$cmd" --help >>"$work/help.txt"
done
(
  cd "$repo/scripts"
  for cmd in summary plot schedule trace ridgeline scaling bars export latency; do
    python3 -m ridgeline_analysis "$cmd" --help
  done
) >>"$work/help.txt"
grep -oE -- "--[a-z][a-z0-9-]*" "$work/help.txt" | sort -u >"$work/offered.txt"

# Options of other tools that the pages show, and anchors that look like options.
cat >>"$work/offered.txt" <<'EOF'
--allow-run-as-root
--array
--bind-to
--cpu-bind
--cpus-per-task
--distribution
--exclusive
--gpus-per-task
--map-by
--mpi
--ntasks
--ntasks-per-node
--output
--oversubscribe
--wait
--test-dir
--only
--bundle
--impl
--reps
--head-dim
--no-backward
--non-causal
--ragged
--config-files
--allreduce-oneshotpushpush-lltwoshot
EOF
sort -u -o "$work/offered.txt" "$work/offered.txt"

status=0
for page in "$repo/README.md" "$repo"/docs/*.md; do
  while read -r option; do
    if ! grep -qx -- "$option" "$work/offered.txt"; then
      echo "${page#"$repo"/}: $option is no option of any --help" >&2
      status=1
    fi
  done < <(grep -oE -- "--[a-z][a-z0-9-]*" "$page" | sort -u)
done
[ "$status" -eq 0 ] && echo "e2e docs options ok"
exit "$status"
