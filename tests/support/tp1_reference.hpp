// The output every tensor-parallel stage test compares with: the same model, shape, seed and
// layers run on one rank without overlap (tp 1, no sequence parallelism).
#pragma once

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

} // namespace ridgeline
