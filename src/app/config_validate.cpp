// Validation of the run configuration (see config.hpp): every problem at once, by topic. The
// lists and the schedule are parsed once here and their parsed form is what the later checks
// look at.
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <sstream>
#include <utility>

#include "app/command_support.hpp"
#include "app/config.hpp"
#include "app/config_mixed.hpp"
#include "app/file_layout.hpp"
#include "app/point_spec.hpp"
#include "collectives/ipc_allreduce.hpp"
#include "models/attention_cudnn.hpp"
#include "models/kernel_tuning.hpp"
#include "models/moe_layer.hpp"
#include "parallel/overlap.hpp"
#include "parallel/overlap_policy.hpp"
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

using Problems = std::vector<std::string>;

void choice(Problems& p, const std::string& v, const char* name,
            const std::vector<std::string>& ok) {
  if (std::find(ok.begin(), ok.end(), v) != ok.end()) return;
  p.push_back(std::string(name) + " must be one of " + join(ok, ", ") + " (got '" + v + "')");
}

// What the topic checks share: the strings parsed once (what the typed point is built from),
// and whether the dimensions and the grid are positive (the divisibility checks need both).
struct Parsed {
  bool dims_ok = true, grid_ok = true;
  bool train = false;
  bool scheduled = false; ///< train, or prefill with --schedule
  Schedule schedule;      ///< --schedule, or the train phase's 1f1b
  PointOptions options;   ///< the lists, the kernel switches and a scheduled point's schedule
};

// Sizes, counts and the measurement's numbers.
void check_numbers(const RunConfig& c, Parsed& d, Problems& p) {
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) p.push_back(std::string(name) + " must be positive (got " + str(v) + ")");
    return v > 0;
  };
  for (auto [v, name] : {std::pair{c.hidden, "--hidden"},
                         {c.heads, "--heads"},
                         {c.kv_heads, "--kv-heads"},
                         {c.ffn_hidden, "--ffn-hidden"},
                         {c.layers, "--layers"},
                         {c.batch, "--batch"},
                         {c.seq, "--seq"},
                         {c.microbatches, "--microbatches"}})
    d.dims_ok = positive(v, name) && d.dims_ok;
  for (auto [v, name] : {std::pair{c.tp, "--tp"}, {c.pp, "--pp"}, {c.dp, "--dp"}})
    d.grid_ok = positive(v, name) && d.grid_ok;
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
}

// The phase, the training options and the pipeline schedule.
void check_workload(const RunConfig& c, Parsed& d, Problems& p) {
  choice(p, c.phase, "--phase", {"prefill", "decode", "train", "mixed"});
  choice(p, c.recompute, "--recompute", {"none", "full"});
  choice(p, c.dp_overlap, "--dp-overlap", {"on", "off"});
  d.train = c.phase == "train";
  d.scheduled = d.train || (c.phase == "prefill" && !c.schedule.empty());
  if (!d.train) {
    if (c.recompute != "none") p.push_back("--recompute needs --phase train");
    if (c.sgd_lr > 0) p.push_back("--sgd-lr needs --phase train");
    if (c.dp_shard) p.push_back("--dp-shard needs --phase train");
  }
  if (c.sgd_lr < 0) p.push_back("--sgd-lr must be >= 0");
  if (c.bucket_mb <= 0) p.push_back("--bucket-mb must be positive");
  if (c.dp_shard && c.sgd_lr > 0)
    p.push_back("--sgd-lr updates whole gradients; with --dp-shard each replica holds 1/dp of "
                "them (no sharded optimizer step is modelled)");
  Schedule& schedule = d.schedule;
  schedule = Schedule{ScheduleKind::one_f_one_b, 1};
  if (!c.schedule.empty()) {
    try {
      schedule = parse_schedule(c.schedule);
    } catch (const UsageError& e) {
      schedule = Schedule{};
      p.push_back(std::string("--schedule: ") + e.what());
    }
    if (c.phase == "decode") p.push_back("--schedule pipelines prefill or train, not decode");
  }
  if (d.scheduled) d.options.schedule = schedule;
  if (d.train && schedule.kind == ScheduleKind::zb_h1 && c.recompute == "full")
    p.push_back("--schedule zb-h1 defers weight gradients, which need the saved activations: "
                "use --recompute none");
  choice(p, c.mlp, "--mlp", {"gelu", "swiglu"});
  choice(p, c.norm, "--norm", {"layernorm", "rmsnorm"});
  choice(p, c.rotary, "--rotary", {"on", "off"});
}

// What the MoE executor runs: the attention at any tp, the experts unsplit by TP over EP groups
// of ep consecutive ranks (TP innermost), each rank routing its block of its TP group's tokens;
// forward only.
void check_moe_layout(const RunConfig& c, Problems& p) {
  const std::string moe = "--experts " + str(c.experts) + ": ";
  if (c.phase == "train")
    p.push_back(moe + "an MoE layer runs forward only (prefill or decode); --phase train is not "
                      "executed for MoE models");
  else if (!c.schedule.empty())
    p.push_back(moe + "--schedule runs dense layers only; run an MoE model without it");
  if (c.pp != 1) p.push_back(moe + "an MoE point runs one pipeline stage (--pp 1)");
  if (c.tp >= 1 && c.dp >= 1 && c.ep >= 1 && (c.tp * c.dp) % c.ep != 0)
    p.push_back("--ep " + str(c.ep) + " does not divide the " + str(c.tp * c.dp) + " ranks (tp " +
                str(c.tp) + " x dp " + str(c.dp) +
                "): an EP group is ep consecutive ranks, TP innermost");
  // The stage's tokens, as the point runs them (per microbatch).
  if (const int64_t tokens = layer_shape(c).tokens(); c.tp > 1 && tokens % c.tp != 0)
    p.push_back(moe + "at --tp " + str(c.tp) + " each rank routes a block of tokens / tp, but " +
                str(tokens) + " tokens (" +
                (c.phase == "decode" ? std::string("--batch") : std::string("--batch x --seq")) +
                (c.microbatches > 1 ? " / --microbatches" : "") + ") do not divide by " +
                str(c.tp));
  try {
    for (const Overlap& o : overlap_list(c))
      if (o.symmetric || (o.kind != Overlap::Kind::none && o.kind != Overlap::Kind::async))
        p.push_back(moe + "--overlap " + o.name() +
                    ": an MoE point runs --overlap none or async (its MLP takes whole rows, not "
                    "parts, units or ring pieces)");
  } catch (const std::exception&) {
    // check_overlap reports the list itself.
  }
  if (c.graphs)
    p.push_back(moe + "--graphs captures a step, but an MoE step routes its tokens on the host");
}

// The mixture of experts: its options belong to an MoE model, and hold together.
void check_moe(const RunConfig& c, bool executes, Problems& p) {
  if (c.experts == 0) {
    for (auto [v, name] : {std::pair{c.top_k, "--top-k"},
                           {c.expert_ffn_hidden, "--expert-ffn-hidden"},
                           {c.shared_experts, "--shared-experts"}})
      if (v != 0)
        p.push_back(std::string(name) + " " + str(v) + " needs --experts (a dense MLP has none)");
    if (!c.gating.empty())
      p.push_back("--gating " + c.gating + " needs --experts (a dense MLP has no router)");
    if (c.ep != 1)
      p.push_back("--ep " + str(c.ep) + " needs --experts (a dense MLP has no experts to split)");
    if (c.routing != "router")
      p.push_back("--routing " + c.routing + " needs --experts (a dense MLP has no router)");
    if (c.a2a != "nccl")
      p.push_back("--a2a " + c.a2a + " needs --experts (a dense MLP has no all-to-all)");
    return;
  }
  const size_t before = p.size();
  choice(p, c.gating, "--gating", {"softmax", "sigmoid"});
  if (c.experts < 0) p.push_back("--experts must be >= 0 (got " + str(c.experts) + ")");
  if (c.top_k < 1)
    p.push_back("--top-k must be at least 1 with --experts " + str(c.experts) + " (got " +
                str(c.top_k) + ")");
  else if (c.top_k > c.experts)
    p.push_back("--top-k " + str(c.top_k) + " is above --experts " + str(c.experts) +
                " (each token takes k distinct experts)");
  if (c.expert_ffn_hidden < 1)
    p.push_back("--expert-ffn-hidden must be positive with --experts " + str(c.experts) + " (got " +
                str(c.expert_ffn_hidden) + ")");
  if (c.shared_experts < 0)
    p.push_back("--shared-experts must be >= 0 (got " + str(c.shared_experts) + ")");
  if (c.mlp != "swiglu")
    p.push_back("--experts: the experts are SwiGLU MLPs (got --mlp " + c.mlp + ")");
  if (c.ep < 1)
    p.push_back("--ep must be positive (got " + str(c.ep) + ")");
  else if (c.experts % c.ep != 0)
    p.push_back("--experts " + str(c.experts) + " is not divisible by --ep " + str(c.ep) +
                " (each rank of an expert-parallel group holds as many experts)");
  if (!parse_routing(c.routing, c.routing_seed))
    p.push_back("--routing must be router, uniform or zipf:S with S >= 0 (got '" + c.routing +
                "')");
  choice(p, c.a2a, "--a2a", {"nccl", "ipc"});
  if (c.a2a == "ipc" && (c.backend != "cuda" || c.ep < 2))
    p.push_back("--a2a ipc moves an MoE layer's rows between the GPUs of an expert-parallel "
                "group through CUDA IPC: it needs --backend cuda and --ep above 1");
  if (executes && p.size() == before) check_moe_layout(c, p);
}

// The TP all-reduce: NCCL's, one of the project's, or the fastest of a measured table.
void check_allreduce(const RunConfig& c, Problems& p) {
  std::vector<std::string> all_reduces = {"nccl"};
  all_reduces.insert(all_reduces.end(), ipc_algo_names().begin(), ipc_algo_names().end());
  all_reduces.push_back("auto");
  choice(p, c.allreduce, "--allreduce", all_reduces);
  if (c.allreduce == "auto") {
    struct stat st {};
    if (c.allreduce_table.empty())
      p.push_back("--allreduce auto chooses from measured times: give --allreduce-table FILE "
                  "(ridgeline collectives --collectives all_reduce --allreduce "
                  "nccl,oneshot,push,push-ll,twoshot)");
    else
      for (const std::string& table : split_list(c.allreduce_table))
        if (stat(table.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
          p.push_back("--allreduce-table: '" + table + "' is not a readable file");
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
}

// The backend's kernels and libraries: attention, GEMM, all-reduce, dtype, graphs, NCCL.
void check_kernels(const RunConfig& c, Parsed& d, Problems& p) {
  std::vector<AttentionImpl>& attentions = d.options.attentions;
  try {
    attentions = attention_list(c);
  } catch (const UsageError& e) {
    p.push_back(std::string("--attention: ") + e.what());
  }
  if (std::find(attentions.begin(), attentions.end(), AttentionImpl::cudnn) != attentions.end()) {
    if (c.backend != "cuda")
      p.push_back("--attention cudnn needs the cuda backend (cuDNN runs on NVIDIA GPUs; got "
                  "--backend " +
                  c.backend + ")");
    else if (!cudnn_compiled())
      p.push_back("--attention cudnn: this ridgeline was built without cuDNN (install "
                  "nvidia-cudnn-cu13 and nvidia-cudnn-frontend, then build again)");
  }
  choice(p, c.check, "--check", {"auto", "on", "off"});
  choice(p, c.gemm_algo, "--gemm-algo", {"heuristic", "search", "skinny"});
  choice(p, c.grouped_gemm, "--grouped-gemm", {"loop", "streams", "cublas"});
  if (c.gemm_algo != "heuristic" && c.backend != "cuda")
    p.push_back("--gemm-algo " + c.gemm_algo +
                " chooses among GPU kernels (cuBLASLt's and the project's): needs the cuda "
                "backend");
  check_allreduce(c, p);
  if (c.backend == "host" && c.dtype != "fp32")
    p.push_back("the host backend computes in fp32 (got --dtype " + c.dtype + ")");
  if (c.graphs && c.backend != "cuda") p.push_back("--graphs needs the cuda backend");
  choice(p, c.comm_priority, "--comm-priority", {"high", "normal"});
  choice(p, c.transport, "--transport", {"auto", "nvlink", "host", "net"});
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
}

// The overlap strategies and what each executor can run.
void check_overlap(const RunConfig& c, Parsed& d, Problems& p) {
  std::vector<Overlap>& overlaps = d.options.overlaps;
  try {
    overlaps = overlap_list(c);
  } catch (const UsageError& e) {
    p.push_back(std::string("--overlap: ") + e.what());
  }
  // The train phase and scheduled prefill run on the stage executor, which runs the
  // strategies its registry rows say and no graphs.
  if (d.scheduled) {
    const std::string what = d.train ? "the train phase" : "a scheduled prefill (--schedule)";
    for (const Overlap& o : overlaps)
      if (!overlap_form(o.kind).scheduled_ok)
        p.push_back("--overlap " + o.name() + ": " + what + " runs " + scheduled_forms_text());
    if (c.graphs) p.push_back("--graphs captures forward stages: not " + what);
  }
  if (c.graphs && c.pp > 1)
    p.push_back("--graphs captures one stage without pipeline transfers: use --pp 1");
  if (c.graphs)
    for (const Overlap& o : overlaps)
      if (!overlap_form(o.kind).graphs_ok)
        p.push_back("--overlap " + o.name() +
                    " numbers its puts on the host, which a captured graph would replay "
                    "unchanged: not with --graphs");
  if (c.backend == "cuda" && !one_of(c.dtype, {"bf16", "fp16"}))
    p.push_back("the cuda backend computes in bf16 or fp16 (got --dtype " + c.dtype + ")");
}

// How the model's dimensions divide over the heads, the grid, the microbatches and the
// schedule's stages; whether the tokens split for each strategy.
void check_division(const RunConfig& c, const Parsed& d, Problems& p) {
  if (c.hidden % c.heads != 0)
    p.push_back("--hidden " + str(c.hidden) + " is not divisible by --heads " + str(c.heads));
  if (c.heads % c.kv_heads != 0)
    p.push_back("--heads " + str(c.heads) + " is not a multiple of --kv-heads " + str(c.kv_heads));
  if (c.rotary == "on" && (c.hidden / c.heads) % 2 != 0)
    p.push_back("rotary embedding needs an even head dimension (got " + str(c.hidden / c.heads) +
                ")");
  const bool microbatches_ok = c.batch % c.microbatches == 0;
  if (!microbatches_ok)
    p.push_back("--batch " + str(c.batch) + " is not divisible by --microbatches " +
                str(c.microbatches));
  else if (d.train && d.grid_ok && c.batch % (c.microbatches * c.dp) != 0)
    p.push_back("--phase train: the global --batch " + str(c.batch) +
                " does not divide into --dp " + str(c.dp) + " replicas of --microbatches " +
                str(c.microbatches) + " microbatches");
  if (!d.grid_ok) return;
  if (c.heads % c.tp != 0)
    p.push_back("--heads " + str(c.heads) + " is not divisible by --tp " + str(c.tp));
  if (c.kv_heads % c.tp != 0 && c.tp % c.kv_heads != 0)
    p.push_back("--kv-heads " + str(c.kv_heads) + " and --tp " + str(c.tp) +
                ": one must divide the other (KV heads are split, or replicated across ranks)");
  if (c.ffn_hidden % c.tp != 0)
    p.push_back("--ffn-hidden " + str(c.ffn_hidden) + " is not divisible by --tp " + str(c.tp));
  if (c.layers % c.pp != 0)
    p.push_back("--layers " + str(c.layers) + " is not divisible by --pp " + str(c.pp));
  if (!microbatches_ok) return;
  if (d.train || !c.schedule.empty())
    for (const std::string& problem :
         schedule_problems(d.schedule, c.pp, static_cast<int>(c.microbatches), c.layers, d.train))
      // Each names the schedule and the flags it concerns; the layer split is checked above.
      if (std::find(p.begin(), p.end(), problem) == p.end()) p.push_back(problem);
  // The stage executor cuts each microbatch's stream into tp row blocks.
  if (c.sequence_parallel && d.scheduled && c.batch % (c.microbatches * (d.train ? c.dp : 1)) == 0)
    if (const int64_t tokens = layer_shape(c).tokens(); tokens % c.tp != 0)
      p.push_back("--sequence-parallel: the " + str(tokens) +
                  " tokens per microbatch do not divide into --tp " + str(c.tp) +
                  " equal row blocks");
  // The stage executor's strategies cut each microbatch into parts (whole sequences), units
  // (with tp shards under sequence parallelism) and ce-ring's pieces; a strategy of one unit and
  // no pieces is the check above.
  if (d.scheduled && c.batch % (c.microbatches * (d.train ? c.dp : 1)) == 0) {
    const LayerShape shape = layer_shape(c);
    for (const Overlap& o : d.options.overlaps) {
      const OverlapPolicy policy = overlap_policy(o);
      if (!overlap_form(o.kind).scheduled_ok || (policy.units() == 1 && !policy.ring)) continue;
      for (const std::string& problem : stage_split_problems(shape, o, StageExecutor::train))
        p.push_back("--overlap " + problem);
    }
  }
  if (one_of(c.phase, {"prefill", "decode", "mixed"}) && !d.scheduled) {
    const LayerShape shape = layer_shape(c);
    for (const Overlap& o : d.options.overlaps)
      for (const std::string& problem : stage_split_problems(shape, o))
        p.push_back("--overlap " + problem);
  }
}

// Kernels, BLAS and MPI take 32-bit counts: every tensor must stay below 2^31 elements.
void check_sizes(const RunConfig& c, const Parsed& d, Problems& p) {
  const std::vector<AttentionImpl>& attentions = d.options.attentions;
  const bool naive =
      std::find(attentions.begin(), attentions.end(), AttentionImpl::naive) != attentions.end();
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
      msg << what << " would hold " << elements << " elements, over the 32-bit limit " << INT32_MAX;
      p.push_back(msg.str());
    }
}

} // namespace

std::vector<NamedFile> input_files(const RunConfig& c) {
  std::vector<NamedFile> files = {{c.roofs == "none" ? "" : c.roofs, "--roofs"}};
  if (!c.allreduce_table.empty())
    for (const std::string& table : split_list(c.allreduce_table))
      files.push_back({table, "--allreduce-table"});
  return files;
}

namespace {

// validate_shared(), keeping the kernel switches it parses in `tuning` (when not null).
std::vector<std::string> shared_problems(const RunConfig& c, KernelTuning* tuning) {
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
  const bool switched = !c.pdl.empty() || !c.skinny_rows.empty() || !c.epilogues.empty();
  if (switched || c.backend == "cuda") {
    try {
      const KernelTuning parsed = parse_kernel_tuning({c.pdl, c.skinny_rows, c.epilogues});
      if (tuning != nullptr) *tuning = parsed;
      if (switched && c.backend == "host")
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

} // namespace

std::vector<std::string> validate_shared(const RunConfig& c) {
  return shared_problems(c, nullptr);
}

ValidatedPoint validate_point(const RunConfig& c, int world_size, bool executes) {
  ValidatedPoint v;
  Problems& p = v.problems;
  Parsed d;
  check_numbers(c, d, p);
  check_workload(c, d, p);
  check_moe(c, executes, p);
  check_kernels(c, d, p);
  check_overlap(c, d, p);
  for (std::string& problem : mixed_problems(c, d.options.overlaps, executes))
    p.push_back(std::move(problem));
  if (d.grid_ok && static_cast<int64_t>(c.tp) * c.pp * c.dp != world_size)
    p.push_back("tp * pp * dp = " + str(static_cast<int64_t>(c.tp) * c.pp * c.dp) + " but " +
                str(world_size) + " ranks are running (mpirun -np N)");
  if (d.dims_ok) check_division(c, d, p);
  if (d.dims_ok && d.grid_ok) check_sizes(c, d, p);
  for (std::string& problem : shared_problems(c, &d.options.tuning))
    p.push_back(std::move(problem));
  if (p.empty()) v.spec = point_spec(c, std::move(d.options));
  return v;
}

std::vector<std::string> validate(const RunConfig& c, int world_size, bool executes) {
  return validate_point(c, world_size, executes).problems;
}

} // namespace ridgeline
