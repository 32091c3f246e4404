// The run file's validator, the results it holds (see run_file_checks.hpp): summaries with
// their decode and pipeline figures, collectives tables and roofs.
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

namespace ridgeline::run_file_detail {
namespace {

// --decode-steps: `base`/summary/decode_context (keys per timed iteration) and decode_bins.
void validate_decode(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  const std::string group = base + "/summary";
  int64_t steps = 0;
  const std::string config = base + "/config";
  if (h5::exists(file, config)) {
    const Attrs attrs = h5::read_attrs(h5::open_group(file, config).id());
    if (const AttrValue* v = find_attr(attrs, "decode_steps"))
      if (const auto* n = std::get_if<int64_t>(v)) steps = *n;
  }
  const std::string ctx_path = group + "/decode_context";
  if (steps <= 0 && !h5::exists(file, ctx_path)) return;
  if (!require_object(file, ctx_path, "dataset", problems)) return;
  const std::vector<int64_t> ctx = h5::read_vector<int64_t>(file, ctx_path);
  const std::vector<double> times = h5::read_vector<double>(file, group + "/step_time_ns");
  if (ctx.size() != times.size())
    problems.push_back(ctx_path + ": " + std::to_string(ctx.size()) + " entries but " +
                       std::to_string(times.size()) + " timed iterations");
  for (size_t i = 0; i < ctx.size(); ++i)
    if (ctx[i] < 1) {
      problems.push_back(ctx_path + ": entry " + std::to_string(i) + " is " +
                         std::to_string(ctx[i]) + ", expected >= 1");
      break;
    }
  const std::string bins_path = group + "/decode_bins";
  if (!require_object(file, bins_path, "dataset", problems)) return;
  const h5::Table table = h5::read_table(file, bins_path);
  const auto& first = column<int64_t>(table, "context_first", bins_path);
  const auto& last = column<int64_t>(table, "context_last", bins_path);
  const auto& tokens = column<int64_t>(table, "tokens", bins_path);
  const auto& p50 = column<double>(table, "p50_ns", bins_path);
  const auto& p95 = column<double>(table, "p95_ns", bins_path);
  const auto& p99 = column<double>(table, "p99_ns", bins_path);
  column<double>(table, "mean_ns", bins_path);
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

// The summary's schedule as schedule_name() writes it: gpipe, 1f1b, zb-h1 or interleaved:V
// (V >= 2, decimal, no leading zero).
bool is_schedule_name(const std::string& name) {
  if (name == "gpipe" || name == "1f1b" || name == "zb-h1") return true;
  const std::string prefix = "interleaved:";
  if (name.rfind(prefix, 0) != 0) return false;
  const std::string v = name.substr(prefix.size());
  if (v.empty() || v.size() > 9 || v[0] == '0' ||
      !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::stol(v) >= 2;
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
  auto integer = [&](const char* key, int64_t fallback) {
    const AttrValue* v = find_attr(config, key);
    const auto* i = v ? std::get_if<int64_t>(v) : nullptr;
    return i ? *i : fallback;
  };
  const std::string phase = text("phase");
  const bool train = phase == "train";
  if (!train && text("schedule").empty()) return;

  const std::string group = base + "/summary";
  const Attrs attrs = h5::read_attrs(h5::open_group(file, group).id());
  const AttrValue* pp_value = find_attr(config, "pp");
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
  std::vector<std::string> keys = {"schedule", "microbatches", "recompute", "bubble_theory",
                                   "check_compares"};
  const char* const stage_fields[] = {"bubble", "p2p_exposed_ns", "dp_exposed_ns",
                                      "peak_activation_bytes"};
  for (int64_t p = 0; p < *pp; ++p)
    for (const char* field : stage_fields)
      keys.push_back("stage" + std::to_string(p) + "." + field);
  // Train with a pipeline: the measured action times and the simulated bubble.
  const bool timed_actions = train && *pp > 1;
  const AttrValue* schedule_value = find_attr(attrs, "schedule");
  const bool split = schedule_value && std::holds_alternative<std::string>(*schedule_value) &&
                     std::get<std::string>(*schedule_value) == "zb-h1";
  std::vector<std::string> action_keys;
  if (timed_actions) action_keys = {"action_forward_ns", "action_backward_ns"};
  if (timed_actions && split)
    action_keys.insert(action_keys.end(),
                       {"action_backward_input_ns", "action_backward_weight_ns"});
  keys.insert(keys.end(), action_keys.begin(), action_keys.end());
  if (timed_actions) keys.emplace_back("bubble_simulated");
  require_attrs(attrs, group, keys, problems);

  auto string_attr = [&](const char* key) -> std::optional<std::string> {
    const AttrValue* v = find_attr(attrs, key);
    if (v == nullptr) return std::nullopt;
    if (const auto* s = std::get_if<std::string>(v)) return *s;
    problems.push_back(group + ": attribute '" + key + "' is not a string");
    return std::nullopt;
  };
  if (const auto schedule = string_attr("schedule"); schedule && !is_schedule_name(*schedule))
    problems.push_back(group + ": schedule is '" + *schedule +
                       "', expected gpipe, 1f1b, interleaved:V (V >= 2) or zb-h1");
  if (const auto recompute = string_attr("recompute");
      recompute && *recompute != "none" && *recompute != "full")
    problems.push_back(group + ": recompute is '" + *recompute + "', expected none or full");
  if (const auto compares = string_attr("check_compares")) {
    const std::string expected = train ? "gradients" : "outputs";
    if (*compares != "gradients" && *compares != "outputs")
      problems.push_back(group + ": check_compares is '" + *compares +
                         "', expected gradients or outputs");
    else if (*compares != expected)
      problems.push_back(group + ": check_compares is '" + *compares + "' but " + config_path +
                         " phase is " + phase + " (expected " + expected + ")");
  }
  if (const AttrValue* v = find_attr(attrs, "microbatches")) {
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
  auto fraction = [&](const std::string& key) {
    if (const auto x = number(key); x && !(*x >= 0 && *x <= 1))
      problems.push_back(group + ": " + key + " must be in [0, 1], found " + number_text(*x));
  };
  auto non_negative = [&](const std::string& key) {
    if (const auto x = number(key); x && !(*x >= 0))
      problems.push_back(group + ": " + key + " must be >= 0, found " + number_text(*x));
  };
  fraction("bubble_theory");
  fraction("bubble_simulated");
  for (const std::string& key : action_keys)
    if (const auto x = number(key); x && !(*x > 0))
      problems.push_back(group + ": " + key + " must be > 0, found " + number_text(*x));
  for (int64_t p = 0; p < *pp; ++p) {
    const std::string stage = "stage" + std::to_string(p) + ".";
    fraction(stage + "bubble");
    for (const char* field : {"p2p_exposed_ns", "dp_exposed_ns", "peak_activation_bytes"})
      non_negative(stage + field);
  }

  const std::string ops_path = base + "/ops";
  if (!h5::exists(file, ops_path)) return;
  const h5::Table table = h5::read_table(file, ops_path);
  const auto& names = column<std::string>(table, "name", ops_path);
  const std::set<std::string> present(names.begin(), names.end());
  std::vector<std::string> required = {op::pp_exchange, op::pp_flush};
  if (train) {
    for (const char* name :
         {op::fc2_dgrad, op::fc2_wgrad, op::act_bwd, op::fc1_dgrad, op::fc1_wgrad, op::norm2_bwd,
          op::residual2_bwd, op::proj_dgrad, op::proj_wgrad, op::attention_bwd, op::qkv_dgrad,
          op::qkv_wgrad, op::norm1_bwd, op::residual1_bwd, op::grad_zero})
      required.emplace_back(name);
    if (text("rotary") == "on") required.emplace_back(op::rotary_bwd);
    if (integer("tp", 1) > 1 && integer("sequence_parallel", 0) != 0) {
      for (const char* name :
           {op::allgather_mlp_bwd, op::reducescatter_mlp_bwd, op::allgather_attn_bwd,
            op::reducescatter_attn_bwd, op::allreduce_norm_grads})
        required.emplace_back(name);
    } else if (integer("tp", 1) > 1) {
      required.emplace_back(op::allreduce_mlp_bwd);
      required.emplace_back(op::allreduce_attn_bwd);
    }
    if (integer("dp", 1) > 1)
      required.emplace_back(integer("dp_shard", 0) != 0 ? op::dp_reducescatter : op::dp_allreduce);
    const AttrValue* lr = find_attr(config, "sgd_lr");
    const auto* rate = lr ? std::get_if<double>(lr) : nullptr;
    if (rate != nullptr && *rate > 0) required.emplace_back(op::sgd_update);
  }
  for (const std::string& name : required)
    if (present.count(name) == 0)
      problems.push_back(ops_path + ": missing op '" + name + "' (" +
                         (train ? "a train run" : "a scheduled pipeline") + " records it)");
}

// One /collectives/<name> result table: the documented columns, sane rows.
void validate_result_table(hid_t file, const std::string& path,
                           std::vector<std::string>& problems) {
  const h5::Table table = h5::read_table(file, path);
  for (const char* name : kResultIntColumns)
    column<int64_t>(table, name, path);
  for (const char* name : kResultNumberColumns)
    column<double>(table, name, path);
  const auto& sizes = column<int64_t>(table, "size_bytes", path);
  const auto& wrong = column<int64_t>(table, "wrong", path);
  const auto& iters = column<int64_t>(table, "iters", path);
  const auto& minimum = column<double>(table, "time_min_ns", path);
  const auto& p50 = column<double>(table, "time_p50_ns", path);
  const auto& p95 = column<double>(table, "time_p95_ns", path);
  const auto& p99 = column<double>(table, "time_p99_ns", path);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string row = path + ": row " + std::to_string(i) + ": ";
    if (sizes[i] <= 0) problems.push_back(row + "size_bytes must be > 0");
    if (wrong[i] < 0) problems.push_back(row + "wrong must be >= 0");
    if (iters[i] <= 0) problems.push_back(row + "iters must be > 0");
    if (!(minimum[i] > 0 && minimum[i] <= p50[i] && p50[i] <= p95[i] && p95[i] <= p99[i]))
      problems.push_back(row + "expected 0 < time_min_ns <= time_p50_ns <= time_p95_ns <= " +
                         "time_p99_ns, found " + number_text(minimum[i]) + ", " +
                         number_text(p50[i]) + ", " + number_text(p95[i]) + ", " +
                         number_text(p99[i]));
  }
}

void validate_samples_table(hid_t file, const std::string& path,
                            std::vector<std::string>& problems) {
  const h5::Table table = h5::read_table(file, path);
  column<int64_t>(table, "size_index", path);
  column<int64_t>(table, "iteration", path);
  const auto& times = column<double>(table, "time_ns", path);
  for (size_t i = 0; i < times.size(); ++i)
    if (!(times[i] > 0)) {
      problems.push_back(path + ": row " + std::to_string(i) + ": time_ns must be > 0");
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
  if (!require_object(file, "/repeats", "dataset (run --repeats)", problems)) return;
  const h5::Table table = h5::read_table(file, "/repeats");
  const auto& names = column<std::string>(table, "strategy", "/repeats");
  const auto& p50 = column<double>(table, "step_p50_ns", "/repeats");
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
    const std::string path = group + "/step_time_ns";
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
    const std::string path = group + "/warmup_step_time_ns";
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
    std::vector<std::string> keys = {"count", "warmup_to_steady"};
    for (const StepField& field : kStepFields)
      keys.emplace_back(field.name);
    require_attrs(attrs, group, keys, problems);
    validate_checksum(attrs, group, problems);
    if (const AttrValue* a = find_attr(attrs, "attention")) {
      const std::string* name = std::get_if<std::string>(a);
      if (name == nullptr || (*name != "fused" && *name != "naive" && *name != "cudnn"))
        problems.push_back(group + ": attention is '" + attr_to_string(*a) +
                           "', expected fused, naive or cudnn");
    }
    if (find_attr(attrs, "p50_ns") == nullptr || find_attr(attrs, "p95_ns") == nullptr ||
        find_attr(attrs, "p99_ns") == nullptr)
      return;
    const double p50 = number_attr(attrs, "p50_ns", group);
    const double p95 = number_attr(attrs, "p95_ns", group);
    const double p99 = number_attr(attrs, "p99_ns", group);
    if (!(p50 <= p95 && p95 <= p99))
      problems.push_back(group + ": expected p50_ns <= p95_ns <= p99_ns, found " +
                         number_text(p50) + ", " + number_text(p95) + ", " + number_text(p99));
  });
  check_section(problems, [&] {
    if (!require_object(file, group + "/ops", "dataset", problems)) return;
    for (const OpAggregate& a : read_aggregates(file, group + "/ops")) {
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
  check_section(problems, [&] { validate_pipeline(file, base, problems); });
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
  if (!require_object(file, kRoofPath, "dataset", problems)) return;
  const h5::Table table = h5::read_table(file, kRoofPath);
  const bool envelope =
      envelope_required || h5::find_column(table, kRoofEnvelopeColumns[0]) != nullptr;
  if (envelope)
    for (const char* name : kRoofEnvelopeColumns)
      column<double>(table, name, kRoofPath);
  for (const char* name : kRoofTextColumns)
    column<std::string>(table, name, kRoofPath);
  for (const char* name : kRoofIntColumns)
    column<int64_t>(table, name, kRoofPath);
  for (const char* name : kRoofNumberColumns)
    column<double>(table, name, kRoofPath);
  const auto& alpha = column<double>(table, "alpha_us", kRoofPath);
  const auto& beta = column<double>(table, "beta_gbps", kRoofPath);
  for (size_t i = 0; i < alpha.size(); ++i) {
    if (!(alpha[i] >= 0 && beta[i] > 0))
      problems.push_back(std::string(kRoofPath) + ": row " + std::to_string(i) +
                         ": expected alpha_us >= 0 and beta_gbps > 0, found " +
                         number_text(alpha[i]) + ", " + number_text(beta[i]));
    if (!envelope) continue;
    const double floor_alpha = column<double>(table, "floor_alpha_us", kRoofPath)[i];
    const double floor_beta = column<double>(table, "floor_beta_gbps", kRoofPath)[i];
    if (!(floor_alpha >= 0 && floor_beta > 0))
      problems.push_back(std::string(kRoofPath) + ": row " + std::to_string(i) +
                         ": expected floor_alpha_us >= 0 and floor_beta_gbps > 0, found " +
                         number_text(floor_alpha) + ", " + number_text(floor_beta));
  }
}

// A table with the given fields and types (each a problem when missing or mistyped).
void validate_fields(hid_t file, const RoofTable& spec, std::vector<std::string>& problems) {
  if (!require_object(file, spec.path, "dataset", problems)) return;
  const h5::Table table = h5::read_table(file, spec.path);
  for (const char* name : spec.text)
    check_section(problems, [&] { column<std::string>(table, name, spec.path); });
  for (const char* name : spec.ints)
    check_section(problems, [&] { column<int64_t>(table, name, spec.path); });
  for (const char* name : spec.numbers)
    check_section(problems, [&] { column<double>(table, name, spec.path); });
}

// /roofs of roofs, run and sweep files: every table with its fields, positive rates.
void validate_roofs(hid_t file, std::vector<std::string>& problems) {
  for (const RoofTable& spec : kRoofTables)
    check_section(problems, [&] {
      validate_fields(file, spec, problems);
      if (!h5::exists(file, spec.path)) return;
      const h5::Table table = h5::read_table(file, spec.path);
      const char* rate = spec.numbers.size() > 2 ? spec.numbers[2] : spec.numbers[0];
      const auto& values = column<double>(table, rate, spec.path);
      for (size_t i = 0; i < values.size(); ++i)
        if (!(values[i] > 0))
          problems.push_back(std::string(spec.path) + ": row " + std::to_string(i) + ": " + rate +
                             " must be > 0, found " + number_text(values[i]));
    });
  check_section(problems, [&] { validate_roof(file, problems, true); });
}

} // namespace ridgeline::run_file_detail
