// The check of a scheduled point: what one rank computing the whole model gets from the same
// inputs and weights, and this rank's part of the pipeline held against it; and the output
// checksum over what the check compares.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/backend.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/train_stage.hpp"

namespace ridgeline {

/// The profiler range around a TP=1 reference computation (its ops' ranges nest in it).
inline constexpr const char* kReferenceRange = "check: TP=1 reference";

/// What the whole model, one rank, computes from the same inputs: per layer, its parameter
/// gradients summed over every replica's microbatches (host copies, as the TP=1 tensors), and
/// the model's input gradient and output per global microbatch.
struct StageReference {
  std::vector<std::vector<std::vector<float>>> grads; ///< [layer][tensor]
  std::vector<std::vector<float>> input_grads;        ///< [global microbatch]
  std::vector<std::vector<float>> outputs;            ///< [global microbatch]
};
/// `spec` is a stage's; the reference runs every one of `layers` layers at TP=1 over
/// `global_mbs` microbatches.
StageReference compute_stage_reference(Backend& backend, const TrainSpec& spec, int64_t layers,
                                       int64_t global_mbs, bool train);

/// The largest relative L2 error of this rank's part after PipelineDriver::capture() against
/// the reference: forward only, the last stage's outputs; training, the first stage's input
/// gradients and this rank's shard of every local layer's weight gradients. `skipped` names
/// what could not be compared (replicated KV heads' Wk and Wv gradients), else stays empty.
double stage_check_error(Backend& backend, const TrainStage& stage, const PipelineDriver& driver,
                         const StageReference& reference, const PipelineSpec& spec,
                         std::string& skipped);

/// FNV-1a 64 over what the check compares on this rank after PipelineDriver::capture(), from
/// `hash`; `holds` is set when this rank hashed anything.
uint64_t stage_output_hash(Backend& backend, const TrainStage& stage, const PipelineDriver& driver,
                           const PipelineSpec& spec, uint64_t hash, bool& holds);

} // namespace ridgeline
