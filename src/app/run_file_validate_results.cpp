// The run file's validator, the results it holds (see run_file_checks.hpp): summaries with
// their decode, pipeline and serving figures, collectives tables and roofs.
#include "app/run_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "app/command_support.hpp"
#include "app/h5.hpp"
#include "app/run_file_checks.hpp"
#include "app/run_file_schema.hpp"
#include "app/summary.hpp"
#include "app/sweep.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "models/layer_plan.hpp"
#include "models/serving.hpp"

namespace ridgeline::run_file_detail {
namespace {

// --decode-steps: `base`/summary/decode_context (keys per timed iteration) and decode_bins.
void validate_decode(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  int64_t steps = 0;
  const std::string config = base + "/config";
  if (h5::exists(file, config)) {
    const Attrs attrs = h5::read_attrs(h5::open_group(file, config).id());
    if (const AttrValue* v = find_attr(attrs, sa::config::decode_steps))
      if (const auto* n = std::get_if<int64_t>(v)) steps = *n;
  }
  const std::string ctx_path = base + schema::datasets::decode_context.path;
  if (steps <= 0 && !h5::exists(file, ctx_path)) return;
  if (!require_object(file, ctx_path, "dataset", problems)) return;
  const std::vector<int64_t> ctx = h5::read_vector<int64_t>(file, ctx_path);
  // One entry per timed iteration (a missing step_time_ns was reported by itself).
  const std::string steps_path = base + schema::datasets::step_time.path;
  const size_t timed =
      h5::exists(file, steps_path) ? h5::read_vector<double>(file, steps_path).size() : ctx.size();
  if (ctx.size() != timed)
    problems.push_back(ctx_path + ": " + std::to_string(ctx.size()) + " entries but " +
                       std::to_string(timed) + " timed iterations");
  for (size_t i = 0; i < ctx.size(); ++i)
    if (ctx[i] < 1) {
      problems.push_back(ctx_path + ": entry " + std::to_string(i) + " is " +
                         std::to_string(ctx[i]) + ", expected >= 1");
      break;
    }
  namespace f = sf::decode_bins;
  const std::string bins_path = base + schema::tables::decode_bins.path;
  const std::optional<h5::Table> table =
      validate_table(file, bins_path, schema::tables::decode_bins, {"decode"}, problems);
  if (!table) return;
  const auto& first = column<int64_t>(*table, f::context_first, bins_path);
  const auto& last = column<int64_t>(*table, f::context_last, bins_path);
  const auto& tokens = column<int64_t>(*table, f::tokens, bins_path);
  const auto& p50 = column<double>(*table, f::p50_ns, bins_path);
  const auto& p95 = column<double>(*table, f::p95_ns, bins_path);
  const auto& p99 = column<double>(*table, f::p99_ns, bins_path);
  int64_t total = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    const std::string row = bins_path + ": row " + std::to_string(i) + ": ";
    total += tokens[i];
    if (!(first[i] >= 1 && first[i] <= last[i]))
      problems.push_back(row + "expected 1 <= context_first <= context_last");
    if (tokens[i] < 1) problems.push_back(row + "tokens must be >= 1");
    if (!(p50[i] > 0 && p50[i] <= p95[i] && p95[i] <= p99[i]))
      problems.push_back(row + "expected 0 < p50_ns <= p95_ns <= p99_ns");
  }
  if (total != static_cast<int64_t>(ctx.size()))
    problems.push_back(bins_path + ": the bins hold " + std::to_string(total) +
                       " tokens but decode_context has " + std::to_string(ctx.size()));
}

// An MoE point: `base`/summary/moe_rank_imbalance_per_step, where present, is what the summary's
// moe_imbalance_steps and moe_rank_imbalance_max say of it, each step's ratio at least 1.
void validate_moe_imbalance(hid_t file, const std::string& base,
                            std::vector<std::string>& problems) {
  const std::string path = base + schema::datasets::moe_rank_imbalance_per_step.path;
  if (!h5::exists(file, path)) return;
  const std::vector<double> steps = h5::read_vector<double>(file, path);
  const Attrs attrs = h5::read_attrs(h5::open_group(file, base + "/summary").id());
  const AttrValue* count = find_attr(attrs, "moe_imbalance_steps");
  if (count != nullptr && std::holds_alternative<int64_t>(*count) &&
      std::get<int64_t>(*count) != static_cast<int64_t>(steps.size()))
    problems.push_back(path + ": " + std::to_string(steps.size()) +
                       " entries but moe_imbalance_steps is " + attr_to_string(*count));
  for (size_t i = 0; i < steps.size(); ++i)
    if (!(steps[i] >= 1)) {
      problems.push_back(path + ": entry " + std::to_string(i) + " is " + number_text(steps[i]) +
                         ", expected >= 1 (the busiest rank's rows over the mean's)");
      break;
    }
  const AttrValue* most = find_attr(attrs, "moe_rank_imbalance_max");
  if (most != nullptr && std::holds_alternative<double>(*most) && !steps.empty() &&
      *std::max_element(steps.begin(), steps.end()) != std::get<double>(*most))
    problems.push_back(path + ": its largest entry is not moe_rank_imbalance_max " +
                       attr_to_string(*most));
}

// A run across nodes: `base`/summary/nodes, where present.
void validate_nodes(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  namespace f = sf::summary_nodes;
  const std::string path = base + schema::tables::summary_nodes.path;
  if (!h5::exists(file, path)) return;
  const std::optional<h5::Table> table =
      validate_table(file, path, schema::tables::summary_nodes, {}, problems);
  if (!table) return;
  const auto& ranks = column<int64_t>(*table, f::ranks, path);
  const auto& slow = column<int64_t>(*table, f::slow, path);
  const char* const figures[][3] = {{f::compute_lo_ns, f::compute_p50_ns, f::compute_hi_ns},
                                    {f::span_lo_ns, f::span_p50_ns, f::span_hi_ns}};
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string row = path + ": row " + std::to_string(i) + ": ";
    if (ranks[i] < 1) problems.push_back(row + "ranks must be >= 1");
    if (slow[i] != 0 && slow[i] != 1) problems.push_back(row + "slow must be 0 or 1");
    for (const auto& names : figures) {
      const double lo = column<double>(*table, names[0], path)[i];
      const double p50 = column<double>(*table, names[1], path)[i];
      const double hi = column<double>(*table, names[2], path)[i];
      if (!(lo <= p50 && p50 <= hi))
        problems.push_back(row + "expected " + names[0] + " <= " + names[1] + " <= " + names[2]);
    }
  }
}

// The summary's schedule as schedule_name() writes it: one of the schema's schedules, where
// interleaved:<V> stands for V >= 2 (decimal, no leading zero).
bool is_schedule_name(const std::string& name) {
  for (const std::string known : schema::enums::schedule) {
    const size_t family = known.find('<');
    if (family == std::string::npos) {
      if (name == known) return true;
      continue;
    }
    const std::string prefix = known.substr(0, family);
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string v = name.substr(prefix.size());
    if (v.empty() || v.size() > 9 || v[0] == '0' ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (std::stol(v) >= 2) return true;
  }
  return false;
}

// The summary attributes a scheduled pipeline of `pp` stages requires under `held`, in the
// schema's order, each stage<p> family once per stage (stage-major).
std::vector<std::string> pipeline_keys(const Conditions& held, int64_t pp) {
  std::vector<std::string> keys, stage_fields;
  size_t stage_at = 0;
  for (const schema::Attribute& attribute : schema::attributes_of(schema::attributes::summary)) {
    if (held.count(attribute.required) == 0) continue;
    const std::string name = attribute.name;
    const size_t family = name.find("<p>");
    if (family == std::string::npos) {
      keys.push_back(name);
      continue;
    }
    if (stage_fields.empty()) stage_at = keys.size();
    stage_fields.push_back(name.substr(family + 3));
  }
  std::vector<std::string> stages;
  for (int64_t p = 0; p < pp; ++p)
    for (const std::string& field : stage_fields)
      stages.push_back("stage" + std::to_string(p) + field);
  keys.insert(keys.begin() + static_cast<std::ptrdiff_t>(stage_at), stages.begin(), stages.end());
  return keys;
}

// The scheduled pipeline's summary attributes at `group`: present, of their ranges, what the
// check compared against the phase.
void validate_pipeline_attrs(const Attrs& attrs, const std::string& group,
                             const std::string& config_path, const std::string& phase, int64_t pp,
                             std::vector<std::string>& problems) {
  namespace a = sa::summary;
  const bool train = phase == "train";
  // Train with a pipeline: the measured action times and the simulated bubble.
  Conditions held = {"pipeline"};
  const AttrValue* schedule_value = find_attr(attrs, a::schedule);
  const bool split = schedule_value && *schedule_value == AttrValue(std::string("zb-h1"));
  if (train && pp > 1) held.insert("pipeline-actions");
  if (train && pp > 1 && split) held.insert("pipeline-split");
  require_attrs(attrs, group, pipeline_keys(held, pp), problems);

  auto string_attr = [&](const char* key) -> std::optional<std::string> {
    const AttrValue* v = find_attr(attrs, key);
    if (v == nullptr) return std::nullopt;
    if (const auto* s = std::get_if<std::string>(v)) return *s;
    problems.push_back(group + ": attribute '" + key + "' is not a string");
    return std::nullopt;
  };
  if (const auto schedule = string_attr(a::schedule); schedule && !is_schedule_name(*schedule))
    problems.push_back(group + ": schedule is '" + *schedule +
                       "', expected gpipe, 1f1b, interleaved:V (V >= 2) or zb-h1");
  const auto& recomputes = schema::enums::recompute;
  if (const auto recompute = string_attr(a::recompute);
      recompute &&
      std::find(std::begin(recomputes), std::end(recomputes), *recompute) == std::end(recomputes))
    problems.push_back(group + ": recompute is '" + *recompute + "', expected " +
                       one_of(recomputes));
  if (const auto compares = string_attr(a::check_compares)) {
    const auto& known = schema::enums::check_compares;
    const std::string expected = train ? "gradients" : "outputs";
    if (std::find(std::begin(known), std::end(known), *compares) == std::end(known))
      problems.push_back(group + ": check_compares is '" + *compares + "', expected " +
                         one_of(known));
    else if (*compares != expected)
      problems.push_back(group + ": check_compares is '" + *compares + "' but " + config_path +
                         " phase is " + phase + " (expected " + expected + ")");
  }
  if (const AttrValue* v = find_attr(attrs, a::microbatches)) {
    const auto* n = std::get_if<int64_t>(v);
    if (n == nullptr || *n < 1)
      problems.push_back(group + ": microbatches must be an integer >= 1, found '" +
                         attr_to_string(*v) + "'");
  }
  auto number = [&](const std::string& key) -> std::optional<double> {
    const AttrValue* v = find_attr(attrs, key);
    if (v == nullptr) return std::nullopt;
    if (const auto* d = std::get_if<double>(v)) return *d;
    if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
    problems.push_back(group + ": attribute '" + key + "' is not a number");
    return std::nullopt;
  };
  auto at_least = [&](const std::string& key, double low, bool fraction, bool strict) {
    const auto x = number(key);
    if (!x) return;
    if (fraction && !(*x >= 0 && *x <= 1))
      problems.push_back(group + ": " + key + " must be in [0, 1], found " + number_text(*x));
    else if (!fraction && !(strict ? *x > low : *x >= low))
      problems.push_back(group + ": " + key + " must be " + (strict ? "> " : ">= ") +
                         number_text(low) + ", found " + number_text(*x));
  };
  at_least(a::bubble_theory, 0, true, false);
  at_least(a::bubble_simulated, 0, true, false);
  for (const char* key : {a::action_forward_ns, a::action_backward_ns, a::action_backward_input_ns,
                          a::action_backward_weight_ns})
    if (held.count(find_required(schema::attributes::summary, key)) > 0)
      at_least(key, 0, false, true);
  for (int64_t p = 0; p < pp; ++p)
    for (const std::string& key : pipeline_keys({"pipeline"}, p + 1)) {
      const std::string stage = "stage" + std::to_string(p) + ".";
      if (key.rfind(stage, 0) != 0) continue;
      at_least(key, 0, key == stage + "bubble", false);
    }
}

// The ops a scheduled pipeline records in the op table at `ops_path`, where it was kept: the
// stage's own, and for train every backward op its configuration runs.
void validate_pipeline_ops(hid_t file, const std::string& ops_path, const Attrs& config, bool train,
                           std::vector<std::string>& problems) {
  namespace c = sa::config;
  if (!h5::exists(file, ops_path)) return;
  auto integer = [&](const char* key, int64_t fallback) {
    const AttrValue* v = find_attr(config, key);
    const auto* i = v ? std::get_if<int64_t>(v) : nullptr;
    return i ? *i : fallback;
  };
  const h5::Table table = h5::read_table(file, ops_path);
  const auto& names = column<std::string>(table, sf::ops::name, ops_path);
  const std::set<std::string> present(names.begin(), names.end());
  std::vector<std::string> required = {op::pp_exchange, op::pp_flush};
  if (train) {
    for (const char* name :
         {op::fc2_dgrad, op::fc2_wgrad, op::act_bwd, op::fc1_dgrad, op::fc1_wgrad, op::norm2_bwd,
          op::residual2_bwd, op::proj_dgrad, op::proj_wgrad, op::attention_bwd, op::qkv_dgrad,
          op::qkv_wgrad, op::norm1_bwd, op::residual1_bwd, op::grad_zero})
      required.emplace_back(name);
    const AttrValue* rotary = find_attr(config, c::rotary);
    if (rotary != nullptr && *rotary == AttrValue(std::string("on")))
      required.emplace_back(op::rotary_bwd);
    if (integer(c::tp, 1) > 1 && integer(c::sequence_parallel, 0) != 0) {
      for (const char* name :
           {op::allgather_mlp_bwd, op::reducescatter_mlp_bwd, op::allgather_attn_bwd,
            op::reducescatter_attn_bwd, op::allreduce_norm_grads})
        required.emplace_back(name);
    } else if (integer(c::tp, 1) > 1) {
      required.emplace_back(op::allreduce_mlp_bwd);
      required.emplace_back(op::allreduce_attn_bwd);
    }
    if (integer(c::dp, 1) > 1)
      required.emplace_back(integer(c::dp_shard, 0) != 0 ? op::dp_reducescatter : op::dp_allreduce);
    const AttrValue* lr = find_attr(config, c::sgd_lr);
    const auto* rate = lr ? std::get_if<double>(lr) : nullptr;
    if (rate != nullptr && *rate > 0) required.emplace_back(op::sgd_update);
  }
  for (const std::string& name : required)
    if (present.count(name) == 0)
      problems.push_back(ops_path + ": missing op '" + name + "' (" +
                         (train ? "a train run" : "a scheduled pipeline") + " records it)");
}

// Scheduled pipelines (`base`/config phase train, or a schedule given): the schedule's
// summary attributes, the four per-stage figures of every stage, bubbles in [0, 1], what the
// check compared; for train, the backward ops (and the stage's own) in the op table where it
// was kept. Files written before the train phase have no `schedule` in /config: not checked.
void validate_pipeline(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  const std::string config_path = base + "/config";
  if (!h5::exists(file, config_path)) return;
  const Attrs config = h5::read_attrs(h5::open_group(file, config_path).id());
  auto text = [&](const char* key) {
    const AttrValue* v = find_attr(config, key);
    const auto* s = v ? std::get_if<std::string>(v) : nullptr;
    return s ? *s : std::string();
  };
  const std::string phase = text(sa::config::phase);
  const bool train = phase == "train";
  if (!train && text(sa::config::schedule).empty()) return;

  const std::string group = base + "/summary";
  const Attrs attrs = h5::read_attrs(h5::open_group(file, group).id());
  const AttrValue* pp_value = find_attr(config, sa::config::pp);
  const auto* pp = pp_value ? std::get_if<int64_t>(pp_value) : nullptr;
  if (pp == nullptr || *pp < 1) {
    problems.push_back(config_path + ": pp must be an integer >= 1 (a scheduled pipeline's "
                                     "stages)");
    return;
  }
  // Four attributes per stage: more stages than the summary has attributes is one problem, not
  // a list of missing keys as long as the (damaged) pp.
  if (static_cast<uint64_t>(*pp) > attrs.size()) {
    problems.push_back(config_path + ": pp " + std::to_string(*pp) + " but " + group + " has " +
                       std::to_string(attrs.size()) + " attributes, not a stage's four each");
    return;
  }
  validate_pipeline_attrs(attrs, group, config_path, phase, *pp, problems);
  validate_pipeline_ops(file, base + "/ops", config, train, problems);
}

// One /collectives/<name> result table: the documented columns, sane rows.
void validate_result_table(hid_t file, const std::string& path,
                           std::vector<std::string>& problems) {
  namespace f = sf::collective_result;
  const std::optional<h5::Table> table =
      validate_table(file, path, schema::tables::collective_result, {}, problems);
  if (!table) return;
  const auto& sizes = column<int64_t>(*table, f::size_bytes, path);
  const auto& wrong = column<int64_t>(*table, f::wrong, path);
  const auto& iters = column<int64_t>(*table, f::iters, path);
  const auto& minimum = column<double>(*table, f::time_min_ns, path);
  const auto& p50 = column<double>(*table, f::time_p50_ns, path);
  const auto& p95 = column<double>(*table, f::time_p95_ns, path);
  const auto& p99 = column<double>(*table, f::time_p99_ns, path);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string row = path + ": row " + std::to_string(i) + ": ";
    if (sizes[i] <= 0) problems.push_back(row + f::size_bytes + " must be > 0");
    if (wrong[i] < 0) problems.push_back(row + f::wrong + " must be >= 0");
    if (iters[i] <= 0) problems.push_back(row + f::iters + " must be > 0");
    if (!(minimum[i] > 0 && minimum[i] <= p50[i] && p50[i] <= p95[i] && p95[i] <= p99[i]))
      problems.push_back(row + "expected 0 < " + f::time_min_ns + " <= " + f::time_p50_ns +
                         " <= " + f::time_p95_ns + " <= " + f::time_p99_ns + ", found " +
                         number_text(minimum[i]) + ", " + number_text(p50[i]) + ", " +
                         number_text(p95[i]) + ", " + number_text(p99[i]));
  }
}

void validate_samples_table(hid_t file, const std::string& path,
                            std::vector<std::string>& problems) {
  namespace f = sf::collective_samples;
  const std::optional<h5::Table> table =
      validate_table(file, path, schema::tables::collective_samples, {}, problems);
  if (!table) return;
  const auto& times = column<double>(*table, f::time_ns, path);
  for (size_t i = 0; i < times.size(); ++i)
    if (!(times[i] > 0)) {
      problems.push_back(path + ": row " + std::to_string(i) + ": " + f::time_ns + " must be > 0");
      break;
    }
}

// `run --repeats R` (R > 1): the summary's median over the repeats within its interval, the
// repeat kept among them, and /repeats holding R rows per strategy.
void validate_run_repeats(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  const std::string group = base + "/summary";
  h5::Handle summary = h5::open_group(file, group);
  const Attrs attrs = h5::read_attrs(summary.id());
  if (find_attr(attrs, "repeat_used") == nullptr) return;
  const int64_t repeats = int_attr(attrs, "repeats", group);
  const int64_t used = int_attr(attrs, "repeat_used", group);
  if (repeats < 2 || used < 0 || used >= repeats)
    problems.push_back(group + ": repeats " + std::to_string(repeats) + " and repeat_used " +
                       std::to_string(used) +
                       ": expected repeats >= 2 and 0 <= repeat_used < repeats");
  const double median = number_attr(attrs, "step_p50_median_ns", group);
  const double lo = number_attr(attrs, "step_p50_lo_ns", group);
  const double hi = number_attr(attrs, "step_p50_hi_ns", group);
  if (!(std::isfinite(lo) && std::isfinite(hi) && lo > 0 && lo <= median && median <= hi))
    problems.push_back(group + ": expected 0 < step_p50_lo_ns <= step_p50_median_ns <= " +
                       "step_p50_hi_ns, found " + number_text(lo) + ", " + number_text(median) +
                       ", " + number_text(hi));
  if (!require_object(file, schema::tables::repeats.path, "dataset (run --repeats)", problems))
    return;
  const std::optional<h5::Table> table =
      validate_table(file, schema::tables::repeats, {"run-repeats"}, problems);
  if (!table) return;
  const auto& names = column<std::string>(*table, sf::repeats::strategy, "/repeats");
  const auto& p50 = column<double>(*table, sf::repeats::step_p50_ns, "/repeats");
  int64_t rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!(std::isfinite(p50[i]) && p50[i] > 0)) {
      problems.push_back("/repeats: row " + std::to_string(i) + ": step_p50_ns is " +
                         number_text(p50[i]) + ", expected > 0");
      return;
    }
    rows += names[i] == names.front() ? 1 : 0;
  }
  if (rows != repeats)
    problems.push_back("/repeats: " + std::to_string(rows) + " row(s) of strategy '" +
                       (names.empty() ? std::string("-") : names.front()) + "', expected " +
                       std::to_string(repeats) + " (" + group + " repeats)");
}

} // namespace

// The summary group `base`/summary (base: "" for /summary, or a point's group).
void validate_summary(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  const std::string group = base + "/summary";
  check_section(problems, [&] {
    const std::string path = base + schema::datasets::step_time.path;
    if (!require_object(file, path, "dataset", problems)) return;
    const std::vector<double> steps = h5::read_vector<double>(file, path);
    if (steps.empty()) problems.push_back(path + ": empty");
    for (size_t i = 0; i < steps.size(); ++i)
      if (!(steps[i] > 0)) {
        problems.push_back(path + ": value " + std::to_string(i) + " is " + number_text(steps[i]) +
                           ", expected > 0");
        break;
      }
  });
  check_section(problems, [&] {
    const std::string path = base + schema::datasets::warmup_step_time.path;
    if (!require_object(file, path, "dataset", problems)) return;
    const std::vector<double> steps = h5::read_vector<double>(file, path);
    for (size_t i = 0; i < steps.size(); ++i)
      if (!(steps[i] > 0 && std::isfinite(steps[i]))) {
        problems.push_back(path + ": value " + std::to_string(i) + " is " + number_text(steps[i]) +
                           ", expected > 0");
        break;
      }
  });
  check_section(problems, [&] {
    h5::Handle summary = h5::open_group(file, group);
    const Attrs attrs = h5::read_attrs(summary.id());
    namespace a = sa::summary;
    require_attrs(attrs, group, required_attributes(schema::attributes::summary), problems);
    check_attribute_types(attrs, group, schema::attributes::summary, problems);
    validate_checksum(attrs, group, problems);
    if (const AttrValue* found = find_attr(attrs, a::attention)) {
      const std::string* name = std::get_if<std::string>(found);
      const auto& known = schema::enums::attention;
      if (name == nullptr ||
          std::find(std::begin(known), std::end(known), *name) == std::end(known))
        problems.push_back(group + ": " + a::attention + " is '" + attr_to_string(*found) +
                           "', expected " + one_of(known));
    }
    if (find_attr(attrs, a::p50_ns) == nullptr || find_attr(attrs, a::p95_ns) == nullptr ||
        find_attr(attrs, a::p99_ns) == nullptr)
      return;
    const double p50 = number_attr(attrs, a::p50_ns, group);
    const double p95 = number_attr(attrs, a::p95_ns, group);
    const double p99 = number_attr(attrs, a::p99_ns, group);
    if (!(p50 <= p95 && p95 <= p99))
      problems.push_back(group + ": expected p50_ns <= p95_ns <= p99_ns, found " +
                         number_text(p50) + ", " + number_text(p95) + ", " + number_text(p99));
  });
  check_section(problems, [&] {
    const std::string path = base + schema::tables::summary_ops.path;
    if (!validate_table(file, path, schema::tables::summary_ops, {}, problems)) return;
    for (const OpAggregate& a : read_aggregates(file, path)) {
      const std::pair<const char*, double> fields[] = {{"p50_ns", a.p50_ns},
                                                       {"mean_ns", a.mean_ns},
                                                       {"per_step_p50_ns", a.per_step_p50_ns},
                                                       {"share", a.share},
                                                       {"flops", a.flops},
                                                       {"hbm_bytes", a.hbm_bytes},
                                                       {"comm_bytes", a.comm_bytes},
                                                       {"bound_ns", a.bound_ns},
                                                       {"efficiency", a.efficiency}};
      for (const auto& [name, value] : fields)
        if (!(std::isfinite(value) && value >= 0)) {
          problems.push_back(group + "/ops: op " + a.name + ": " + name + " is " +
                             number_text(value) + ", expected a finite value >= 0");
          break;
        }
    }
  });
  check_section(problems, [&] { validate_run_repeats(file, base, problems); });
  check_section(problems, [&] { validate_decode(file, base, problems); });
  check_section(problems, [&] { validate_moe_imbalance(file, base, problems); });
  check_section(problems, [&] { validate_nodes(file, base, problems); });
  check_section(problems, [&] { validate_pipeline(file, base, problems); });
  check_section(problems, [&] { validate_serving(file, base, problems); });
}

void validate_collectives(hid_t file, std::vector<std::string>& problems) {
  h5::Handle group = h5::open_group(file, "/collectives");
  const std::vector<std::string> children = h5::list_children(group.id());
  if (children.empty()) problems.emplace_back("/collectives: empty");
  for (const std::string& name : children)
    check_section(problems, [&] {
      const std::string path = "/collectives/" + name;
      if (ends_with(name, kSamplesSuffix)) {
        validate_samples_table(file, path, problems);
        return;
      }
      validate_result_table(file, path, problems);
      // A sweep on symmetric buffers names the window it ran in.
      if (ends_with(name, "_symm")) {
        h5::Handle table(H5Oopen(file, path.c_str(), H5P_DEFAULT), "H5Oopen", path);
        const Attrs attrs = h5::read_attrs(table.id());
        const AttrValue* buffers = find_attr(attrs, "buffers");
        if (buffers == nullptr || !std::holds_alternative<std::string>(*buffers) ||
            std::get<std::string>(*buffers).empty() ||
            std::get<std::string>(*buffers) == "ordinary")
          problems.push_back(path + ": a _symm sweep needs the attribute buffers naming its " +
                             "symmetric window");
      }
    });
}

void validate_roof(hid_t file, std::vector<std::string>& problems, bool envelope_required) {
  namespace f = sf::roofs_interconnect;
  const std::optional<h5::Table> found =
      validate_table(file, schema::tables::roofs_interconnect,
                     envelope_required ? Conditions{"envelope"} : Conditions{}, problems);
  if (!found) return;
  const h5::Table& table = *found;
  const bool envelope = envelope_required || h5::find_column(table, f::floor_alpha_us) != nullptr;
  const auto& alpha = column<double>(table, f::alpha_us, kRoofPath);
  const auto& beta = column<double>(table, f::beta_gbps, kRoofPath);
  const auto& known = schema::enums::scope;
  if (h5::find_column(table, f::scope) != nullptr) {
    const auto& scopes = column<std::string>(table, f::scope, kRoofPath);
    for (size_t i = 0; i < scopes.size(); ++i)
      if (std::find(std::begin(known), std::end(known), scopes[i]) == std::end(known))
        problems.push_back(std::string(kRoofPath) + ": row " + std::to_string(i) + ": " + f::scope +
                           " '" + scopes[i] + "' is not " + one_of(known));
  }
  for (size_t i = 0; i < alpha.size(); ++i) {
    if (!(alpha[i] >= 0 && beta[i] > 0))
      problems.push_back(std::string(kRoofPath) + ": row " + std::to_string(i) + ": expected " +
                         f::alpha_us + " >= 0 and " + f::beta_gbps + " > 0, found " +
                         number_text(alpha[i]) + ", " + number_text(beta[i]));
    if (!envelope) continue;
    const double floor_alpha = column<double>(table, f::floor_alpha_us, kRoofPath)[i];
    const double floor_beta = column<double>(table, f::floor_beta_gbps, kRoofPath)[i];
    if (!(floor_alpha >= 0 && floor_beta > 0))
      problems.push_back(std::string(kRoofPath) + ": row " + std::to_string(i) + ": expected " +
                         f::floor_alpha_us + " >= 0 and " + f::floor_beta_gbps + " > 0, found " +
                         number_text(floor_alpha) + ", " + number_text(floor_beta));
  }
}

namespace {

bool of_class(const h5::Column& column, schema::ValueClass value_class) {
  switch (value_class) {
  case schema::ValueClass::Int:
    return std::holds_alternative<std::vector<int64_t>>(column.values);
  case schema::ValueClass::Float:
    return std::holds_alternative<std::vector<double>>(column.values);
  case schema::ValueClass::String:
    return std::holds_alternative<std::vector<std::string>>(column.values);
  case schema::ValueClass::Any:
    return true;
  }
  return false;
}

} // namespace

std::optional<h5::Table> validate_table(hid_t file, const std::string& path,
                                        const schema::Table& spec, const Conditions& held,
                                        std::vector<std::string>& problems) {
  if (!require_object(file, path, "dataset", problems)) return std::nullopt;
  h5::Table table = h5::read_table(file, path);
  bool complete = true;
  for (const schema::Field& field : schema::fields(spec)) {
    const bool required = schema::always(field.required) || held.count(field.required) > 0;
    const h5::Column* found = h5::find_column(table, field.name);
    if (found == nullptr) {
      if (required)
        problems.push_back(
            path + ": missing field " +
            (spec.names_only ? std::string(field.name) : "'" + std::string(field.name) + "'"));
      complete = complete && !required;
    } else if (!spec.names_only && !of_class(*found, field.value_class)) {
      problems.push_back(path + ": field '" + field.name + "' has an unexpected type");
      complete = false;
    }
  }
  if (!complete) return std::nullopt;
  return table;
}

std::optional<h5::Table> validate_table(hid_t file, const schema::Table& spec,
                                        const Conditions& held,
                                        std::vector<std::string>& problems) {
  return validate_table(file, spec.path, spec, held, problems);
}

// /roofs of roofs, run and sweep files: every table with its fields, positive rates.
void validate_roofs(hid_t file, std::vector<std::string>& problems) {
  for (const schema::Table* spec :
       {&schema::tables::roofs_gemm, &schema::tables::roofs_memory, &schema::tables::roofs_launch})
    check_section(problems, [&] {
      const std::optional<h5::Table> table = validate_table(file, *spec, {}, problems);
      if (!table) return;
      for (const schema::Field& field : schema::fields(*spec)) {
        if (!field.positive) continue;
        const auto& values = column<double>(*table, field.name, spec->path);
        for (size_t i = 0; i < values.size(); ++i)
          if (!(values[i] > 0))
            problems.push_back(std::string(spec->path) + ": row " + std::to_string(i) + ": " +
                               field.name + " must be > 0, found " + number_text(values[i]));
      }
    });
  check_section(problems, [&] { validate_roof(file, problems, true); });
  // Each GPU's own figures: optional, but complete where present.
  if (h5::exists(file, schema::tables::roofs_gpus.path))
    check_section(problems,
                  [&] { validate_table(file, schema::tables::roofs_gpus, {}, problems); });
}

} // namespace ridgeline::run_file_detail
