#!/usr/bin/env bash
# One H200, one job: the build before the held uploads (B) and the build with them (A), each
# from scripts/build.sh build-gpu, taking turns twice (B, A, B, A) over three runs of
# llama3-8b (32 layers, bf16, TP 1, --roofs none). NCCL_NVLS_ENABLE=0 throughout.
C="--config models/llama3-8b.toml --phase mixed --seq 2048 --tp 1 --warmup 5 --iters 30 --roofs none --quiet"
for turn in 1 2; do
  for R in before/build-gpu/src/ridgeline build-gpu/src/ridgeline; do
    # Decode only: 64 sequences at contexts drawn from 256 to 2048.
    $R run $C --prefill-seqs 0 --decode-batch 64 --context-dist uniform:256:2048 --context-seed 1 --out dec.h5
    # Mixed: one 512-token chunk after 512 cached tokens beside 32 such decode tokens.
    $R run $C --prefill-seqs 1 --chunk 512 --chunk-context 512 --decode-batch 32 \
      --context-dist uniform:256:2048 --context-seed 1 --out mix.h5
    # A trace replay: 60 requests at 32 per second.
    $R run --config models/llama3-8b.toml --phase mixed --seq 2048 --tp 1 --warmup 3 --iters 10 \
      --roofs none --quiet --trace-gen rate=32,requests=60,prompt=128:1024,output=32:256,seed=1 \
      --token-budget 2048 --chunk 512 --max-batch 64 --out trace.h5
  done
done
# Then, with build-gpu: ctest -L gpu (test_peer_exchange_cuda_np2 again alone, see the page).
