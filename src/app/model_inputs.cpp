// `ridgeline model`'s inputs from files: the hardware description and a point's options back
// from a file's /config.
#include <algorithm>
#include <fstream>
#include <string>

#include "app/command_support.hpp"
#include "app/config_file.hpp"
#include "app/model.hpp"
#include "app/model_detail.hpp"
#include "core/error.hpp"

namespace ridgeline {

using model_detail::kLinks;

namespace {

struct HardwareFields {
  HardwareSpec hw;
  LinkPreset links[std::size(kLinks)];
  std::string ignored[8];
};

} // namespace

HardwareSpec read_hardware_file(const std::string& path) {
  CLI::App root;
  HardwareFields f;
  HardwareSpec& hw = f.hw;
  CLI::App* h = root.add_subcommand("hardware");
  h->add_option("--name", hw.name)->required();
  h->add_option("--source", hw.source)->required();
  h->add_option("--bf16_tflops", hw.bf16_tflops)->check(number_above(0))->required();
  h->add_option("--fp16_tflops", hw.fp16_tflops)->check(number_above(0));
  h->add_option("--fp32_tflops", hw.fp32_tflops)->check(number_above(0));
  h->add_option("--hbm_gbps", hw.hbm_gbps)->check(number_above(0))->required();
  h->add_option("--compute_achievable", hw.compute_achievable)->check(number_above(0))->required();
  h->add_option("--compute_achievable_source", f.ignored[0])->required();
  h->add_option("--hbm_achievable", hw.hbm_achievable)->check(number_above(0))->required();
  h->add_option("--hbm_achievable_source", f.ignored[1])->required();
  h->add_option("--launch_eager_ns", hw.launch_eager_ns)->check(number_above(0))->required();
  h->add_option("--launch_graph_node_ns", hw.launch_graph_node_ns)->check(number_above(0));
  h->add_option("--launch_source", hw.launch_source)->required();
  for (size_t i = 0; i < std::size(kLinks); ++i) {
    LinkPreset& l = f.links[i];
    l.name = kLinks[i];
    CLI::App* t = root.add_subcommand(kLinks[i]);
    t->add_option("--bandwidth_gbps", l.bandwidth_gbps)->check(number_above(0))->required();
    t->add_option("--achievable", l.achievable)->check(number_above(0))->required();
    t->add_option("--achievable_source", f.ignored[2 + i])->required();
    t->add_option("--latency_us", l.latency_us)->check(number_above(0, true))->required();
    t->add_option("--latency_source", l.latency_source)->required();
  }
  std::ifstream in(path);
  if (!in) throw CLI::ConfigError("--hardware: cannot read '" + path + "'");
  std::set<std::string> tables;
  for (const CLI::ConfigItem& item : parse_config_file(in, path, root)) {
    CLI::App* sub = root.get_subcommand(item.parents.at(0));
    tables.insert(item.parents.at(0));
    CLI::Option* opt = sub->get_option("--" + item.name);
    opt->add_result(item.inputs);
    opt->run_callback();
  }
  for (CLI::App* sub : root.get_subcommands({}))
    for (CLI::Option* opt : sub->get_options())
      if (opt->get_required() && opt->count() == 0)
        throw CLI::ConfigError(path + ": [" + sub->get_name() + "] lacks '" +
                               opt->get_name().substr(2) + "'");
  if (hw.compute_achievable > 1 || hw.hbm_achievable > 1)
    throw CLI::ConfigError(path + ": an achievable fraction above 1");
  for (const LinkPreset& l : f.links)
    hw.links.push_back(l);
  return hw;
}

RunConfig config_from_attrs(const Attrs& a) {
  RunConfig c;
  // An absent key takes its default; one of the wrong type is refused, never defaulted.
  auto i64 = [&](const char* k, int64_t fallback) {
    const AttrValue* v = find_attr(a, k);
    if (v == nullptr) return fallback;
    if (!std::holds_alternative<int64_t>(*v))
      throw UsageError(std::string("/config: ") + k + " must be an integer, found " +
                       attr_to_string(*v));
    return std::get<int64_t>(*v);
  };
  auto text = [&](const char* k, const std::string& fallback) {
    const AttrValue* v = find_attr(a, k);
    return v != nullptr ? attr_to_string(*v) : fallback;
  };
  auto real = [&](const char* k, double fallback) {
    const AttrValue* v = find_attr(a, k);
    if (v == nullptr) return fallback;
    if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
    if (!std::holds_alternative<double>(*v))
      throw UsageError(std::string("/config: ") + k + " must be a number, found " +
                       attr_to_string(*v));
    return std::get<double>(*v);
  };
  c.model = text("model", "");
  c.hidden = i64("hidden", 0), c.heads = i64("heads", 0), c.kv_heads = i64("kv_heads", 0);
  c.ffn_hidden = i64("ffn_hidden", 0), c.layers = i64("layers", 1);
  c.mlp = text("mlp", "gelu"), c.norm = text("norm", "layernorm"), c.rotary = text("rotary", "off");
  c.phase = text("phase", "prefill");
  c.batch = i64("batch", 1), c.seq = i64("seq", 1), c.context = i64("context", 0);
  c.microbatches = i64("microbatches", 1);
  c.sgd_lr = real("sgd_lr", 0), c.bucket_mb = real("bucket_mb", 25);
  c.dp_overlap = text("dp_overlap", "on"), c.dp_shard = i64("dp_shard", 0) != 0;
  c.tp = static_cast<int>(i64("tp", 1)), c.pp = static_cast<int>(i64("pp", 1));
  c.dp = static_cast<int>(i64("dp", 1));
  c.backend = text("backend", "cuda"), c.dtype = text("dtype", "bf16");
  c.attention = text("attention", "fused");
  c.graphs = i64("graphs", 0) != 0;
  c.overlap = text("overlap", "none");
  c.sequence_parallel = i64("sequence_parallel", 0) != 0;
  c.transport = text("transport", "auto");
  // A mixed step's sequences (absent elsewhere).
  c.prefill_seqs = i64("prefill_seqs", -1), c.chunk = i64("chunk", 0);
  c.chunk_context = i64("chunk_context", -1), c.decode_batch = i64("decode_batch", -1);
  c.contexts = text("contexts", ""), c.context_dist = text("context_dist", "");
  c.context_seed = static_cast<uint64_t>(i64("context_seed", 1));
  c.prefill_share = real("prefill_share", -1);
  // A trace run's trace and scheduler (absent elsewhere).
  c.trace = text("trace", ""), c.trace_gen = text("trace_gen", "");
  c.token_budget = i64("token_budget", 0), c.max_batch = i64("max_batch", 0);
  c.kv_capacity = i64("kv_capacity", 0), c.duration_s = real("duration_s", 0);
  c.trace_warmup = static_cast<int>(i64("trace_warmup", 1));
  c.slo_ttft_ms = real("slo_ttft_ms", 0), c.slo_tpot_ms = real("slo_tpot_ms", 0);
  // An MoE model's options (absent for a dense one, and in files written before they were
  // recorded).
  c.experts = i64("experts", 0), c.top_k = i64("top_k", 0);
  c.expert_ffn_hidden = i64("expert_ffn_hidden", 0), c.shared_experts = i64("shared_experts", 0);
  c.gating = text("gating", ""), c.ep = static_cast<int>(i64("ep", 1));
  c.routing = text("routing", "router");
  c.routing_seed = static_cast<uint64_t>(i64("routing_seed", 0)), c.a2a = text("a2a", "nccl");
  return c;
}

} // namespace ridgeline
