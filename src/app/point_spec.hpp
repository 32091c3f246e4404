// A point as the runners see it: every option that changes what runs, resolved once from the
// strings of a validated RunConfig into types (the model, the per-microbatch layer shape, the
// grid, the phase and schedule, the overlap and attention lists, the GEMM choice and the CUDA
// kernel switches, the measurement). Nothing past resolve_point() parses an option again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "models/backend.hpp"
#include "models/kernel_tuning.hpp"
#include "models/model_spec.hpp"
#include "models/moe_layer.hpp"
#include "models/serving.hpp"
#include "parallel/overlap.hpp"
#include "parallel/schedule.hpp"

namespace ridgeline {

struct ServingPlan;

/// What a point runs: a prefill or decode step, a training step (forward and backward), or a
/// mixed step (prefill chunks and decode tokens of their own sequences).
enum class RunPhase { prefill, decode, train, mixed };
/// --check: auto (when the reference fits), on, off.
enum class CheckMode { automatic, on, off };

const char* run_phase_name(RunPhase phase);
/// "auto", "on", "off" (the option's words).
const char* check_mode_name(CheckMode mode);

struct PointSpec {
  ModelSpec model; ///< every layer of the model (model.layers)
  /// One microbatch of one replica (train: the global batch / dp); decode: shape.context tokens
  /// cached before the first step.
  LayerShape shape;
  RunPhase phase = RunPhase::prefill;
  int64_t batch = 1;        ///< --batch (train: the global batch)
  int64_t microbatches = 1; ///< per replica
  int64_t decode_steps = 0; ///< decode: tokens generated per pass; 0 = the step repeated
  /// Mixed: the step's sequences (shape is then a prefill of one sequence of its tokens).
  StepMix mix;
  /// A trace run (--trace, --trace-gen): its requests and scheduler, replayed after the point's
  /// measurement of `mix` (then its capacity step); null otherwise.
  std::shared_ptr<const ServingPlan> serving;

  // The grid.
  int tp = 1, pp = 1, dp = 1;
  /// MoE: the expert-parallel degree (ep consecutive data-parallel replicas) and the routing.
  int ep = 1;
  RoutingControl routing;
  bool ipc_a2a = false; ///< --a2a ipc: dispatch and combine through IpcAllToAll
  /// The pipeline schedule of a scheduled point (train: 1f1b unless given; prefill: only with
  /// --schedule); unset for the unscheduled stage loop.
  std::optional<Schedule> schedule;
  bool recompute = false; ///< train: keep each layer's input only
  double sgd_lr = 0;
  bool dp_overlap = true; ///< train: gradient buckets reduced beside the backward
  double bucket_mb = 25;
  bool dp_shard = false;

  // Backend and kernels.
  bool cuda = false; ///< the CUDA backend (else the host backend)
  DType dtype = DType::f32;
  std::vector<Overlap> overlaps;                   ///< --overlap, in order, each once
  std::vector<AttentionImpl> attentions;           ///< --attention, in order, each once
  GemmAlgo gemm_algo = GemmAlgo::heuristic;        ///< --gemm-algo
  GroupedGemm grouped_gemm = GroupedGemm::streams; ///< --grouped-gemm
  KernelTuning tuning;                             ///< the CUDA backend's switches (cuda only)
  std::string allreduce = "nccl";                  ///< the TP all-reduce (nccl, a custom one, auto)
  std::string allreduce_table;                     ///< with auto: the measured times
  bool graphs = false;
  int nccl_max_ctas = -1, nccl_min_ctas = -1;
  std::string nccl_cta_policy; ///< "" = NCCL's default
  bool comm_high_priority = true;
  int overlap_gemm_sms = 0;

  // Measurement.
  int warmup = 3;
  int iters = 10;
  CheckMode check = CheckMode::automatic;
  uint64_t seed = 0;
  int sample_ms = 0;
  double timeout_s = 0;

  /// Whether the point runs through the scheduled executor (train, or prefill with a schedule).
  bool scheduled() const { return schedule.has_value(); }
  /// Layers of one pipeline stage.
  int64_t stage_layers() const { return model.layers / pp; }
  bool train() const { return phase == RunPhase::train; }
  bool decode() const { return phase == RunPhase::decode; }
  bool mixed() const { return phase == RunPhase::mixed; }
};

/// What validation parses of a configuration's strings, once, for the typed point.
struct PointOptions {
  std::optional<Schedule> schedule; ///< a scheduled point's (train: 1f1b unless given)
  std::vector<Overlap> overlaps;
  std::vector<AttentionImpl> attentions;
  KernelTuning tuning; ///< the cuda backend's switches
};
/// The typed point of a configuration validation accepted, from the options it parsed.
PointSpec point_spec(const RunConfig& cfg, PointOptions parsed);

/// Every problem of a completed configuration for `world_size` ranks and, when there is none,
/// its typed point: each option is parsed once, by the check that judges it.
struct ValidatedPoint {
  std::vector<std::string> problems;
  PointSpec spec; ///< meaningful only when `problems` is empty
};
ValidatedPoint validate_point(const RunConfig& cfg, int world_size, bool executes = true);
/// The typed point of a configuration for its own grid's ranks (tp x pp x dp); throws
/// UsageError naming its first problem.
PointSpec point_spec(const RunConfig& cfg);

} // namespace ridgeline
