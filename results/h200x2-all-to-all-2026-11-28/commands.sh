#!/usr/bin/env bash
# 2 x H200 (NV18), one job: NCCL all-to-all beside all-gather at 2 ranks over NVLink, then over
# the host path, 8 KiB to 1 GiB per rank (bf16, out of place), the fitted roof per collective.
export NCCL_NVLS_ENABLE=0
for t in nvlink host; do
  mpirun --bind-to none --map-by slot -np 2 build-gpu/src/ridgeline collectives \
    --collectives all_to_all,all_gather --transport "$t" -b 8K -e 1G --timeout 150 \
    --out "a2a_$t.h5" >"collectives_$t.txt"
done
mpirun --bind-to none --map-by slot -np 2 build-gpu/src/ridgeline env >env.txt
