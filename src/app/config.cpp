// Binding, defaults and validation of the run configuration.
#include "app/config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <sstream>
#include <utility>

#include "app/command_support.hpp"
#include "app/file_layout.hpp"
#include "collectives/ipc_allreduce.hpp"
#include "models/attention_cudnn.hpp"
#include "models/kernel_tuning.hpp"
#include "models/work_model.hpp"
#include "parallel/schedule.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {
namespace {

bool one_of(const std::string& v, std::initializer_list<const char*> choices) {
  for (const char* c : choices)
    if (v == c) return true;
  return false;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string str(int64_t v) {
  return std::to_string(v);
}

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
}

// The workload: phase, batch, sequence, context and what a step runs.
void bind_workload_options(CLI::App& cmd, RunConfig& c) {
  const char* const work = "Workload";
  cmd.add_option("--phase", c.phase,
                 "prefill (seq tokens per sequence) | decode (one token per sequence, KV cache of "
                 "--context) | train (prefill-shaped forward and backward, gradients checked)")
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
         "and --dtype (timed with --graph for a run with --graphs)")
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
  cmd.add_option("--overlap", c.overlap,
                 "Comma list of strategies run back to back: none (serialized), async (own "
                 "stream), chunked:K (K token chunks pipelined with their collectives), split:N "
                 "(N interleaved parts of the batch; of the tokens for one prefill sequence), "
                 "ce-ring (tp pieces; the collectives as puts into the peers' memory on the copy "
                 "engines, each beside the GEMM of another piece; MPI messages on the host), "
                 "ce-ring:K (ce-ring with the row-parallel GEMMs' pieces in K sub-pieces, the "
                 "peers' partial sums added in the GEMM; without --sequence-parallel each summed "
                 "sub-piece put into the peers while the next computes), "
                 "symm:none, symm:async, symm:chunked:K (those with the collectives' buffers in "
                 "one NCCL symmetric window; ordinary buffers on the host)")
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
         "memory)")
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
             "llama3-70b, llama3-405b); options given on the command line override the file.");
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
  // A model given by its dimensions alone gets the classic 4h MLP.
  if (c.ffn_hidden == 0) c.ffn_hidden = 4 * c.hidden;
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.layers == 0) c.layers = 1;
  if (c.mlp.empty()) c.mlp = "gelu";
  if (c.norm.empty()) c.norm = "layernorm";
  if (c.rotary.empty()) c.rotary = "off";
  const bool decode = c.phase == "decode";
  if (c.batch == 0) c.batch = decode ? (host ? 8 : 64) : 1;
  if (decode) c.seq = 1;
  if (c.seq == 0) c.seq = host ? 512 : 4096;
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
    return {"--tp auto takes the ranks of one node, but the " + str(nodes.nodes) +
            " nodes run different numbers of ranks: give --tp a number, or as many ranks to "
            "every node (--ntasks-per-node)"};
  c.tp = nodes.ranks_per_node;
  const int64_t tp_pp = static_cast<int64_t>(c.tp) * c.pp;
  if (c.dp == 1 && c.pp > 0 && tp_pp != world_size && world_size % tp_pp == 0)
    c.dp = static_cast<int>(world_size / tp_pp);
  return {};
}

std::vector<NamedFile> input_files(const RunConfig& c) {
  return {{c.roofs == "none" ? "" : c.roofs, "--roofs"}, {c.allreduce_table, "--allreduce-table"}};
}

std::vector<std::string> validate_shared(const RunConfig& c) {
  std::vector<std::string> p;
  if (!one_of(c.backend, {"auto", "host", "cuda"}))
    p.push_back("--backend must be one of auto, host, cuda (got '" + c.backend + "')");
  for (const auto& [path, option] :
       {std::pair{c.out, "--out"}, {c.json, "--json"}, {c.markdown, "--markdown"}}) {
    if (path.empty()) continue;
    struct stat st {};
    const std::string dir = parent_dir(path);
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      p.push_back(std::string(option) + ": directory '" + dir + "' does not exist");
  }
  if (!one_of(c.file_layout, {"auto", "single", "per-node"}))
    p.push_back("--file-layout must be one of auto, single, per-node (got '" + c.file_layout +
                "')");
  if (c.file_layout == "single" && default_file_layout() != FileLayout::single)
    p.push_back(
        "--file-layout single needs parallel HDF5 (MPI-IO); this build links the serial library "
        "(install libhdf5-openmpi-dev and rebuild, or use --file-layout per-node)");
  if (c.per_rank_files && c.file_layout == "single")
    p.push_back("--per-rank-files writes the per-node layout: it contradicts --file-layout single");
  if (c.ranks_per_file < 0) p.push_back("--ranks-per-file must be >= 0 (0: a file per node)");
  if (c.ranks_per_file > 0 && c.file_layout == "single")
    p.push_back("--ranks-per-file applies to the per-node layout, not to --file-layout single");
  // The kernel switches: a value they do not take, else any value without the cuda backend.
  if (!c.pdl.empty() || !c.skinny_rows.empty() || !c.epilogues.empty()) {
    try {
      parse_kernel_tuning({c.pdl, c.skinny_rows, c.epilogues});
      if (c.backend == "host")
        p.push_back("--pdl, --skinny-rows and --epilogues switch the CUDA backend's kernels: "
                    "need the cuda backend");
    } catch (const UsageError& e) {
      p.push_back(e.what());
    }
  }
  if (!c.roofs.empty() && c.roofs != "none") {
    struct stat st {};
    if (stat(c.roofs.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      p.push_back("--roofs: '" + c.roofs +
                  "' is not a file (write one with `ridgeline roofs`, or give none)");
  }
  return p;
}

std::vector<std::string> validate(const RunConfig& c, int world_size) {
  std::vector<std::string> p;
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) p.push_back(std::string(name) + " must be positive (got " + str(v) + ")");
    return v > 0;
  };
  bool dims_ok = true;
  for (auto [v, name] : {std::pair{c.hidden, "--hidden"},
                         {c.heads, "--heads"},
                         {c.kv_heads, "--kv-heads"},
                         {c.ffn_hidden, "--ffn-hidden"},
                         {c.layers, "--layers"},
                         {c.batch, "--batch"},
                         {c.seq, "--seq"},
                         {c.microbatches, "--microbatches"}})
    dims_ok = positive(v, name) && dims_ok;
  bool grid_ok = true;
  for (auto [v, name] : {std::pair{c.tp, "--tp"}, {c.pp, "--pp"}, {c.dp, "--dp"}})
    grid_ok = positive(v, name) && grid_ok;
  if (c.context < 0) p.push_back("--context must be >= 0 (got " + str(c.context) + ")");
  if (c.decode_steps < 0)
    p.push_back("--decode-steps must be >= 0 (got " + str(c.decode_steps) + ")");
  if (c.decode_steps > 0 && c.phase != "decode")
    p.push_back("--decode-steps " + str(c.decode_steps) +
                " generates tokens: it needs --phase decode (got --phase " + c.phase + ")");
  if (c.decode_steps > 0 && c.phase == "decode" && c.iters >= 1 && c.iters % c.decode_steps != 0)
    p.push_back("--iters " + str(c.iters) + " is not a multiple of --decode-steps " +
                str(c.decode_steps) + " (each timed pass generates the N tokens in order)");
  if (c.warmup < 0) p.push_back("--warmup must be >= 0 (got " + str(c.warmup) + ")");
  if (c.iters < 1) p.push_back("--iters must be >= 1 (got " + str(c.iters) + ")");
  if (c.timeout_s <= 0) p.push_back("--timeout must be positive");
  if (c.sample_ms < 0) p.push_back("--sample-ms must be >= 0 (0: no samples)");
  if (c.norm_eps <= 0) p.push_back("--norm-eps must be positive");
  if (c.rope_theta <= 0) p.push_back("--rope-theta must be positive");
  auto choice = [&](const std::string& v, const char* name, const std::vector<std::string>& ok) {
    if (std::find(ok.begin(), ok.end(), v) != ok.end()) return;
    p.push_back(std::string(name) + " must be one of " + join(ok, ", ") + " (got '" + v + "')");
  };
  choice(c.phase, "--phase", {"prefill", "decode", "train"});
  choice(c.recompute, "--recompute", {"none", "full"});
  choice(c.dp_overlap, "--dp-overlap", {"on", "off"});
  const bool train = c.phase == "train";
  if (!train) {
    if (c.recompute != "none") p.push_back("--recompute needs --phase train");
    if (c.sgd_lr > 0) p.push_back("--sgd-lr needs --phase train");
    if (c.dp_shard) p.push_back("--dp-shard needs --phase train");
  }
  if (c.sgd_lr < 0) p.push_back("--sgd-lr must be >= 0");
  if (c.bucket_mb <= 0) p.push_back("--bucket-mb must be positive");
  if (c.dp_shard && c.sgd_lr > 0)
    p.push_back("--sgd-lr updates whole gradients; with --dp-shard each replica holds 1/dp of "
                "them (no sharded optimizer step is modelled)");
  Schedule schedule;
  if (!c.schedule.empty()) {
    try {
      schedule = parse_schedule(c.schedule);
    } catch (const UsageError& e) {
      p.push_back(std::string("--schedule: ") + e.what());
    }
    if (c.phase == "decode") p.push_back("--schedule pipelines prefill or train, not decode");
  }
  if (train && schedule.kind == ScheduleKind::zb_h1 && c.recompute == "full")
    p.push_back("--schedule zb-h1 defers weight gradients, which need the saved activations: "
                "use --recompute none");
  choice(c.mlp, "--mlp", {"gelu", "swiglu"});
  choice(c.norm, "--norm", {"layernorm", "rmsnorm"});
  choice(c.rotary, "--rotary", {"on", "off"});
  std::vector<std::string> attentions;
  try {
    attentions = attention_list(c);
  } catch (const UsageError& e) {
    p.push_back(std::string("--attention: ") + e.what());
  }
  const bool naive = std::find(attentions.begin(), attentions.end(), "naive") != attentions.end();
  if (std::find(attentions.begin(), attentions.end(), "cudnn") != attentions.end()) {
    if (c.backend != "cuda")
      p.push_back("--attention cudnn needs the cuda backend (cuDNN runs on NVIDIA GPUs; got "
                  "--backend " +
                  c.backend + ")");
    else if (!cudnn_compiled())
      p.push_back("--attention cudnn: this ridgeline was built without cuDNN (install "
                  "nvidia-cudnn-cu13 and nvidia-cudnn-frontend, then build again)");
  }
  choice(c.check, "--check", {"auto", "on", "off"});
  choice(c.gemm_algo, "--gemm-algo", {"heuristic", "search", "skinny"});
  if (c.gemm_algo != "heuristic" && c.backend != "cuda")
    p.push_back("--gemm-algo " + c.gemm_algo +
                " chooses among GPU kernels (cuBLASLt's and the project's): needs the cuda "
                "backend");
  std::vector<std::string> all_reduces = {"nccl"};
  all_reduces.insert(all_reduces.end(), ipc_algo_names().begin(), ipc_algo_names().end());
  all_reduces.push_back("auto");
  choice(c.allreduce, "--allreduce", all_reduces);
  if (c.allreduce == "auto") {
    struct stat st {};
    if (c.allreduce_table.empty())
      p.push_back("--allreduce auto chooses from measured times: give --allreduce-table FILE "
                  "(ridgeline collectives --collectives all_reduce --allreduce "
                  "nccl,oneshot,push,push-ll,twoshot)");
    else if (stat(c.allreduce_table.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      p.push_back("--allreduce-table: '" + c.allreduce_table + "' is not a readable file");
  } else if (!c.allreduce_table.empty()) {
    p.push_back("--allreduce-table is read by --allreduce auto (got --allreduce " + c.allreduce +
                ")");
  }
  if (c.allreduce != "nccl") {
    const std::string what = "--allreduce " + c.allreduce + ": the custom all-reduce ";
    if (c.backend != "cuda") p.push_back(what + "runs on GPUs (needs the cuda backend)");
    if (c.tp < 2)
      p.push_back(what + "replaces the tensor-parallel all-reduce: needs --tp 2 or more");
    if (c.tp > 8) p.push_back(what + "takes tensor-parallel groups of at most 8 ranks");
    if (c.allow_tp_across_nodes)
      p.push_back(what + "maps GPU memory between the ranks of one node: not with "
                         "--allow-tp-across-nodes");
  }
  if (c.backend == "host" && c.dtype != "fp32")
    p.push_back("the host backend computes in fp32 (got --dtype " + c.dtype + ")");
  if (c.graphs && c.backend != "cuda") p.push_back("--graphs needs the cuda backend");
  choice(c.comm_priority, "--comm-priority", {"high", "normal"});
  choice(c.transport, "--transport", {"auto", "nvlink", "host", "net"});
  if (c.transport != "auto" && c.backend != "cuda")
    p.push_back("--transport " + c.transport +
                " selects an NCCL transport: needs the cuda backend");
  if (c.backend != "cuda" && (c.nccl_max_ctas >= 0 || c.nccl_min_ctas >= 0))
    p.push_back("--nccl-max-ctas/--nccl-min-ctas need the cuda backend (NCCL)");
  if (c.nccl_max_ctas == 0 || c.nccl_min_ctas == 0 || c.nccl_max_ctas < -1 || c.nccl_min_ctas < -1)
    p.push_back("--nccl-max-ctas/--nccl-min-ctas must be positive");
  if (c.backend != "cuda" && !c.nccl_cta_policy.empty())
    p.push_back("--nccl-cta-policy needs the cuda backend (NCCL)");
  if (c.overlap_gemm_sms < 0) p.push_back("--overlap-gemm-sms must be >= 0 (0: every SM)");
  if (c.overlap_gemm_sms > 0 && c.backend != "cuda")
    p.push_back("--overlap-gemm-sms needs the cuda backend (cuBLASLt)");
  if (c.sequence_parallel && c.tp < 2) p.push_back("--sequence-parallel needs --tp 2 or more");
  std::vector<std::string> strategies;
  try {
    strategies = overlap_list(c);
  } catch (const UsageError& e) {
    p.push_back(std::string("--overlap: ") + e.what());
  }
  // The train phase and scheduled prefill run on the stage executor, which has neither the
  // chunked and split strategies nor graphs.
  if (train || (c.phase == "prefill" && !c.schedule.empty())) {
    const std::string what = train ? "the train phase" : "a scheduled prefill (--schedule)";
    for (const std::string& name : strategies)
      if (name != "none" && name != "async")
        p.push_back("--overlap " + name + ": " + what + " runs none or async" +
                    (train ? " (the backward's all-reduce beside the weight-gradient GEMM)" : ""));
    if (c.graphs) p.push_back("--graphs captures forward stages: not " + what);
  }
  if (c.graphs && c.pp > 1)
    p.push_back("--graphs captures one stage without pipeline transfers: use --pp 1");
  if (c.graphs)
    for (const std::string& name : strategies)
      if (parse_overlap(name).kind == Overlap::Kind::ce_ring)
        p.push_back("--overlap " + name +
                    " numbers its puts on the host, which a captured graph would replay "
                    "unchanged: not with --graphs");
  if (c.backend == "cuda" && !one_of(c.dtype, {"bf16", "fp16"}))
    p.push_back("the cuda backend computes in bf16 or fp16 (got --dtype " + c.dtype + ")");

  if (grid_ok && static_cast<int64_t>(c.tp) * c.pp * c.dp != world_size)
    p.push_back("tp * pp * dp = " + str(static_cast<int64_t>(c.tp) * c.pp * c.dp) + " but " +
                str(world_size) + " ranks are running (mpirun -np N)");
  if (dims_ok) {
    if (c.hidden % c.heads != 0)
      p.push_back("--hidden " + str(c.hidden) + " is not divisible by --heads " + str(c.heads));
    if (c.heads % c.kv_heads != 0)
      p.push_back("--heads " + str(c.heads) + " is not a multiple of --kv-heads " +
                  str(c.kv_heads));
    if (c.rotary == "on" && (c.hidden / c.heads) % 2 != 0)
      p.push_back("rotary embedding needs an even head dimension (got " + str(c.hidden / c.heads) +
                  ")");
    if (c.batch % c.microbatches != 0)
      p.push_back("--batch " + str(c.batch) + " is not divisible by --microbatches " +
                  str(c.microbatches));
    else if (c.phase == "train" && grid_ok && c.batch % (c.microbatches * c.dp) != 0)
      p.push_back("--phase train: the global --batch " + str(c.batch) +
                  " does not divide into --dp " + str(c.dp) + " replicas of --microbatches " +
                  str(c.microbatches) + " microbatches");
  }
  if (dims_ok && grid_ok) {
    if (c.heads % c.tp != 0)
      p.push_back("--heads " + str(c.heads) + " is not divisible by --tp " + str(c.tp));
    if (c.kv_heads % c.tp != 0 && c.tp % c.kv_heads != 0)
      p.push_back("--kv-heads " + str(c.kv_heads) + " and --tp " + str(c.tp) +
                  ": one must divide the other (KV heads are split, or replicated across ranks)");
    if (c.ffn_hidden % c.tp != 0)
      p.push_back("--ffn-hidden " + str(c.ffn_hidden) + " is not divisible by --tp " + str(c.tp));
    if (c.layers % c.pp != 0)
      p.push_back("--layers " + str(c.layers) + " is not divisible by --pp " + str(c.pp));
    if (c.batch % c.microbatches == 0 && (train || !c.schedule.empty()))
      for (const std::string& problem :
           schedule_problems(c.schedule.empty() ? Schedule{ScheduleKind::one_f_one_b, 1} : schedule,
                             c.pp, static_cast<int>(c.microbatches), c.layers, train))
        // Each names the schedule and the flags it concerns; the layer split is checked above.
        if (std::find(p.begin(), p.end(), problem) == p.end()) p.push_back(problem);
    // The stage executor cuts each microbatch's stream into tp row blocks.
    if (c.sequence_parallel && (train || !c.schedule.empty()) &&
        c.batch % (c.microbatches * (train ? c.dp : 1)) == 0 && layer_shape(c).tokens() % c.tp != 0)
      p.push_back("--sequence-parallel: the " + str(layer_shape(c).tokens()) +
                  " tokens per microbatch do not divide into --tp " + str(c.tp) +
                  " equal row blocks");
    if (c.batch % c.microbatches == 0 && one_of(c.phase, {"prefill", "decode"}) &&
        !(c.phase == "prefill" && !c.schedule.empty()))
      for (const std::string& name : strategies)
        for (const std::string& problem : stage_split_problems(layer_shape(c), parse_overlap(name)))
          p.push_back("--overlap " + problem);
    // Kernels, BLAS and MPI take 32-bit counts: every tensor must stay below 2^31 elements.
    const double mb_batch = static_cast<double>(c.batch / c.microbatches);
    const bool decode = c.phase == "decode";
    const double tokens = decode ? mb_batch : mb_batch * static_cast<double>(c.seq);
    const double kv = decode ? static_cast<double>(c.context) +
                                   static_cast<double>(std::max<int64_t>(c.decode_steps, 1))
                             : static_cast<double>(c.seq);
    const double f = static_cast<double>(c.ffn_hidden / c.tp * (c.mlp == "swiglu" ? 2 : 1));
    const double heads = static_cast<double>(c.heads / c.tp);
    const double h = static_cast<double>(c.hidden);
    const std::pair<const char*, double> counts[] = {
        {"activations (tokens x hidden)", tokens * h},
        {"MLP activations (tokens x ffn / tp)", tokens * f},
        {"MLP weights (hidden x ffn / tp)", h * f},
        // The KV cache is indexed by 64-bit offsets everywhere; its rows still count in 32 bits.
        {"KV cache rows (batch x (context + decode steps))", mb_batch * kv},
        {"attention scores (batch x heads / tp x seq x context)",
         naive ? mb_batch * heads * (decode ? 1.0 : static_cast<double>(c.seq)) * kv : 0.0}};
    for (const auto& [what, elements] : counts)
      if (elements >= static_cast<double>(INT32_MAX)) {
        std::ostringstream msg;
        msg << what << " would hold " << elements << " elements, over the 32-bit limit "
            << INT32_MAX;
        p.push_back(msg.str());
      }
  }
  for (std::string& problem : validate_shared(c))
    p.push_back(std::move(problem));
  return p;
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
  s.tp = c.tp;
  s.dtype = parse_dtype(c.dtype);
  s.sequence_parallel = c.sequence_parallel;
  return s;
}

std::vector<std::string> overlap_list(const RunConfig& c) {
  const std::vector<std::string> items = split_list(c.overlap);
  const std::string problem = list_problem(items, overlap_item);
  if (!problem.empty()) throw UsageError(problem);
  std::vector<std::string> names;
  for (const std::string& item : items)
    names.push_back(parse_overlap(item).name());
  return names;
}

std::vector<std::string> attention_list(const RunConfig& c) {
  const std::vector<std::string> items = split_list(c.attention);
  const std::string problem = list_problem(items, attention_item);
  if (!problem.empty()) throw UsageError(problem);
  std::vector<std::string> names;
  for (const std::string& item : items)
    names.push_back(attention_name(parse_attention(item)));
  return names;
}

Attrs config_attrs(const RunConfig& c) {
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

} // namespace ridgeline
