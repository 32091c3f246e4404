// Binding, defaults and the typed parts of the run configuration (validation is in
// config_validate.cpp).
#include "app/config.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "app/command_support.hpp"
#include "app/config_mixed.hpp"
#include "app/file_layout.hpp"
#include "models/kernel_tuning.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {
namespace {

// One --overlap strategy; chunked:02 is chunked:2.
std::string overlap_item(const std::string& item, std::string& canonical) {
  try {
    canonical = parse_overlap(item).name();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// One --attention implementation.
std::string attention_item(const std::string& item, std::string& canonical) {
  try {
    canonical = attention_name(parse_attention(item));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

} // namespace

std::string run_dtype_problem(const std::string& value) {
  if (value == "auto" || value.empty()) return ""; // empty: refused as an empty value
  try {
    parse_dtype_of(value, {DType::f32, DType::bf16, DType::f16});
  } catch (const UsageError&) {
    return "unknown data type '" + value + "' (expected auto, fp32, bf16 or fp16)";
  }
  return "";
}

namespace {

constexpr int kIntMax = std::numeric_limits<int>::max();

// The model: its dimensions, layers and layer kinds.
void bind_model_options(CLI::App& cmd, RunConfig& c) {
  const char* const model = "Model";
  cmd.add_option("--model", c.model, "Model name recorded in the output (set by presets)")
      ->group(model);
  cmd.add_option("--hidden", c.hidden, "Hidden size h")->check(integer_in(1))->group(model);
  cmd.add_option("--heads", c.heads, "Attention (query) heads")->check(integer_in(1))->group(model);
  cmd.add_option("--kv-heads", c.kv_heads,
                 "Key/value heads for grouped-query attention (default: heads)")
      ->check(integer_in(1))
      ->group(model);
  cmd.add_option("--ffn-hidden", c.ffn_hidden, "MLP inner size (per branch for SwiGLU)")
      ->check(integer_in(1))
      ->group(model);
  cmd.add_option("--layers", c.layers, "Transformer layers to run, split over pipeline stages")
      ->check(integer_in(1))
      ->group(model);
  cmd.add_option("--mlp", c.mlp, "MLP activation: gelu | swiglu")->group(model);
  cmd.add_option("--norm", c.norm, "Normalisation: layernorm | rmsnorm")->group(model);
  cmd.add_option("--rotary", c.rotary, "Rotary position embedding: on | off")->group(model);
  cmd.add_option("--rope-theta", c.rope_theta, "Rotary base theta")
      ->check(number_above(0))
      ->capture_default_str()
      ->group(model);
  cmd.add_option("--norm-eps", c.norm_eps, "Normalisation epsilon")
      ->check(number_above(0))
      ->capture_default_str()
      ->group(model);
  cmd.add_option("--experts", c.experts,
                 "Routed experts of a mixture-of-experts MLP (SwiGLU experts); 0 = a dense MLP")
      ->check(integer_in(0))
      ->group(model);
  cmd.add_option("--top-k", c.top_k, "MoE: routed experts each token goes through")
      ->check(integer_in(0))
      ->group(model);
  cmd.add_option("--expert-ffn-hidden", c.expert_ffn_hidden,
                 "MoE: each expert's inner size (per SwiGLU branch)")
      ->check(integer_in(0))
      ->group(model);
  cmd.add_option("--shared-experts", c.shared_experts,
                 "MoE: experts every token goes through beside the routed ones")
      ->check(integer_in(0))
      ->group(model);
  cmd.add_option("--gating", c.gating,
                 "MoE router: softmax (over the top-k logits) | sigmoid (scores normalised over "
                 "the top k); default softmax")
      ->group(model);
}

// The workload: phase, batch, sequence, context and what a step runs.
void bind_workload_options(CLI::App& cmd, RunConfig& c) {
  const char* const work = "Workload";
  cmd.add_option("--phase", c.phase,
                 "prefill (seq tokens per sequence) | decode (one token per sequence, KV cache of "
                 "--context) | train (prefill-shaped forward and backward, gradients checked) | "
                 "mixed (run and sweep: prefill chunks and decode tokens of their own sequences "
                 "in one step)")
      ->capture_default_str()
      ->group(work);
  cmd.add_option("--batch", c.batch, "Sequences per step")->check(integer_in(1))->group(work);
  cmd.add_option("--seq", c.seq, "Prefill tokens per sequence (decode runs one)")
      ->check(integer_in(1))
      ->group(work);
  cmd.add_option("--context", c.context,
                 "Decode: tokens already in the KV cache (default 256 on host, 1 on GPUs)")
      ->check(integer_in(0))
      ->group(work);
  cmd.add_option("--decode-steps", c.decode_steps,
                 "Decode: tokens generated per sequence, each step appending to the KV cache at "
                 "the next position (context grows from --context to --context + N; timed "
                 "iteration i runs step i mod N); 0 = every iteration repeats the step at "
                 "position --context")
      ->check(integer_in(0))
      ->capture_default_str()
      ->group(work);
  cmd.add_option("--microbatches", c.microbatches,
                 "Pipeline microbatches per step (the batch is split)")
      ->check(integer_in(1))
      ->capture_default_str()
      ->group(work);
  cmd.add_option("--schedule", c.schedule,
                 "Pipeline schedule: gpipe | 1f1b | interleaved:V (V model chunks per stage) | "
                 "zb-h1 (weight gradients deferred into the bubbles, the order built for the "
                 "stage's forward and backward times measured before the run; train). "
                 "Non-blocking transfers, waited for only by the action needing them, and a flush "
                 "every iteration. Default: 1f1b for train; prefill without it runs the "
                 "unscheduled stage loop")
      ->group(work);
  cmd.add_option("--recompute", c.recompute,
                 "Train: none | full (keep each layer's input only; recompute its forward before "
                 "its backward)")
      ->capture_default_str()
      ->group(work);
  cmd.add_option("--sgd-lr", c.sgd_lr,
                 "Train: apply a plain SGD step (w -= lr * grad) after each backward; 0 = none")
      ->check(number_above(0, true))
      ->capture_default_str()
      ->group(work);
}

// Parallelism: the grid and its layout.
void bind_parallel_options(CLI::App& cmd, RunConfig& c) {
  const char* const par = "Parallelism";
  cmd.add_option("--tp", c.tp,
                 "Tensor-parallel degree, or auto: the ranks of one node (its GPUs), with --dp "
                 "then taking the ranks left over. TP is innermost (world rank = (dp_rank x pp + "
                 "pp_rank) x tp + tp_rank): with ranks placed node by node, each TP group stays "
                 "inside one node and PP and DP go across nodes; a TP group that would span nodes "
                 "is refused")
      ->transform(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v != "auto") return integer_in(1, kIntMax)(v);
            v = "0"; // resolved to the ranks of a node once the job knows its nodes
            return "";
          },
          ""))
      ->type_name("INT|auto")
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--pp", c.pp, "Pipeline-parallel degree")
      ->check(integer_in(1, kIntMax))
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--dp", c.dp, "Data-parallel degree (tp * pp * dp must equal the ranks)")
      ->check(integer_in(1, kIntMax))
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--ep", c.ep,
                 "Expert-parallel degree of an MoE model: the routed experts split into ep "
                 "contiguous blocks (--experts must divide by it) over groups of ep consecutive "
                 "ranks, TP innermost (tp x dp must divide by it); at --tp above 1 each rank "
                 "routes its block of tokens / tp of its TP group's tokens")
      ->check(integer_in(1, kIntMax))
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--routing", c.routing,
                 "MoE routing: router (the router's top-k), uniform (every expert floor or ceil "
                 "of the mean rows) or zipf:S (expert e drawn with probability ~ (e + 1)^-S, the "
                 "hot experts on the first EP rank)")
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--routing-seed", c.routing_seed,
                 "MoE: seed of --routing zipf:S's draws (EP rank r draws with seed + r)")
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--a2a", c.a2a,
                 "MoE: the all-to-all-v of the dispatch and combine (--ep above 1): nccl (grouped "
                 "ncclSend/ncclRecv) | ipc (the project's: one kernel stores each rank's rows "
                 "into every peer's memory through CUDA IPC; cuda backend, one node)")
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--dp-overlap", c.dp_overlap,
                 "Train: on (reduce each gradient bucket as soon as its layers are final, beside "
                 "the rest of the backward) | off (after the whole backward)")
      ->capture_default_str()
      ->group(par);
  cmd.add_option("--bucket-mb", c.bucket_mb, "Train: data-parallel gradient bucket size in MiB")
      ->check(number_above(0))
      ->capture_default_str()
      ->group(par);
  cmd.add_flag("--dp-shard", c.dp_shard,
               "Train: reduce-scatter the gradients instead of all-reducing them (a sharded "
               "optimizer keeps 1/dp of them)")
      ->group(par);
  cmd.add_flag("--allow-tp-across-nodes", c.allow_tp_across_nodes,
               "Run a tensor-parallel group that spans nodes (refused otherwise: TP exchanges "
               "every layer's activations and belongs on one node's links)")
      ->group(par);
}

// Execution: backend, dtype, kernels and collectives.
void bind_execution_options(CLI::App& cmd, RunConfig& c) {
  const char* const exec = "Execution";
  cmd.add_option("--backend", c.backend, "auto | host | cuda (auto: cuda when a GPU is visible)")
      ->capture_default_str()
      ->group(exec);
  cmd.add_option("--dtype", c.dtype, "auto | fp32 | bf16 | fp16 (auto: fp32 on host, bf16 on cuda)")
      ->check(CLI::Validator([](std::string& v) { return run_dtype_problem(v); }, "DTYPE"))
      ->capture_default_str()
      ->group(exec);
  cmd.add_option("--attention", c.attention,
                 "Comma list of attention implementations run back to back: fused (the "
                 "project's kernel, online softmax), naive (materialised scores), cudnn (cuDNN's "
                 "fused SDPA; cuda backend, a build with cuDNN)")
      ->check(comma_list(attention_item))
      ->capture_default_str()
      ->group(exec);
  cmd.add_option(
         "--gemm-algo", c.gemm_algo,
         "The kernel of each GEMM: heuristic (cuBLASLt's first choice) | search (GEMMs "
         "of at most 256 rows, decode's: time every candidate cuBLASLt offers, split-K "
         "ones among them, and the project's skinny kernel where it applies, at the "
         "first call of each shape, and keep the fastest) | skinny (the project's "
         "CUDA-core kernel for every GEMM of at most 4 rows against a weight matrix, "
         "cuBLASLt's first choice elsewhere; at a decode step of one or two sequences rotary with "
         "the cache append and the activation then run inside the QKV and FC1 kernels, "
         "--epilogues 0 keeps them apart)")
      ->capture_default_str()
      ->group(exec);
  cmd.add_option("--grouped-gemm", c.grouped_gemm,
                 "How an MoE layer's experts run (cuda backend; --gemm-algo heuristic): loop (one "
                 "cuBLASLt GEMM per expert after another) | streams (the experts spread over four "
                 "streams that run at once) | cublas (cuBLAS's grouped batched GEMM, one call)")
      ->capture_default_str()
      ->group(exec);
  cmd.add_option("--pdl", c.pdl,
                 "Programmatic dependent launches on sm90 (cuda backend): 0 (none) | gemm (the "
                 "skinny GEMM alone starts while the kernel before it ends) | 1 (also the kernels "
                 "of a forward step); default: $RIDGELINE_PDL, else 1")
      ->group(exec);
  cmd.add_option("--skinny-rows", c.skinny_rows,
                 "The most rows --gemm-algo skinny gives the project's kernel, 1 to 16 (cuda "
                 "backend); default: $RIDGELINE_SKINNY_ROWS, else 4")
      ->group(exec);
  cmd.add_option("--epilogues", c.epilogues,
                 "Decode's small ops folded into the skinny GEMM before them (cuda backend): 0 "
                 "(none) or a comma list of norm, rotary, act and residual; default: "
                 "$RIDGELINE_EPILOGUES, else rotary,act")
      ->group(exec);
  cmd.add_option(
         "--allreduce", c.allreduce,
         "The tensor-parallel all-reduce: nccl | oneshot | push | push-ll | twoshot (the custom "
         "all-reduce over CUDA-IPC peer buffers, GPUs of one node; cuda backend) | auto "
         "(per message size, the fastest in --allreduce-table)")
      ->capture_default_str()
      ->group(exec);
  cmd.add_option(
         "--allreduce-table", c.allreduce_table,
         "With --allreduce auto: a file of `ridgeline collectives --collectives "
         "all_reduce --allreduce nccl,oneshot,push,push-ll,twoshot` on this machine at this --tp "
         "and --dtype (timed with --graph for a run with --graphs); a comma list of such files "
         "(one per --group-size) serves a sweep over several --tp, each point reading the tables "
         "of its group size")
      ->group(exec);
  cmd.add_flag("--graphs", c.graphs,
               "Capture one step (kernels and collectives) as a CUDA graph and replay it: removes "
               "launch overhead, which often bounds decode; the timeline then has one op per step")
      ->group(exec);
  cmd.add_flag("--allow-shared-gpu", c.allow_shared_gpu,
               "Run even where a node has more ranks than GPUs (ranks then share GPUs, each timing "
               "a fraction of one); refused otherwise")
      ->group(exec);
}

// Overlap: the strategies and their knobs.
void bind_overlap_options(CLI::App& cmd, RunConfig& c) {
  const char* const ovl = "Overlap";
  cmd.add_option("--overlap", c.overlap, overlap_help())
      ->check(comma_list(overlap_item))
      ->capture_default_str()
      ->group(ovl);
  cmd.add_flag("--sequence-parallel", c.sequence_parallel,
               "All-gather before column-parallel and reduce-scatter after row-parallel GEMMs "
               "instead of all-reduce; norms and residuals on tokens / tp rows (train: the "
               "backward mirrors each collective and sums the norms' gradients over TP)")
      ->group(ovl);
  cmd.add_option("--nccl-max-ctas", c.nccl_max_ctas,
                 "NCCL maxCTAs (channels) for the TP communicator")
      ->check(nccl_ctas())
      ->group(ovl);
  cmd.add_option("--nccl-min-ctas", c.nccl_min_ctas, "NCCL minCTAs for the TP communicator")
      ->check(nccl_ctas())
      ->group(ovl);
  cmd.add_option("--nccl-cta-policy", c.nccl_cta_policy,
                 "NCCL CTA policy of the communicators: default | efficiency (the fewest CTAs "
                 "that keep the bandwidth) | zero (no CTA where NCCL can: copy-engine "
                 "collectives on the symm: strategies' windows, NCCL >= 2.28); unset: NCCL's "
                 "(NCCL_CTA_POLICY or default)")
      ->check(nccl_cta_policy())
      ->group(ovl);
  cmd.add_option("--overlap-gemm-sms", c.overlap_gemm_sms,
                 "SMs that a GEMM running beside a collective (chunked:K, split:N) asks "
                 "cuBLASLt to use, leaving the rest to NCCL's CTAs; 0 = every SM")
      ->check(integer_in(0, kIntMax))
      ->capture_default_str()
      ->group(ovl);
  cmd.add_option("--transport", c.transport,
                 "NCCL transport preset: auto, nvlink (checked against the link matrix), host "
                 "(NCCL_P2P_DISABLE=1: NCCL's shared-memory path through host memory over PCIe, a "
                 "PCIe-class path on an NVLink node, not PCIe peer-to-peer) or net (sockets, as "
                 "between nodes)")
      ->capture_default_str()
      ->group(ovl);
  cmd.add_option("--comm-priority", c.comm_priority,
                 "Priority of the collective stream: high | normal (CUDA_DEVICE_MAX_CONNECTIONS "
                 "is read from the environment and recorded)")
      ->capture_default_str()
      ->group(ovl);
}

// Measurement: iterations, checks, outputs and files.
void bind_measurement_options(CLI::App& cmd, RunConfig& c) {
  const char* const meas = "Measurement";
  cmd.add_option("--warmup", c.warmup, "Warm-up iterations (recorded and marked, not summarised)")
      ->check(integer_in(0, kIntMax))
      ->capture_default_str()
      ->group(meas);
  cmd.add_option("--iters", c.iters,
                 "Timed iterations (default 10; with --decode-steps N: N, and a multiple of N)")
      ->check(integer_in(1, kIntMax))
      ->group(meas);
  cmd.add_option(
         "--check", c.check,
         "Compare the output with the whole model recomputed at TP=1, PP=1: auto | on | off "
         "(auto: on when that reference fits in 2 GiB of host memory or a quarter of the free GPU "
         "memory); a trace run's replayed steps too, each once the replay is done")
      ->capture_default_str()
      ->group(meas);
  cmd.add_option("--seed", c.seed, "Seed of the weight and input generator")
      ->check(integer_in(0))
      ->capture_default_str()
      ->group(meas);
  cmd.add_option("--out,-o", c.out, "HDF5 output file (default: results/ridgeline-<UTC time>.h5)")
      ->group(meas);
  cmd.add_option(
         "--file-layout", c.file_layout,
         "How the ranks' timelines reach the disk: single (one file, every rank writing its "
         "own rows through MPI-IO; needs parallel HDF5), per-node (a file per node written by "
         "its first rank, joined by external links in the --out file) or auto (per-node when "
         "the job spans nodes or HDF5 is serial, else single)")
      ->capture_default_str()
      ->group(meas);
  cmd.add_flag("--per-rank-files", c.per_rank_files, "The per-node layout: --file-layout per-node")
      ->group(meas);
  cmd.add_option("--ranks-per-file", c.ranks_per_file,
                 "Per-node layout: at most this many ranks of a node share a node file; 0 = all of "
                 "the node's")
      ->capture_default_str()
      ->group(meas);
  cmd.add_option("--timeout", c.timeout_s,
                 "Seconds a collective may wait before the job is aborted (1e9 or more: never)")
      ->check(number_above(0))
      ->capture_default_str()
      ->group(meas);
  cmd.add_option(
         "--roofs", c.roofs,
         "Roofs for attribution: a file written by `ridgeline roofs`, or none; default: "
         "measure a short version first (GEMM peak, memory bandwidth, launch floor, interconnect)")
      ->group(meas);
  cmd.add_option("--json", c.json,
                 "Also write the summary (ops, ceilings, step split) as JSON to this file")
      ->group(meas);
  cmd.add_option("--markdown", c.markdown, "Also write the summary as markdown to this file")
      ->group(meas);
  cmd.add_option("--sample-ms", c.sample_ms,
                 "Period of each rank's NVML samples of its GPU (SM and memory clocks, power, "
                 "temperature, clock-event reasons) in ms; 0 = off")
      ->check(integer_in(0, kIntMax))
      ->capture_default_str()
      ->group(meas);
  cmd.add_flag("--quiet,-q", c.quiet,
               "No progress line on stderr (rank 0 prints one every few seconds: where the job is, "
               "elapsed time, ETA)")
      ->group(meas);
}

} // namespace

void bind_run_options(CLI::App& cmd, RunConfig& c) {
  cmd.footer("Model presets: --config models/<name>.toml (tiny, gpt-h8192, gpt3-175b, llama3-8b, "
             "llama3-70b, llama3-405b; mixture of experts: mixtral-8x7b, qwen3-moe, deepseek-v3); "
             "options given on the command line override the file.");
  bind_model_options(cmd, c);
  bind_workload_options(cmd, c);
  bind_parallel_options(cmd, c);
  bind_execution_options(cmd, c);
  bind_overlap_options(cmd, c);
  bind_measurement_options(cmd, c);
}

void apply_defaults(RunConfig& c, const std::string& backend, int nodes) {
  const bool host = backend == "host";
  const bool preset = c.hidden > 0;
  if (c.backend == "auto") c.backend = backend;
  if (c.model.empty()) c.model = preset ? "custom" : (host ? "host-default" : "gpt-h8192");
  if (!preset) {
    // Host: small enough for two ranks on two CPU cores to finish within seconds.
    // GPU: the Megatron-style h=8192, 64-head, GELU 4h reference layer.
    c.hidden = host ? 1024 : 8192;
    if (c.heads == 0) c.heads = host ? 16 : 64;
    if (c.layers == 0) c.layers = host ? 2 : 1;
  }
  // A model given by its dimensions alone gets the classic 4h MLP; an MoE model without a dense
  // width, its experts' width.
  if (c.ffn_hidden == 0)
    c.ffn_hidden = c.experts > 0 && c.expert_ffn_hidden > 0 ? c.expert_ffn_hidden : 4 * c.hidden;
  if (c.experts > 0 && c.gating.empty()) c.gating = "softmax";
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.layers == 0) c.layers = 1;
  if (c.mlp.empty()) c.mlp = "gelu";
  if (c.norm.empty()) c.norm = "layernorm";
  if (c.rotary.empty()) c.rotary = "off";
  const bool decode = c.phase == "decode";
  if (c.batch == 0) c.batch = decode ? (host ? 8 : 64) : 1;
  if (decode) c.seq = 1;
  if (c.seq == 0) c.seq = host ? 512 : 4096;
  apply_mixed_defaults(c, host);
  if (c.context < 0) c.context = decode ? (host ? 256 : 1) : 0;
  if (c.iters == 0)
    c.iters =
        c.decode_steps > 0
            ? static_cast<int>(std::min<int64_t>(c.decode_steps, std::numeric_limits<int>::max()))
            : 10;
  if (c.dtype == "auto") c.dtype = c.backend == "host" ? "fp32" : "bf16";
  // The CUDA backend's kernel switches: the environment's where no option gave one, recorded
  // in their canonical form (a bad value stays as given, for validate() to name).
  if (c.backend == "cuda") {
    const KernelTuningText env = kernel_tuning_env();
    for (auto [mine, theirs] : {std::pair{&c.pdl, &env.pdl},
                                {&c.skinny_rows, &env.skinny_rows},
                                {&c.epilogues, &env.epilogues}})
      if (mine->empty()) *mine = *theirs;
    try {
      const KernelTuningText canonical =
          kernel_tuning_text(parse_kernel_tuning({c.pdl, c.skinny_rows, c.epilogues}));
      c.pdl = canonical.pdl;
      c.skinny_rows = canonical.skinny_rows;
      c.epilogues = canonical.epilogues;
    } catch (const UsageError&) {
    }
  }
  // A job across nodes writes a file per node: each node's writer stays on its node's
  // filesystem client instead of funnelling every rank's rows through one.
  if (c.file_layout == "auto")
    c.file_layout = c.per_rank_files || c.ranks_per_file > 0 || nodes > 1
                        ? "per-node"
                        : file_layout_name(default_file_layout());
}

std::vector<std::string> resolve_grid(RunConfig& c, const NodeMap& nodes, int world_size) {
  if (c.tp != 0) return {};
  if (nodes.ranks_per_node == 0)
    return {"--tp auto takes the ranks of one node, but the " + std::to_string(nodes.nodes) +
            " nodes run different numbers of ranks: give --tp a number, or as many ranks to "
            "every node (--ntasks-per-node)"};
  c.tp = nodes.ranks_per_node;
  const int64_t tp_pp = static_cast<int64_t>(c.tp) * c.pp;
  if (c.dp == 1 && c.pp > 0 && tp_pp != world_size && world_size % tp_pp == 0)
    c.dp = static_cast<int>(world_size / tp_pp);
  return {};
}

ModelSpec model_spec(const RunConfig& c) {
  ModelSpec m;
  m.name = c.model;
  m.hidden = c.hidden;
  m.heads = c.heads;
  m.kv_heads = c.kv_heads;
  m.ffn_hidden = c.ffn_hidden;
  m.layers = c.layers;
  m.mlp = parse_mlp(c.mlp);
  m.norm = parse_norm(c.norm);
  m.rotary = c.rotary == "on";
  m.rope_theta = c.rope_theta;
  m.norm_eps = c.norm_eps;
  m.experts = c.experts;
  m.top_k = c.top_k;
  m.expert_ffn_hidden = c.expert_ffn_hidden;
  m.shared_experts = c.shared_experts;
  if (!c.gating.empty()) m.gating = parse_gating(c.gating);
  return m;
}

LayerShape layer_shape(const RunConfig& c) {
  LayerShape s;
  s.phase = c.phase == "decode" ? Phase::decode : Phase::prefill; // train: prefill-shaped
  // Train: --batch is the global batch, shared by the data-parallel replicas.
  s.batch = c.batch / c.microbatches / (c.phase == "train" ? c.dp : 1);
  s.seq = s.phase == Phase::decode ? 1 : c.seq;
  s.context = s.phase == Phase::decode ? c.context : 0;
  s.decode_steps = s.phase == Phase::decode && c.decode_steps > 0 ? c.decode_steps : 1;
  if (c.phase == "mixed") {
    // The GEMMs run over every token of the step: a prefill of one sequence of them.
    s.batch = 1;
    s.seq = mixed_tokens(c);
  }
  s.tp = c.tp;
  s.dtype = parse_dtype(c.dtype);
  s.sequence_parallel = c.sequence_parallel;
  return s;
}

std::vector<Overlap> overlap_list(const RunConfig& c) {
  const std::vector<std::string> items = split_list(c.overlap);
  const std::string problem = list_problem(items, overlap_item);
  if (!problem.empty()) throw UsageError(problem);
  std::vector<Overlap> overlaps;
  for (const std::string& item : items)
    overlaps.push_back(parse_overlap(item));
  return overlaps;
}

std::vector<AttentionImpl> attention_list(const RunConfig& c) {
  const std::vector<std::string> items = split_list(c.attention);
  const std::string problem = list_problem(items, attention_item);
  if (!problem.empty()) throw UsageError(problem);
  std::vector<AttentionImpl> impls;
  for (const std::string& item : items)
    impls.push_back(parse_attention(item));
  return impls;
}

namespace {
// Every option of the configuration, whatever its phase.
Attrs option_attrs(const RunConfig& c) {
  return {{"model", c.model},
          {"hidden", c.hidden},
          {"heads", c.heads},
          {"kv_heads", c.kv_heads},
          {"ffn_hidden", c.ffn_hidden},
          {"layers", c.layers},
          {"mlp", c.mlp},
          {"norm", c.norm},
          {"rotary", c.rotary},
          {"rope_theta", c.rope_theta},
          {"norm_eps", c.norm_eps},
          {"phase", c.phase},
          {"batch", c.batch},
          {"seq", c.seq},
          {"context", c.context},
          {"decode_steps", c.decode_steps},
          {"microbatches", c.microbatches},
          {"schedule", c.schedule},
          {"recompute", c.recompute},
          {"sgd_lr", c.sgd_lr},
          {"dp_overlap", c.dp_overlap},
          {"bucket_mb", c.bucket_mb},
          {"dp_shard", static_cast<int64_t>(c.dp_shard ? 1 : 0)},
          {"allow_tp_across_nodes", static_cast<int64_t>(c.allow_tp_across_nodes ? 1 : 0)},
          {"tp", static_cast<int64_t>(c.tp)},
          {"pp", static_cast<int64_t>(c.pp)},
          {"dp", static_cast<int64_t>(c.dp)},
          {"backend", c.backend},
          {"dtype", c.dtype},
          {"attention", c.attention},
          {"gemm_algo", c.gemm_algo},
          {"grouped_gemm", c.grouped_gemm},
          {"pdl", c.pdl},
          {"skinny_rows", c.skinny_rows},
          {"epilogues", c.epilogues},
          {"allreduce", c.allreduce},
          {"allreduce_table", c.allreduce_table},
          {"graphs", static_cast<int64_t>(c.graphs ? 1 : 0)},
          {"overlap", c.overlap},
          {"sequence_parallel", static_cast<int64_t>(c.sequence_parallel ? 1 : 0)},
          {"nccl_max_ctas", static_cast<int64_t>(c.nccl_max_ctas)},
          {"nccl_min_ctas", static_cast<int64_t>(c.nccl_min_ctas)},
          {"nccl_cta_policy", c.nccl_cta_policy},
          {"comm_priority", c.comm_priority},
          {"overlap_gemm_sms", static_cast<int64_t>(c.overlap_gemm_sms)},
          {"transport", c.transport},
          {"allow_shared_gpu", static_cast<int64_t>(c.allow_shared_gpu ? 1 : 0)},
          {"warmup", static_cast<int64_t>(c.warmup)},
          {"iters", static_cast<int64_t>(c.iters)},
          {"check", c.check},
          {"seed", static_cast<int64_t>(c.seed)},
          {"out", c.out},
          {"file_layout", c.file_layout},
          {"ranks_per_file", static_cast<int64_t>(c.ranks_per_file)},
          {"timeout_s", c.timeout_s},
          {"sample_ms", static_cast<int64_t>(c.sample_ms)},
          {"roofs", c.roofs}};
}

// An MoE model's options (none for a dense one): what `model --validate` predicts it from, and
// the ep of each point of a sweep along it.
Attrs moe_config_attrs(const RunConfig& c) {
  if (c.experts == 0) return {};
  return {{"experts", c.experts},
          {"top_k", c.top_k},
          {"expert_ffn_hidden", c.expert_ffn_hidden},
          {"shared_experts", c.shared_experts},
          {"gating", c.gating},
          {"ep", static_cast<int64_t>(c.ep)},
          {"routing", c.routing},
          {"routing_seed", static_cast<int64_t>(c.routing_seed)},
          {"a2a", c.a2a}};
}

// The mixed options (none unless --phase mixed): a trace run's scheduler, else its step's mix.
Attrs mixed_config_attrs(const RunConfig& c) {
  if (c.phase != "mixed") return {};
  if (trace_run(c))
    return {{"chunk", c.chunk},
            {"trace", c.trace},
            {"trace_gen", c.trace_gen},
            {"token_budget", c.token_budget},
            {"max_batch", c.max_batch},
            {"kv_capacity", c.kv_capacity},
            {"duration_s", c.duration_s},
            {"trace_warmup", static_cast<int64_t>(c.trace_warmup)},
            {"slo_ttft_ms", c.slo_ttft_ms},
            {"slo_tpot_ms", c.slo_tpot_ms}};
  Attrs attrs = {{"prefill_seqs", c.prefill_seqs},
                 {"chunk", c.chunk},
                 {"chunk_context", c.chunk_context},
                 {"decode_batch", c.decode_batch},
                 {"contexts", c.contexts},
                 {"context_dist", c.context_dist},
                 {"context_seed", static_cast<int64_t>(c.context_seed)}};
  if (c.prefill_share >= 0) attrs.emplace_back("prefill_share", c.prefill_share);
  return attrs;
}
} // namespace

Attrs config_attrs(const RunConfig& c) {
  Attrs attrs = option_attrs(c);
  for (Attrs extra : {moe_config_attrs(c), mixed_config_attrs(c)})
    for (auto& kv : extra)
      attrs.push_back(std::move(kv));
  return attrs;
}

} // namespace ridgeline
