// The `run` configuration: one plain struct, bound to CLI11 in one function, completed with
// the embedded defaults, validated in one function that reports every problem at once, and
// written verbatim to /config.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/run_data.hpp"
#include "core/watchdog.hpp"
#include "models/backend.hpp"
#include "models/model_spec.hpp"
#include "parallel/grid.hpp"
#include "parallel/overlap.hpp"

namespace ridgeline {

struct RunConfig {
  // Model (a preset file sets these; every field can be overridden on the command line).
  std::string model = ""; ///< preset name; empty = the embedded default for the backend
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0; ///< 0 = heads (multi-head attention)
  int64_t ffn_hidden = 0;
  int64_t layers = 0;
  std::string mlp = "";
  std::string norm = "";
  std::string rotary = ""; ///< on | off; empty = off unless a preset sets it
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  int64_t experts = 0; ///< routed experts of a mixture-of-experts MLP; 0 = dense
  int64_t top_k = 0;
  int64_t expert_ffn_hidden = 0;
  int64_t shared_experts = 0;
  std::string gating = ""; ///< softmax | sigmoid; empty = softmax for an MoE model
  // Workload.
  std::string phase = "prefill";
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t context = -1; ///< decode: tokens already cached; -1 = the backend's default
  /// Decode: tokens generated per sequence, the cache growing from context to context + N;
  /// 0 = every iteration repeats the step at position context.
  int64_t decode_steps = 0;
  int64_t microbatches = 1;
  // A mixed step (--phase mixed; options of `run` alone, config_mixed.hpp). Negative or 0:
  // unset.
  int64_t prefill_seqs = -1;  ///< sequences prefilled by a chunk each
  int64_t chunk = 0;          ///< prefill tokens of each chunk
  int64_t chunk_context = -1; ///< tokens of each prefilled sequence already cached
  int64_t decode_batch = -1;  ///< decode tokens (one per sequence)
  std::string contexts;       ///< the decode sequences' cached tokens, a comma list
  std::string context_dist;   ///< or drawn from uniform:LO:HI
  uint64_t context_seed = 1;
  /// The step's prefill tokens as a share of its tokens (0..1, prefill_share_mix()); < 0: the
  /// options' own mix.
  double prefill_share = -1;
  /// A trace run (--phase mixed with --trace or --trace-gen, config_mixed.hpp): the trace, the
  /// scheduler's limits (0: the backend's default; --chunk is its prefill tokens of one sequence
  /// per step), the requests replayed and goodput's targets.
  std::string trace, trace_gen;
  int64_t token_budget = 0, max_batch = 0, kv_capacity = 0;
  double duration_s = 0;                   ///< requests arriving before this time; 0: all
  int trace_warmup = 1;                    ///< untimed replays of the trace before the measured one
  double slo_ttft_ms = 0, slo_tpot_ms = 0; ///< 0: no target
  /// Pipeline schedule: gpipe | 1f1b | interleaved:V | zb-h1; "" = the train phase's 1f1b, and
  /// for prefill the unscheduled stage loop (blocking transfers, no flush).
  std::string schedule = "";
  std::string recompute = "none"; ///< train: none | full (keep each layer's input only)
  double sgd_lr = 0;              ///< train: plain SGD step after the backward; 0 = none
  // Parallelism.
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int ep = 1; ///< expert-parallel degree: the routed experts split into ep contiguous blocks
  std::string routing = "router"; ///< MoE: router | uniform | zipf:S
  uint64_t routing_seed = 0;      ///< MoE: the seed of zipf:S's draws
  std::string a2a = "nccl";       ///< MoE: the dispatch and combine's all-to-all-v (nccl | ipc)
  std::string dp_overlap = "on";  ///< train: reduce gradient buckets beside the backward (on | off)
  double bucket_mb = 25;          ///< train: data-parallel gradient bucket size in MiB
  bool dp_shard = false;          ///< train: reduce-scatter the gradients (a sharded optimizer)
  bool allow_tp_across_nodes = false; ///< run a TP group that spans nodes (refused otherwise)
  // Backend and kernels.
  std::string backend = "auto";         ///< auto | host | cuda
  std::string dtype = "auto";           ///< auto | fp32 | bf16 | fp16
  std::string attention = "fused";      ///< comma list of implementations, run back to back
  std::string gemm_algo = "heuristic";  ///< heuristic | search | skinny (see GemmAlgo)
  std::string grouped_gemm = "streams"; ///< loop | streams | cublas (see GroupedGemm)
  /// The CUDA backend's kernel switches (KernelTuning's texts): the options, else the
  /// environment's RIDGELINE_* (apply_defaults); empty on the host backend.
  std::string pdl, skinny_rows, epilogues;
  std::string allreduce =
      "nccl"; ///< the TP all-reduce: nccl | oneshot | push | push-ll | twoshot | auto
  std::string allreduce_table;  ///< with auto: a `collectives --allreduce ...` file
  bool graphs = false;          ///< capture one step as a CUDA graph and replay it (cuda backend)
  std::string overlap = "none"; ///< comma list of strategies, run back to back
  bool sequence_parallel = false;
  int nccl_max_ctas = -1; ///< ncclConfig_t::maxCTAs; -1 = NCCL's default
  int nccl_min_ctas = -1;
  std::string
      nccl_cta_policy; ///< ncclConfig_t::CTAPolicy: default | efficiency | zero; "" = NCCL's
  std::string comm_priority = "high"; ///< high | normal: the comm stream's priority
  int overlap_gemm_sms = 0;           ///< SMs a GEMM beside a collective targets; 0 = every SM
  std::string transport = "auto";     ///< NCCL transport preset (auto | nvlink | host | net)
  bool allow_shared_gpu = false;      ///< run even where a node has more ranks than GPUs
  // Measurement.
  int warmup = 3;
  int iters = 0; ///< timed iterations; 0 = the default (decode steps when set, else 10)
  std::string check = "auto"; ///< auto | on | off
  uint64_t seed = 1234;
  std::string out = "";             ///< HDF5 path; empty = results/ridgeline-<utc time>.h5
  std::string file_layout = "auto"; ///< auto | single | per-node (docs/SCHEMA.md, File layouts)
  bool per_rank_files = false;      ///< --per-rank-files: the per-node layout
  int ranks_per_file = 0;           ///< per-node layout: ranks of a node per node file; 0 = all
  double timeout_s = kDefaultTimeoutSeconds;
  int sample_ms = 20;        ///< NVML sampling period of each rank's GPU; 0 = off
  std::string roofs = "";    ///< roofs file; "" = measure a short version; "none" = no attribution
  std::string json = "";     ///< also write the summary as JSON here
  std::string markdown = ""; ///< also write the summary as markdown here
  bool quiet = false;        ///< no progress line on stderr (not recorded in /config)
};

/// Binds every RunConfig field to an option of `cmd`. Preset files reach these options
/// through the top-level --config (their keys sit under a [run] table). Every option checks
/// the value it is given (a CLI11 ValidationError while parsing): a value that the fields use
/// to mean "unset" (0 dimensions, a negative context, an empty string) cannot be given.
void bind_run_options(CLI::App& cmd, RunConfig& cfg);
/// What is wrong with a --dtype value of run, sweep or model ("" if nothing): it takes auto,
/// fp32, bf16 or fp16, and its refusal names exactly those.
std::string run_dtype_problem(const std::string& value);
/// Fills the fields left unset (never given) with the embedded default for `backend` ("host"
/// or "cuda"): a model small enough for 2 CPU cores on the host, the reference h=8192 layer on
/// GPUs. --file-layout auto: per-node where the job spans `nodes` > 1 or HDF5 is serial.
void apply_defaults(RunConfig& cfg, const std::string& backend, int nodes = 1);
/// `--tp auto` (tp 0): the ranks of one node, and --dp left at 1 then the ranks left over
/// (world / (tp x pp)). Returns why it cannot be resolved (nodes of different sizes), else
/// nothing; a numeric --tp is left as it is.
std::vector<std::string> resolve_grid(RunConfig& cfg, const NodeMap& nodes, int world_size);
/// The problems of the options every point of a job shares: the backend's name, the output
/// files' directories and the roofs file (part of validate(); sweep checks them up front).
std::vector<std::string> validate_shared(const RunConfig& cfg);
/// The files a configuration reads (--roofs, --allreduce-table): no output may be one of them.
std::vector<NamedFile> input_files(const RunConfig& cfg);
/// Every problem with a completed configuration for `world_size` ranks (empty = valid);
/// `executes` false for a configuration predicted, never run (an MoE model is then valid).
std::vector<std::string> validate(const RunConfig& cfg, int world_size, bool executes = true);
/// The model and per-microbatch layer shape of a validated configuration.
ModelSpec model_spec(const RunConfig& cfg);
LayerShape layer_shape(const RunConfig& cfg);
/// The overlap strategies of --overlap, in order (throws UsageError on a bad, empty or repeated
/// entry).
std::vector<Overlap> overlap_list(const RunConfig& cfg);
/// The attention implementations of --attention, in order (throws UsageError on a bad, empty or
/// repeated entry).
std::vector<AttentionImpl> attention_list(const RunConfig& cfg);
/// Every resolved option as /config attributes.
Attrs config_attrs(const RunConfig& cfg);

/// Whether a configuration replays a serving trace (--trace or --trace-gen given).
inline bool trace_run(const RunConfig& cfg) {
  return !cfg.trace.empty() || !cfg.trace_gen.empty();
}

} // namespace ridgeline
