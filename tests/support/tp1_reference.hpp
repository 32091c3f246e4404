// The output every tensor-parallel stage test compares with: the same model, shape, seed and
// layers run on one rank without overlap (tp 1, no sequence parallelism).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "parallel/tp_layer.hpp"

namespace ridgeline {

inline std::vector<float> tp1_stage_output(Backend& backend, const StageSpec& spec) {
  StageSpec ref_spec = spec;
  ref_spec.shape.tp = 1;
  ref_spec.shape.sequence_parallel = false;
  ref_spec.overlap = Overlap{};
  ref_spec.tp_rank = 0;
  OpTable ops;
  TpStage ref(backend, nullptr, ref_spec, ops);
  ref.fill_input(0);
  Recorder silent(backend.clock(), ops);
  silent.set_enabled(false);
  ref.forward(silent);
  return backend.to_host(ref.output());
}

/// A Llama-style two-layer model small enough for every rank of an MPI test: grouped-query
/// attention (8 heads, 4 KV heads), SwiGLU, RMS norm and rotary.
inline ModelSpec small_llama_model() {
  ModelSpec m;
  m.hidden = 128;
  m.heads = 8;
  m.kv_heads = 4;
  m.ffn_hidden = 256;
  m.layers = 2;
  m.mlp = MlpKind::swiglu;
  m.norm = NormKind::rmsnorm;
  m.rotary = true;
  return m;
}

/// The small two-layer prefill stage the GPU stage tests run, on rank `rank` of `tp`.
inline StageSpec small_prefill_stage(int tp, int rank, bool sequence_parallel,
                                     const std::string& overlap) {
  StageSpec spec;
  spec.model.hidden = 256;
  spec.model.heads = 4;
  spec.model.kv_heads = 2;
  spec.model.ffn_hidden = 512;
  spec.model.layers = 2;
  spec.shape.phase = Phase::prefill;
  spec.shape.batch = 2;
  spec.shape.seq = 64;
  spec.shape.tp = tp;
  spec.shape.sequence_parallel = sequence_parallel;
  spec.overlap = parse_overlap(overlap);
  spec.tp_rank = rank;
  spec.num_layers = 2;
  spec.seed = 9;
  return spec;
}

/// The rows of a TP1 output `full` that `spec`'s rank holds: every row, or under sequence
/// parallelism its 1/tp share of every unit of rows (a chunk of a part), units in order: the
/// layout TpStage keeps so that each chunk's all-gather lands its rows in token order
/// (TpStage::unit_piece).
inline std::vector<float> rank_rows(std::vector<float> full, const StageSpec& spec) {
  if (!spec.shape.sequence_parallel || spec.shape.tp == 1) return full;
  const auto units = static_cast<std::ptrdiff_t>(spec.overlap.parts() * spec.overlap.chunks());
  const auto unit = static_cast<std::ptrdiff_t>(full.size()) / units;
  const auto piece = unit / spec.shape.tp;
  std::vector<float> mine;
  for (std::ptrdiff_t u = 0; u < units; ++u) {
    const auto first = full.begin() + u * unit + piece * spec.tp_rank;
    mine.insert(mine.end(), first, first + piece);
  }
  return mine;
}

/// The TP1 output as `spec`'s rank holds it (rank_rows of tp1_stage_output).
inline std::vector<float> tp1_rank_output(Backend& backend, const StageSpec& spec) {
  return rank_rows(tp1_stage_output(backend, spec), spec);
}

} // namespace ridgeline
