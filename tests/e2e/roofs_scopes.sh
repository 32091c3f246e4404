#!/usr/bin/env bash
# Two nodes on one host, named by RIDGELINE_NODE_NAME (2 ranks each): `roofs` writes
# interconnect rows within a node (intra), one rank per node (inter) and over all four ranks
# (hier), and both validators accept the file; a TP 2 x DP 2 train run across the two nodes
# attributes its TP collectives to the intra roof and its data-parallel reduction to the inter
# one (report and compare say so), and its summary holds each node's figures; `model --nodes 2`
# places the same grid and names the measured roofs it used; a collectives sweep over the four
# ranks records its group as hier. Scopes and names only: nothing timed is asserted.
# Usage: roofs_scopes.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# two_nodes ARGS...: ridgeline ARGS on ranks 0-1 as node-a and ranks 2-3 as node-b.
two_nodes() {
  mpiexec --oversubscribe -n 2 -x RIDGELINE_NODE_NAME=node-a "$bin" "$@" \
    : -n 2 -x RIDGELINE_NODE_NAME=node-b "$bin" "$@"
}

two_nodes roofs --quick --collectives all_reduce,sendrecv --out "$work/roofs.h5" \
  | tee "$work/roofs.log"
"$bin" validate "$work/roofs.h5"
"$bin" report "$work/roofs.h5" > "$work/roofs_report.log"
for row in "x2 +intra +1 node" "x2 +inter +2 nodes" "x4 +hier +2 nodes"; do
  grep -Eq "interconnect all_reduce +$row" "$work/roofs_report.log" ||
    { echo "roofs report lacks all_reduce '$row'" >&2; exit 1; }
done

two_nodes run --config "$repo/models/tiny.toml" --phase train --tp 2 --dp 2 --batch 4 \
  --warmup 1 --iters 2 --roofs "$work/roofs.h5" --out "$work/run.h5" > "$work/run.log"
"$bin" validate "$work/run.h5"
"$bin" report "$work/run.h5" > "$work/run_report.log"
grep -Eq "^op .* ceiling +eff +scope$" "$work/run_report.log"
grep -Eq "^allreduce_mlp .* interconnect .* intra$" "$work/run_report.log"
grep -Eq "^dp_allreduce .* interconnect .* inter$" "$work/run_report.log"
# Each node's figures, and a verdict on slow nodes (which one, if any, is the machine's business).
grep -Eq "^node-a +2 " "$work/run_report.log"
grep -Eq "^node-b +2 " "$work/run_report.log"
grep -Eq "^slow nodes: " "$work/run_report.log"
# compare names each collective's scope beside its ceiling.
"$bin" compare "$work/run.h5" "$work/run.h5" > "$work/compare.log"
grep -Eq "^dp_allreduce .* interconnect \(inter\) / interconnect \(inter\)" "$work/compare.log"

"$bin" model --roofs "$work/roofs.h5" --config "$repo/models/tiny.toml" --backend host \
  --phase train --tp 2 --dp 2 --batch 4 --nodes 2 --gpus-per-node 2 --out "$work/model.h5" \
  > "$work/model.log"
"$bin" validate "$work/model.h5"
for scope in intra inter; do
  grep -q "^interconnect all_reduce x2 $scope: the measured $scope roof, at 1 point(s)$" \
    "$work/model.log"
done

two_nodes collectives --collectives all_reduce --max-bytes 16K --warmup 1 --iters 2 \
  --out "$work/coll.h5" > "$work/coll.log"
"$bin" validate "$work/coll.h5"

PYTHONPATH="$repo/scripts" python3 - "$work" <<'PY'
import sys

import h5py

from ridgeline_analysis import load, validate

work = sys.argv[1]
for name in ("roofs", "run", "model", "coll"):
    path = f"{work}/{name}.h5"
    assert validate.problems(path) == [], (path, validate.problems(path))


def text(values):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


with h5py.File(f"{work}/roofs.h5", "r") as f:
    assert int(f.attrs["nodes"]) == 2
    assert f["stack"].attrs["node_names"] == "RIDGELINE_NODE_NAME"
    assert text(f["topology/host"][()]) == ["node-a", "node-a", "node-b", "node-b"]
    assert len(set(text(f["topology/os_host"][()]))) == 1  # one machine
    rows = f["roofs/interconnect"][()]
    got = {(c, int(g), s, int(n)) for c, g, s, n in zip(text(rows["collective"]),
           rows["group_size"], text(rows["scope"]), rows["group_nodes"])}
    want = {(c, g, s, n) for c in ("all_reduce", "sendrecv")
            for g, s, n in ((2, "intra", 1), (2, "inter", 2), (4, "hier", 2))}
    assert got == want, got
roofs = load(f"{work}/roofs.h5").roofs
assert roofs.interconnect_rows("all_reduce", "inter").size == 1

with h5py.File(f"{work}/run.h5", "r") as f:
    ops = f["summary/ops"][()]
    scope = dict(zip(text(ops["name"]), text(ops["scope"])))
    ceiling = dict(zip(text(ops["name"]), text(ops["ceiling"])))
    assert scope["allreduce_mlp"] == "intra" and scope["dp_allreduce"] == "inter", scope
    assert scope["fc1_gemm"] == "", scope
    assert ceiling["dp_allreduce"] == "interconnect", ceiling
    nodes = f["summary/nodes"][()]
    assert text(nodes["node"]) == ["node-a", "node-b"] and list(nodes["ranks"]) == [2, 2], nodes
    assert "slow_nodes" in f["summary"].attrs
run = load(f"{work}/run.h5")
assert run.summary.nodes is not None and run.summary.nodes.size == 2

with h5py.File(f"{work}/model.h5", "r") as f:
    p = f["points/0/prediction"][()]
    used = dict(zip(text(p["name"]), zip(text(p["interconnect_source"]),
                                         text(p["interconnect_scope"]))))
    assert used["allreduce_mlp"] == ("roofs", "intra"), used
    assert used["dp_allreduce"] == ("roofs", "inter"), used

with h5py.File(f"{work}/coll.h5", "r") as f:
    rows = f["roofs/interconnect"][()]
    assert text(rows["scope"]) == ["hier"] and list(rows["group_nodes"]) == [2], rows
print("roofs scopes ok")
PY
echo "e2e roofs scopes ok"
