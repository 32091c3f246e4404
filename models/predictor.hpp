// The analytic model: a layer's ops, step and pipeline predicted from the work model and a
// machine's roofs (measured, or built from a hardware description's data-sheet figures). Pure
// functions: no MPI, no files; `ridgeline model` (src/app/model.*) drives them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/attribution.hpp"
#include "models/roofs.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

/// One link preset: what a collective over it costs (time = latency + bus bytes / bandwidth).
struct LinkPreset {
  std::string name;           ///< nvlink, pcie-gen5, ib-ndr
  double bandwidth_gbps = 0;  ///< data-sheet bandwidth per GPU and direction (GB/s)
  double achievable = 1;      ///< the fraction of it collectives reach (a stated derating)
  double latency_us = 0;      ///< time of a collective that moves no bytes
  std::string latency_source; ///< where latency_us comes from
};

/// A hardware description: data-sheet peaks and the derating applied to each.
struct HardwareSpec {
  std::string name;
  std::string source; ///< where the figures come from (data sheet and its revision)
  double bf16_tflops = 0, fp16_tflops = 0, fp32_tflops = 0; ///< dense, no sparsity
  double hbm_gbps = 0;
  double compute_achievable = 1; ///< fraction of the data-sheet peak a GEMM reaches
  double hbm_achievable = 1;     ///< fraction of the data-sheet bandwidth a stream reaches
  double launch_eager_ns = 0, launch_graph_node_ns = 0;
  std::string launch_source;
  std::vector<LinkPreset> links;
  const LinkPreset* link(const std::string& name) const;
};

/// Roofs made of a hardware description: one GEMM row per dtype at the derated peak, one
/// memory row per kind at the derated bandwidth, the launch floors; no interconnect rows
/// (collectives take the link presets). source names the description.
Roofs roofs_from_hardware(const HardwareSpec& hw);

/// Time of one pass over `bytes` of traffic (ns): the measured read curve of `roofs`
/// interpolated in bytes (each row's best time, which includes the kernel's fixed cost), the
/// largest row's bandwidth beyond it and the smallest row's time below it; bytes / the best
/// bandwidth where a single size was measured. 0 when nothing was measured.
double memory_time_ns(const Roofs& roofs, double bytes);

/// The GEMM rate (TFLOP/s) for c[m, n] = a[m, k] w[n, k]^T of `dtype`: the measured row nearest
/// in shape (sum of |log| ratios of m, n and k) among the rows measured at or above the ridge
/// (FLOPs per byte of at least the peak rate over the HBM roof: rows below it were bound by
/// memory, and the memory roof times those shapes); the dtype's peak when m, n or k is 0 or no
/// row qualifies.
double gemm_rate_tflops(const Roofs& roofs, DType dtype, int64_t m, int64_t n, int64_t k);

/// A collective over `link`: latency + comm_bytes x busbw_factor / (bandwidth x achievable), ns.
double link_collective_ns(const LinkPreset& link, double comm_bytes, double busbw_factor);

/// The share of a pipeline step that is bubble: (p - 1) / (m + p - 1).
double pipeline_bubble(int pp, int64_t microbatches);

/// A data-parallel gradient all-reduce of `bytes` over `dp` ranks on `link` (ns; 0 for dp 1):
/// the ring's 2 (dp - 1) / dp bus bytes.
double dp_gradient_ns(double bytes, int dp, const LinkPreset& link);

/// The gradient buckets of a stage, as the train phase cuts its gradient buffer: `bytes` in
/// pieces of `bucket_bytes`, the last one the remainder (one bucket where bucket_bytes <= 0).
std::vector<double> gradient_buckets(double bytes, double bucket_bytes);

/// When each bucket may start, in ns before the end of the stage's backward: the buffer holds
/// the stage's `layers` in backward order (the first layer the backward finishes at the front),
/// equal shares, and a bucket waits until every layer it covers is final; layer j (0 the first
/// finished) is final `(layers - 1 - j) x layer_backward_ns` before the end.
std::vector<double> bucket_ready_before_end_ns(const std::vector<double>& buckets, int64_t layers,
                                               double layer_backward_ns);

/// The time the buckets' reductions add after the end of the backward: one lane runs them in
/// order, each from max(its ready time, the previous one's end) for its `bucket_ns`; the end
/// of the backward is time 0 and `ready_before_end_ns` count back from it.
double exposed_after_end_ns(const std::vector<double>& bucket_ns,
                            const std::vector<double>& ready_before_end_ns);

/// The launch floor of one kernel (ns): the graph node's with `graphs` where measured, else the
/// eager launch's (back-to-back launches from the host); 0 when neither was measured.
double launch_floor_ns(const Roofs& roofs, bool graphs);

/// One op as the predictor takes it.
struct PredictOp {
  std::string name;
  OpWork work;
  int64_t m = 0, n = 0, k = 0; ///< GEMM shape (0: not a GEMM)
  double instances = 1;        ///< instances in one step on one rank
  bool comm_lane = false;      ///< runs on the interconnect lane
  bool backward = false;       ///< a backward op of the train phase (its layers' gradients)
  /// Runs once per step (the train phase's gradient zeroing and update), not per microbatch.
  bool per_step = false;
  CommGroup group = CommGroup::tp; ///< a collective's group (its link where the roofs lack it)
};

/// What decides the step besides the ops.
struct PredictOptions {
  bool graphs = false; ///< launch floor: graph node (replayed) or eager
  /// Time between two launches, paid once per kernel of every op and collective: eager, the
  /// host's launch of the next kernel; --graphs, a graph node's floor.
  double gap_ns = 0;
  bool overlap = false;     ///< collectives overlap compute (any strategy but none)
  int pp = 1;               ///< pipeline stages
  int64_t microbatches = 1; ///< per step
  double p2p_bytes = 0;     ///< activation bytes a stage sends per microbatch
  int dp = 1;
  double gradient_bytes = 0; ///< weight bytes of one stage (the gradients a training step reduces)
  /// The train phase reduces those gradients over the dp replicas inside its step: buckets of
  /// at most bucket_bytes, each as soon as the layers it covers are final (dp_overlap) or all
  /// after the backward, all-reduced (reduce-scattered with dp_shard). Other phases carry no
  /// gradients: dp_gradient_ns is what a training step would add, beside their step.
  bool train = false;
  double bucket_bytes = 25.0 * 1048576.0;
  bool dp_overlap = true;
  bool dp_shard = false;
  int64_t layers = 1; ///< layers of one stage (whose gradients fill the buffer)
  /// Where the pipeline's neighbouring stages and the DP groups sit (a TP collective's scope is
  /// in its OpWork): a measured roof serves a group only where its scope is the group's.
  Scope p2p_scope = Scope::intra;
  Scope dp_scope = Scope::intra;
  std::string transport;               ///< the roofs' transport for measured interconnect rows
  const LinkPreset* tp_link = nullptr; ///< TP collectives where the roofs have no row
  const LinkPreset* pp_link = nullptr; ///< pipeline sends where the roofs have no row
  const LinkPreset* dp_link = nullptr; ///< gradient all-reduce where the roofs have no row
  const LinkPreset* ep_link = nullptr; ///< MoE all-to-alls where the roofs have no row
  /// Achieved fraction of its roof per op kind ("gemm", "attention", ...); absent: 1.
  std::map<std::string, double> efficiency;
};

/// One op predicted.
struct OpPrediction {
  std::string name;
  std::string kind;
  double instances = 1;
  double compute_ns = 0, hbm_ns = 0, interconnect_ns = 0, launch_ns = 0; ///< per instance
  double efficiency = 1; ///< the kind's efficiency applied
  double time_ns = 0;    ///< max(compute, hbm, interconnect) / efficiency, at least launch
  Ceiling ceiling = Ceiling::none;
  std::string interconnect_source; ///< "roofs" (a measured row) or the link preset's name
  /// Collectives and p2p ops: what they run, over how many ranks, and where those sit.
  std::string collective;
  int64_t group_size = 0;
  Scope scope = Scope::intra;
};

/// One step predicted (one rank, the slowest stage).
struct StepPrediction {
  std::vector<OpPrediction> ops;
  double compute_lane_ns = 0; ///< one microbatch through the stage: compute-lane ops
  double comm_lane_ns = 0;    ///< the same for collectives
  double launches = 0;        ///< kernels one microbatch through the stage launches
  double gap_ns = 0;          ///< launches x the gap: on the compute lane, in the launch class
  double stage_ns = 0;        ///< one microbatch through the stage, by the overlap policy
  double p2p_ns = 0;          ///< one microbatch's send to the next stage
  OpPrediction p2p;           ///< that send as predicted (pp > 1; its source and scope)
  double bubble = 0;          ///< pipeline_bubble(pp, microbatches)
  double dp_gradient_ns = 0;  ///< the gradient reduction's buckets, one after another
  double dp_exposed_ns = 0;   ///< train: the part of it after the backward, in the step
  double per_step_ns = 0;     ///< train: the ops run once per step, with their gaps
  /// (m + p - 1) x (stage + p2p), plus in the train phase the once-per-step ops and the exposed
  /// gradient reduction.
  double step_ns = 0;
  double class_ns[kCeilingClasses] = {0, 0, 0, 0}; ///< step time by ceiling
  double exposed_interconnect_ns = 0;
  Ceiling ceiling = Ceiling::none;
  std::string missing; ///< a roof a collective needed that neither roofs nor links give
};

/// A collective of `bus_bytes` (bytes x busbw factor) inside a step: the fit of the roof's
/// medians (alpha_us + bus_bytes / beta_gbps: a typical call, as the collective runs once
/// between other ops), never below the lower envelope (floor_alpha_us, floor_beta_gbps, the
/// best of back-to-back calls, which attribution keeps as its bound); the envelope alone where
/// the roof has no fit. In ns.
double in_step_collective_ns(const InterconnectRoof& r, double bus_bytes);

/// Predicts one op under `roofs` (and the links where the roofs have no interconnect row of the
/// op's collective, group size and scope).
OpPrediction predict_op(const PredictOp& op, const Roofs& roofs, const PredictOptions& o);

/// Predicts a step: every op (instances per microbatch through the stage), the gaps between
/// their launches (each kernel, collectives' too, x options' gap_ns: one host issues them all
/// in order, so they lengthen the compute lane and count as launch), the overlap policy's
/// combination (serialized: compute + comm; overlapped: the longer lane), the pipeline
/// ((m + p - 1) slots of one microbatch's stage time and send) and the gradient traffic.
StepPrediction predict_step(const std::vector<PredictOp>& ops, const Roofs& roofs,
                            const PredictOptions& o);

} // namespace ridgeline
