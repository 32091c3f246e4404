#!/usr/bin/env bash
# Input that every rank must refuse before any work, one group of cases per rule of
# docs/ERRORS.md. For each case: every rank exits 2 (no hang, no crash), the ranks print exactly
# one line in all (on stderr, with the expected text), nothing is printed on stdout, no file is
# created, and every input file is left as it was.
#   same-file  an output that is another output or an input (spellings, hard and symbolic links)
#   sizes      sizes whose products would overflow, plans too large, a config line too long
#   readers    a file to read that is a FIFO, a directory or a device, also behind a per-node
#              file's external link; an output that is a FIFO; --timeout 1e10 is "never"
#   env        RIDGELINE_* switches with a value they do not take; a set one is in /stack/env
#   messages   an option given twice, an unknown command, a quoted number in a config file
# Usage: refused_input.sh RIDGELINE_BIN REPO_DIR GROUP
set -uo pipefail
bin=$1 repo=$2 group=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The files of the cases apart from the harness's own (logs, each rank's output).
mkdir "$work/files"
cd "$work/files"  # a default output path (results/...) would land here

# Inputs: their contents do not matter, every case is refused before they are read.
echo "an input" >in.h5
echo "another input" >other.h5
ln in.h5 hard.h5
ln -s in.h5 sym.h5
mkdir sub dir "$work/pernode"
mkfifo fifo
cp "$repo/models/tiny.toml" run.toml
printf '[roofs]\nquick = true\n' >roofs.toml
printf '[collectives]\niters = 1\n' >coll.toml
printf '[run]\nbatch = "4"\n' >quoted.toml
printf '[run]\nlayers = %s\n' "$(head -c 30000 /dev/zero | tr '\0' 9)" >long.toml
inventory() { find . -type f -print0 | sort -z | xargs -0 md5sum; }
inventory >"$work/before"

failures=0
# check EXPECTED_TEXT COMMAND ARGS... (environment assignments may come first, through env)
check() {
  local expected=$1
  shift
  local case="$*"
  rm -rf "$work/ranks" && mkdir "$work/ranks"
  timeout 60 mpiexec -n 2 --oversubscribe bash -c \
    'r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-x}}; "$@" >"$0/out.$r" 2>"$0/err.$r"; echo $? >"$0/rc.$r"' \
    "$work/ranks" "$@" >"$work/mpiexec.log" 2>&1
  local status=$? problem=""
  [ "$status" -ne 124 ] || problem="the job hung"
  for r in 0 1; do
    local rc
    rc=$(cat "$work/ranks/rc.$r" 2>/dev/null || echo none)
    [ "$rc" = 2 ] || problem="${problem:+$problem; }rank $r exited $rc, not 2"
  done
  local lines
  lines=$(cat "$work"/ranks/err.* | grep -c .)
  [ "$lines" -eq 1 ] || problem="${problem:+$problem; }$lines lines on stderr, not 1"
  grep -qF -- "$expected" "$work"/ranks/err.* || problem="${problem:+$problem; }no '$expected' on stderr"
  [ -z "$(cat "$work"/ranks/out.*)" ] || problem="${problem:+$problem; }output on stdout"
  inventory | cmp -s - "$work/before" || problem="${problem:+$problem; }a file was written or changed"
  [ ! -e results ] || problem="${problem:+$problem; }results/ was created"
  if [ -n "$problem" ]; then
    echo "FAIL [$case]: $problem"
    cat "$work"/ranks/err.* "$work"/ranks/out.* | head -c 2000 | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok   [$case]: $(cat "$work"/ranks/err.* | head -c 300)"
  fi
  rm -rf results
  inventory >"$work/before"
}

# A run that must succeed on 2 ranks; its file stays for the caller to read.
run_ok() {
  local out=$1
  shift
  if ! timeout 120 mpiexec -n 2 --oversubscribe "$@" --out "$out" >"$work/ok.log" 2>&1; then
    echo "FAIL [$*]: did not succeed"
    sed 's/^/    /' "$work/ok.log"
    failures=$((failures + 1))
  else
    echo "ok   [$*]"
  fi
}

run=(run --config "$work/files/run.toml" --dp 2 --warmup 0 --iters 1 --roofs none --backend host)
sweep=(sweep --config "$work/files/run.toml" --warmup 0 --iters 1 --backend host)
model=(model --config "$work/files/run.toml" --tp 2)
same="is the same file as"
case $group in
same-file)
  check "--json './x.h5' $same --out 'x.h5'" "$bin" "${run[@]}" --out x.h5 --json ./x.h5
  check "--markdown 'sub/../x.h5' $same --out 'x.h5'" "$bin" "${run[@]}" --out x.h5 --markdown sub/../x.h5
  check "--json '$work/files/x.h5' $same --out 'x.h5'" "$bin" "${run[@]}" --out x.h5 --json "$work/files/x.h5"
  check "--out './in.h5' $same the input --roofs 'in.h5'" "$bin" "${run[@]/none/in.h5}" --out ./in.h5
  check "--out 'hard.h5' $same the input --roofs 'in.h5'" "$bin" "${run[@]/none/in.h5}" --out hard.h5
  check "--out 'sym.h5' $same the input --roofs 'in.h5'" "$bin" "${run[@]/none/in.h5}" --out sym.h5
  check "--json 'run.toml' $same the input --config '$work/files/run.toml'" "$bin" "${run[@]}" --out x.h5 --json run.toml
  check "--markdown 'sub/../in.h5' $same the input --roofs 'in.h5'" "$bin" "${sweep[@]}" --roofs in.h5 --out x.h5 --markdown sub/../in.h5
  check "--out 'in.h5' $same the input --validate 'in.h5'" "$bin" "${model[@]}" --validate in.h5 --out in.h5
  check "--json './hard.h5' $same the input --roofs 'in.h5'" "$bin" "${model[@]}" --roofs in.h5 --json ./hard.h5
  check "--json 'in.h5' $same the input file A 'in.h5'" "$bin" compare in.h5 other.h5 --json in.h5
  check "--markdown 'sym.h5' $same the input file A 'in.h5'" "$bin" compare in.h5 other.h5 --markdown sym.h5
  check "--out './roofs.toml' $same the input --config 'roofs.toml'" "$bin" roofs --config roofs.toml --out ./roofs.toml
  check "--out 'sub/../coll.toml' $same the input --config 'coll.toml'" "$bin" collectives --config coll.toml --out sub/../coll.toml
  ;;
sizes)
  check "--gemm-sizes: expected an integer from 1 to 1048576, got '4294967296'" "$bin" roofs --quick --gemm-sizes 4294967296 --out x.h5
  check "is not MxNxK with M, N, K from 1 to 1048576" "$bin" roofs --quick --gemm-shapes 8x8x4294967296 --out x.h5
  check "plans more than 1000 sizes" "$bin" collectives --backend host --step-factor 1.0000001 --max-bytes 1G --out x.h5
  check "long.toml:2: a line of 30009 characters (at most 4096)" "$bin" run --config long.toml --dp 2 --out x.h5
  ;;
readers)
  check "file: 'fifo' is a FIFO, not a regular file" "$bin" validate fifo
  check "files: 'dir' is a directory, not a regular file" "$bin" report in.h5 dir
  check "a: 'fifo' is a FIFO, not a regular file" "$bin" compare fifo in.h5
  check "--validate: '/dev/null' is a device, not a regular file" "$bin" "${model[@]}" --validate /dev/null
  check "--config: 'fifo' is a FIFO, not a regular file" "$bin" run --config fifo --dp 2 --out x.h5
  # An output that is a FIFO would block the end of the job: refused before any work.
  check "--out 'fifo': is a FIFO, not a regular file" "$bin" "${run[@]}" --out fifo
  check "--json 'fifo': is a FIFO, not a regular file" "$bin" "${run[@]}" --out x.h5 --json fifo
  check "--markdown 'fifo': is a FIFO, not a regular file" "$bin" "${sweep[@]}" --out x.h5 --markdown fifo
  # A per-node file whose node file became a FIFO: every reader says so instead of blocking.
  run_ok "$work/pernode/p.h5" "$bin" "${run[@]}" --file-layout per-node
  mv "$work/pernode/p.node0.h5" "$work/pernode/kept.h5" && mkfifo "$work/pernode/p.node0.h5"
  for reader in "validate $work/pernode/p.h5" "report $work/pernode/p.h5" \
    "compare $work/pernode/p.h5 $work/pernode/p.h5"; do
    # shellcheck disable=SC2086 # the reader's words
    timeout 30 "$bin" $reader >"$work/reader.log" 2>&1
    rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 0 ] || ! grep -q "leads to '.*p.node0.h5', which is a FIFO" "$work/reader.log"; then
      echo "FAIL [$reader]: exit $rc"; sed 's/^/    /' "$work/reader.log"; failures=$((failures + 1))
    else
      echo "ok   [$reader]: $(head -c 200 "$work/reader.log")"
    fi
  done
  # A timeout beyond what the clock holds means never: the run ends normally.
  run_ok "$work/never.h5" "$bin" "${run[@]}" --timeout 1e10
  ;;
env)
  check "RIDGELINE_SKINNY_ROWS='abc': expected an integer from 1 to 16" env RIDGELINE_SKINNY_ROWS=abc "$bin" "${run[@]}" --out x.h5
  check "RIDGELINE_SKINNY_ROWS='17': expected an integer from 1 to 16" env RIDGELINE_SKINNY_ROWS=17 "$bin" "${run[@]}" --out x.h5
  check "RIDGELINE_PDL='yes': expected 0 (none), gemm" env RIDGELINE_PDL=yes "$bin" "${run[@]}" --out x.h5
  check "RIDGELINE_EPILOGUES='norm,bogus': expected 0 or a comma list" env RIDGELINE_EPILOGUES=norm,bogus "$bin" "${sweep[@]}" --out x.h5
  check "RIDGELINE_EPILOGUES='act,act'" env RIDGELINE_EPILOGUES=act,act "$bin" collectives --backend host --out x.h5
  # The options that replace the variables: a bad value named by its option, and any value
  # refused on the host backend, whose kernels they do not switch.
  check "--pdl 'yes': expected 0 (none), gemm" "$bin" "${run[@]}" --pdl yes --out x.h5
  check "--skinny-rows '0': expected an integer from 1 to 16" "$bin" "${sweep[@]}" --skinny-rows 0 --out x.h5
  check "--epilogues 'act,act': expected 0 or a comma list" "$bin" "${run[@]}" --epilogues act,act --out x.h5
  check "--pdl, --skinny-rows and --epilogues switch the CUDA backend's kernels: need the cuda backend" \
    "$bin" "${run[@]}" --epilogues 0 --out x.h5
  # Every RIDGELINE_* variable set is in the file's /stack/env, for compare to name.
  run_ok "$work/env.h5" env RIDGELINE_SKINNY_ROWS=8 RIDGELINE_ANY_NAME=kept "$bin" "${run[@]}"
  for name in RIDGELINE_SKINNY_ROWS RIDGELINE_ANY_NAME; do
    h5dump -d /stack/env "$work/env.h5" | grep -q "\"$name\"" ||
      { echo "FAIL: $name is not in /stack/env"; failures=$((failures + 1)); }
  done
  # /config records the switches: empty on the host backend, whose kernels they do not switch.
  for key in pdl skinny_rows epilogues; do
    h5dump -a "/config/$key" "$work/env.h5" | grep -q '""' ||
      { echo "FAIL: /config $key is not recorded empty on the host backend"; failures=$((failures + 1)); }
  done
  ;;
messages)
  check "--batch given 2 times: give it once" "$bin" "${run[@]}" --batch 1 --batch 2 --out x.h5
  check "unknown command 'runn': did you mean 'run'?" "$bin" runn --out x.h5
  check "unknown command 'comapre': did you mean 'compare'?" "$bin" comapre a.h5 b.h5
  check "a command is required (run, sweep," "$bin"
  check "quoted.toml:2: 'batch' takes a number: give it unquoted (batch = 4)" "$bin" run --config quoted.toml --dp 2 --out x.h5
  ;;
*)
  echo "unknown group '$group'" >&2
  exit 2
  ;;
esac

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed" >&2; exit 1; }
echo "refused input ($group) ok"
