#!/usr/bin/env bash
# End to end without a GPU: `model` predicts a Mixtral layer along --ep (exit 0; the dispatch and
# combine all-to-alls priced over each EP group, none crossing at ep 1; the all-to-all table and
# its crossover line; the same in --json and a valid predicted file).
# Usage: model_moe.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bin" model --config "$repo/models/mixtral-8x7b.toml" --layers 1 \
  --hardware "$repo/models/hardware/h200-sxm.toml" --ep 1,2,4,8 --dp 8 --batch 1 --seq 4096 \
  --routing zipf:1.2 --routing-seed 7 --out "$work/moe.h5" --json "$work/moe.json" |
  tee "$work/moe.log"
grep -q "^MoE all-to-all (dispatch + combine, zipf:1.2 routing)" "$work/moe.log"
grep -Eq "^all-to-all crossover: the all-to-all (exceeds|stays below) the compute- and HBM-bound time" \
  "$work/moe.log"
grep -q "interconnect all_to_all x8 intra: preset nvlink" "$work/moe.log"
"$bin" validate "$work/moe.h5"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
d = json.load(open(f"{work}/moe.json"))
moe = d["moe"]
assert [r["ep"] for r in moe] == [1, 2, 4, 8], moe
assert moe[0]["all_to_all_ns"] == 0, moe[0]
assert all(r["all_to_all_ns"] > 0 for r in moe[1:]), moe
assert all(r["compute_ns"] > 0 for r in moe), moe
assert len(d["moe_crossovers"]) == 1, d["moe_crossovers"]
assert [p["ep"] for p in d["points"]] == [1, 2, 4, 8], d["points"]
PY
# EP x TP: at TP 2 the gather of the blocks priced on the TP link, the all-to-all on the EP
# group's; an EP degree that does not divide tp x dp fails that point alone.
"$bin" model --config "$repo/models/mixtral-8x7b.toml" --layers 1 \
  --hardware "$repo/models/hardware/h200-sxm.toml" --tp 2 --ep 2,4,8 --dp 2 --batch 1 \
  --seq 4096 --routing uniform --json "$work/eptp.json" | tee "$work/eptp.log"
grep -q "interconnect all_gather x2 intra" "$work/eptp.log"
grep -q "interconnect all_to_all x4 intra" "$work/eptp.log"
python3 - "$work" <<'PY'
import json, sys
d = json.load(open(f"{sys.argv[1]}/eptp.json"))
status = [p["status"] for p in d["points"]]
assert status[:2] == ["ok", "ok"], status
assert "--ep dividing tp x dp" in status[2], status
PY
echo "model_moe: ok"
