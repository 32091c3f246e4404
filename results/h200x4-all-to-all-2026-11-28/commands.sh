#!/usr/bin/env bash
# 4 x H200 (NV18 between every pair), one job: NCCL all-to-all beside all-gather at 4 ranks over
# NVLink (8 KiB-1 GiB per rank), the host path (to 256 MiB) and the network path (to 64 MiB),
# bf16, out of place, the fitted roof per collective; then every GPU's own roofs at once against
# the H200 description shipped with the project.
export NCCL_NVLS_ENABLE=0
M="mpirun --bind-to none --map-by slot -np 4"
for spec in nvlink:1G host:256M net:64M; do
  t=${spec%%:*}; e=${spec#*:}
  $M build-gpu/src/ridgeline collectives --collectives all_to_all,all_gather --transport "$t" \
    -b 8K -e "$e" --timeout 140 --out "a2a_$t.h5" >"collectives_$t.txt"
done
$M build-gpu/src/ridgeline roofs --reference models/hardware/h200-sxm.toml --check-gpus \
  --transport nvlink --out roofs_gpus.h5 >roofs_gpus.log   # exit 3: see the page
$M build-gpu/src/ridgeline env >env.txt
