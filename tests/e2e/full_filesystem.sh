#!/usr/bin/env bash
# Writers on a full filesystem (two small tmpfs mounts this test makes and removes; root only,
# else it reports itself skipped). Every writer writes a temporary file, checks every write and
# the close, then renames it:
# - a summary (--json, --markdown, compare --json) that does not fit goes to the fallback in
#   $TMPDIR (exit 4) and leaves nothing at the path asked for, and a file already there stays
#   as it was;
# - when the fallbacks are full too, the job ends with exit 1 and no crash, and no temporary or
#   partial file is left on either filesystem (run, sweep, per-node layout).
# Usage: full_filesystem.sh RIDGELINE_BIN REPO_DIR
set -uo pipefail
bin=$1 repo=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "full_filesystem.sh: mounting a tmpfs needs root; skipped"
  exit 77
fi
work=$(mktemp -d)
full=$work/full spare=$work/spare
mkdir "$full" "$spare" "$work/tmp"
cleanup() {
  umount "$full" 2>/dev/null
  umount "$spare" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mount -t tmpfs -o size=512k tmpfs "$full" && mount -t tmpfs -o size=512k tmpfs "$spare" ||
  { echo "full_filesystem.sh: cannot mount a tmpfs here; skipped"; exit 77; }
# Empties DIR (but old.md) and fills it up to FREE_KIB kibibytes left.
fill() { # DIR FREE_KIB
  find "$1" -type f ! -name old.md -delete
  dd if=/dev/zero of="$1/fill" bs=1k count=$(($(df -k --output=avail "$1" | tail -1) - $2)) 2>/dev/null
}
tiny=(--config "$repo/models/tiny.toml" --warmup 1 --iters 2 --roofs none --backend host -q)
failures=0
fail() { echo "FAIL [$case]: $*"; sed 's/^/    /' "$work/err.log" | head -20; failures=$((failures + 1)); }
# Ranks see TMPDIR (the fallback directory); mpiexec keeps its own session files elsewhere.
job() { # TMPDIR ARGS...
  local tmp=$1
  shift
  (cd "$spare" && timeout 120 mpiexec -n 2 --oversubscribe env TMPDIR="$tmp" "$bin" "$@") \
    >"$work/out.log" 2>"$work/err.log"
}
leftovers() { # DIR...: anything but the filler and the earlier summary
  find "$@" -type f ! -name fill ! -name old.md
}

# 1. Summaries that do not fit: the fallback, nothing at the target, an old target unchanged.
case="run --json/--markdown on a full filesystem"
echo "an earlier summary" >"$full/old.md"
fill "$full" 0
fill "$spare" 256
job "$work/tmp" run "${tiny[@]}" --tp 2 --out "$work/run.h5" --json "$full/r.json" --markdown "$full/old.md"
rc=$?
[ "$rc" -eq 4 ] || fail "exit $rc, not 4"
grep -q "ridgeline: cannot write --json '$full/r.json'" "$work/err.log" || fail "no reason given"
[ -z "$(leftovers "$full")" ] || fail "left $(leftovers "$full")"
ls "$work"/tmp/r-*.json "$work"/tmp/old-*.md >/dev/null 2>&1 || fail "no fallback in \$TMPDIR"
python3 -c "import json,glob,sys; json.load(open(glob.glob(sys.argv[1])[0]))" "$work/tmp/r-*.json" || fail "bad fallback JSON"
"$bin" validate "$work/run.h5" >/dev/null || fail "the HDF5 file is not valid"
[ "$(cat "$full/old.md")" = "an earlier summary" ] || fail "the earlier old.md changed"
echo "ok   [$case]: exit $rc"
rm -f "$work"/tmp/*

case="compare --json on a full filesystem"
"$bin" compare "$work/run.h5" "$work/run.h5" --json "$full/c.json" >"$work/out.log" 2>"$work/err.log"
rc=$?
[ "$rc" -eq 4 ] || fail "exit $rc, not 4"
[ -z "$(leftovers "$full")" ] || fail "left $(leftovers "$full")"
echo "ok   [$case]: exit $rc"

# 2. Everything full (the target, $TMPDIR and the working directory): exit 1, no crash, nothing
#    left. Free space is chosen so that a write gets partway (headers fit, the rest does not).
for free in 0 48 160; do
  for args in "run --tp 2" "run --tp 2 --file-layout per-node" "sweep --tp 1,2 --batch 1,2 --repeats 1"; do
    case="$args, $free KiB free everywhere"
    fill "$full" "$free"
    fill "$spare" "$free"
    # shellcheck disable=SC2086 # the command's words
    job "$full" $args "${tiny[@]}" --out "$full/r.h5" --json "$full/r.json"
    rc=$?
    [ "$rc" -eq 1 ] || [ "$rc" -eq 0 ] || [ "$rc" -eq 4 ] || fail "exit $rc (a crash or a hang?)"
    grep -qi "segmentation\|signal\|core dumped" "$work/err.log" && fail "crashed"
    if [ "$rc" -eq 1 ]; then
      grep -q "^step time\|^sweep\|^ridgeline sweep" "$work/out.log" || fail "no summary on stdout"
      # A sweep keeps the points it wrote before the filesystem filled, marked incomplete; a
      # summary that fitted is whole.
      for f in $(leftovers "$full" "$spare"); do
        case $f in
        *.tmp.*) fail "temporary file $f left" ;;
        *.h5) [[ "$("$bin" validate "$f" 2>&1)" == *"incomplete: the job ended"* ]] ||
          fail "$f is left and not marked incomplete" ;;
        *.json) python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$f" 2>/dev/null ||
          fail "partial JSON $f left" ;;
        *) fail "partial file $f left" ;;
        esac
      done
    fi
    echo "ok   [$case]: exit $rc"
  done
done
[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "full filesystem ok"
