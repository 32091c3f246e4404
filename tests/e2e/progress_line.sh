#!/usr/bin/env bash
# A long run shows rank 0's progress line on stderr (plain lines, no carriage returns, when
# stderr is not a terminal), ending with a final line; --quiet shows none.
# The run is made long by stopping rank 1 (SIGSTOP, this test's own process) once rank 0 has set
# up its line, and going on only once a periodic line is printed: the line is due 5 s into the
# run, and whether a run of so many iterations lasts that long would depend on the machine's
# speed and load. Rank 0 prints the line while it waits for rank 1.
# Usage: progress_line.sh RIDGELINE_BIN REPO_DIR
set -uo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
stopped=""
cleanup() {
  if [ -n "$stopped" ]; then kill -CONT "$stopped" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "progress_line: $*" >&2; exit 1; }
children() { cat /proc/"$1"/task/*/children 2>/dev/null; }
# The quick roofs (their first line on stdout comes after rank 0 set up its progress line), then
# a few iterations.
run=(run --config "$repo/models/tiny.toml" --tp 2 --warmup 1 --iters 20 --backend host)

# stalled NAME [options...]: the run into NAME.h5 (its output in NAME.log and NAME.err), rank 1
# stopped from the roofs' first line until rank 0's stderr holds a periodic line (at most 60 s),
# or for 8 s (past the line's 5 s period) under --quiet, which prints none.
stalled() {
  local name=$1 p
  shift
  timeout 240 mpiexec -n 2 --oversubscribe "$bin" "${run[@]}" "$@" --out "$work/$name.h5" \
    >"$work/$name.log" 2>"$work/$name.err" &
  local job=$!
  # Rank 1: the child of mpiexec (the child of timeout) with that rank in its environment.
  stopped=""
  for _ in $(seq 1 1200); do
    # shellcheck disable=SC2046 # one pid per word
    for p in $(children $(children "$job")); do
      grep -qx "OMPI_COMM_WORLD_RANK=1" < <(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) && stopped=$p
    done
    [ -z "$stopped" ] || break
    sleep 0.05
  done
  [ -n "$stopped" ] || { kill "$job"; fail "$name: rank 1 not found"; }
  for _ in $(seq 1 2400); do
    grep -q "measuring a short version of the roofs" "$work/$name.log" && break
    sleep 0.05
  done
  kill -STOP "$stopped" 2>/dev/null || fail "$name: the run ended before rank 1 was stopped"
  if [[ " $* " == *" --quiet "* ]]; then
    sleep 8
  else
    for _ in $(seq 1 600); do
      grep -q "^run: .*elapsed [0-9]" "$work/$name.err" && break
      sleep 0.1
    done
  fi
  kill -CONT "$stopped"
  stopped=""
  wait "$job" || { cat "$work/$name.log" "$work/$name.err"; fail "$name: the run failed"; }
}

stalled a
cat "$work/a.err"
grep -Eq "^run: .*elapsed [0-9]" "$work/a.err" || fail "no periodic progress line"
grep -Eq "^run: done in [0-9]" "$work/a.err" || fail "no final progress line"
if grep -q $'\r' "$work/a.err"; then fail "carriage returns in a log file"; fi
if grep -q "^run: " "$work/a.log"; then fail "progress on stdout"; fi
# One line a few seconds at most: never two within 2 s, by the times the lines print.
python3 - "$work/a.err" <<'PY' || fail "two progress lines within 2 s"
import re, sys
def seconds(text):  # as the line writes it: "42 s", "3 min 05 s" or "1.5 h"
    m = re.fullmatch(r"(\d+) min (\d+) s", text)
    if m:
        return 60 * int(m[1]) + int(m[2])
    return 3600 * float(text[:-2]) if text.endswith(" h") else int(text[:-2])
times = [seconds(m[1]) for m in re.finditer(r"^run: .*; elapsed (.+?)(?:, ETA .*)?$",
                                             open(sys.argv[1]).read(), re.M)]
assert times and all(b - a >= 2 for a, b in zip(times, times[1:])), times
PY
grep -q "^wrote $work/a.h5" "$work/a.log" || fail "no file written"

stalled b --quiet
if grep -q "^run: " "$work/b.err"; then cat "$work/b.err"; fail "--quiet printed progress"; fi
grep -q "^wrote $work/b.h5" "$work/b.log" || fail "no file written under --quiet"
echo "progress line ok"
