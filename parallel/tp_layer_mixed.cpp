// A mixed step on a TpStage: decode tokens and prefill chunks of several sequences in one
// step. The GEMMs and collectives run over every token of the step as the prefill schedule
// runs them; here, the attention, each sequence at its own context against its own block of
// the KV cache: a prefill chunk per call (equal ones batched), the decode tokens in one ragged
// call; the rotary of every row in one call, and the decode tokens' cache appends in one row
// scatter.
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/overlap_policy.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {

using namespace layer_op;

std::vector<OpSpec> stage_ops(const StageSpec& spec, AttentionImpl attention) {
  if (!spec.mixed()) {
    std::vector<OpSpec> ops = layer_ops(spec.model, spec.shape, attention);
    // A StageMlp at tp > 1 computes this rank's block of the tokens, gathered by the stage.
    if (spec.mlp != nullptr && spec.shape.tp > 1 && !spec.shape.sequence_parallel)
      ops.push_back(moe_allgather_op(spec.model, spec.shape));
    return ops;
  }
  return mixed_step_ops(spec.model, spec.mix, spec.shape.tp, spec.shape.dtype, attention,
                        spec.shape.sequence_parallel);
}

double mixed_cache_bytes(const ModelSpec& m, const StepMix& mix, int tp, DType dtype,
                         int64_t layers) {
  const double rows =
      static_cast<double>(mix.entries.size()) * static_cast<double>(mix_cache_rows(mix));
  const double row_bytes = 2.0 * static_cast<double>(local_kv_heads(m, tp) * m.head_dim()) *
                           static_cast<double>(dtype_size(dtype));
  return static_cast<double>(layers) * rows * row_bytes;
}

std::string mixed_overlap_problem(const Overlap& overlap, bool sequence_parallel) {
  if (sequence_parallel)
    return "--phase mixed: no --sequence-parallel (each sequence's attention reads its rows of "
           "the whole step)";
  const OverlapPolicy policy = overlap_policy(overlap);
  if (policy.parts > 1 || policy.ring || policy.symmetric)
    return "--phase mixed runs --overlap none, async or chunked:K (got " + overlap.name() +
           "): its attention runs sequence by sequence over the whole step";
  return "";
}

namespace {

// Consecutive entries of one kind, length and context: one attention call for them all (a
// batch of equal sequences), their cache blocks adjacent.
struct EntryRun {
  size_t first = 0;  // entry index: the run's first cache block
  int64_t count = 0; // sequences
  int64_t row0 = 0;  // the run's first row of the step's tokens
  EntryKind kind = EntryKind::decode;
  int64_t tokens = 0, context = 0;
};

std::vector<EntryRun> entry_runs(const StepMix& mix) {
  std::vector<EntryRun> runs;
  int64_t row = 0;
  for (size_t i = 0; i < mix.entries.size(); ++i) {
    const StepEntry& e = mix.entries[i];
    if (!runs.empty() && runs.back().kind == e.kind && runs.back().tokens == e.tokens &&
        runs.back().context == e.context)
      ++runs.back().count;
    else
      runs.push_back({i, 1, row, e.kind, e.tokens, e.context});
    row += e.tokens;
  }
  return runs;
}

// Each row's position in its sequence, in the step's row order: a sequence's tokens at
// context, context + 1, ...
std::vector<int64_t> step_positions(const std::vector<EntryRun>& runs) {
  std::vector<int64_t> positions;
  for (const EntryRun& r : runs)
    for (int64_t j = 0; j < r.count; ++j)
      for (int64_t t = 0; t < r.tokens; ++t)
        positions.push_back(r.context + t);
  return positions;
}

// Consecutive decode runs [first, end): their sequences adjacent in the step's rows and in the
// cache, so that their appends and their attention each take one call.
std::vector<std::pair<size_t, size_t>> decode_run_groups(const std::vector<EntryRun>& runs) {
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].kind == EntryKind::decode) {
      if (!groups.empty() && groups.back().second == i)
        groups.back().second = i + 1;
      else
        groups.emplace_back(i, i + 1);
    }
  return groups;
}

} // namespace

void TpStage::mixed_attention(Recorder& rec, int64_t layer, const LayerWeights& w,
                              const Tensor& qkv, const Tensor& attn) {
  const ModelSpec& m = m_spec.model;
  const StepMix& mix = m_spec.mix;
  // Each sequence's block keeps the stride of the stage's capacity (set_mix()).
  const int64_t cap = mix_cache_rows(m_capacity), kv_cols = m_geo.kv_cols();
  const Tensor cache = w.kv_cache.view(static_cast<int64_t>(mix.entries.size()) * cap, 2 * kv_cols,
                                       m_backend.dtype());
  const std::vector<EntryRun> runs = entry_runs(mix);
  auto rows_of = [&](const Tensor& t, const EntryRun& r) {
    return t.rows_slice(r.row0, r.count * r.tokens);
  };
  auto blocks_of = [&](const EntryRun& r) {
    return cache.rows_slice(static_cast<int64_t>(r.first) * cap, r.count * cap);
  };
  if (m.rotary) {
    // Each sequence's tokens at their own positions, context, context + 1, ...: every row of the
    // step in one call.
    const std::vector<int64_t> positions = step_positions(runs);
    const ScopedOp op = m_op_index.scope(rec, op_rotary, layer, 1.0);
    m_backend.rotary_rows(qkv.rows_slice(0, static_cast<int64_t>(positions.size()))
                              .cols_slice(0, m_geo.q_cols() + m_geo.kv_cols()),
                          m_geo.heads + m_geo.kv_heads, m_geo.head_dim, positions,
                          static_cast<float>(m.rope_theta));
  }
  const std::vector<std::pair<size_t, size_t>> decode_groups = decode_run_groups(runs);
  auto decode_rows = [&](size_t first, size_t end) {
    int64_t n = 0;
    for (size_t i = first; i < end; ++i)
      n += runs[i].count;
    return n;
  };
  // The step's keys and values into each sequence's block after its cached tokens.
  auto append = [&](const EntryRun& r) {
    const Tensor kv_new = rows_of(qkv, r).cols_slice(m_geo.q_cols(), 2 * kv_cols);
    const Tensor blocks = blocks_of(r);
    if (r.tokens == 1) {
      m_backend.copy(kv_new, blocks.strided_rows(r.context, r.count, cap));
      return;
    }
    for (int64_t j = 0; j < r.count; ++j)
      m_backend.copy(kv_new.rows_slice(j * r.tokens, r.tokens),
                     blocks.rows_slice(j * cap + r.context, r.tokens));
  };
  // `batch` sequences of `seq` tokens each, against blocks of the cache's stride (context is
  // not read by the ragged call).
  auto shape_of = [&](int64_t batch, int64_t seq, int64_t context) {
    AttentionShape shape;
    shape.batch = batch;
    shape.seq = seq;
    shape.context = context;
    shape.capacity = cap;
    shape.heads = m_geo.heads;
    shape.kv_heads = m_geo.kv_heads;
    shape.head_dim = m_geo.head_dim;
    return shape;
  };
  auto attend = [&](const EntryRun& r) {
    const Tensor blocks = blocks_of(r);
    m_backend.attention(shape_of(r.count, r.tokens, r.context + r.tokens),
                        rows_of(qkv, r).cols_slice(0, m_geo.q_cols()),
                        blocks.cols_slice(0, kv_cols), blocks.cols_slice(kv_cols, kv_cols),
                        rows_of(attn, r), m_spec.attention);
  };
  // The decode tokens' keys and values, each into its sequence's block after its context: one
  // row scatter.
  auto append_decode = [&](size_t first, size_t end) {
    const EntryRun& r = runs[first];
    const int64_t n = decode_rows(first, end);
    std::vector<int64_t> index;
    for (size_t i = first; i < end; ++i)
      for (int64_t j = 0; j < runs[i].count; ++j)
        index.push_back((static_cast<int64_t>(index.size())) * cap + runs[i].context);
    m_backend.scatter_rows(qkv.rows_slice(r.row0, n).cols_slice(m_geo.q_cols(), 2 * kv_cols), index,
                           cache.rows_slice(static_cast<int64_t>(r.first) * cap, n * cap));
  };
  // The decode tokens' attention: one ragged call, each sequence at its own context.
  auto attend_decode = [&](size_t first, size_t end) {
    std::vector<int64_t> contexts;
    for (size_t i = first; i < end; ++i)
      contexts.insert(contexts.end(), static_cast<size_t>(runs[i].count), runs[i].context + 1);
    const int64_t n = static_cast<int64_t>(contexts.size());
    const EntryRun& r = runs[first];
    const Tensor blocks = cache.rows_slice(static_cast<int64_t>(r.first) * cap, n * cap);
    m_backend.attention_decode_ragged(
        shape_of(n, 1, 0), contexts, qkv.rows_slice(r.row0, n).cols_slice(0, m_geo.q_cols()),
        blocks.cols_slice(0, kv_cols), blocks.cols_slice(kv_cols, kv_cols),
        attn.rows_slice(r.row0, n), m_spec.attention);
  };
  // The work model's ops: the decode tokens' appends, then each kind's attention (a prefill
  // chunk's append is part of its attention's traffic).
  if (mix.decode_sequences > 0) {
    const ScopedOp op = m_op_index.scope(rec, op_kv_append, layer, 1.0);
    for (const auto& [first, end] : decode_groups)
      append_decode(first, end);
  }
  if (mix.prefill_sequences > 0) {
    const ScopedOp op = m_op_index.scope(rec, op_attention_prefill, layer, 1.0);
    for (const EntryRun& r : runs) {
      if (r.kind != EntryKind::prefill) continue;
      append(r);
      attend(r);
    }
  }
  if (mix.decode_sequences > 0) {
    const ScopedOp op = m_op_index.scope(rec, op_attention_decode, layer, 1.0);
    for (const auto& [first, end] : decode_groups)
      attend_decode(first, end);
  }
}

} // namespace ridgeline
