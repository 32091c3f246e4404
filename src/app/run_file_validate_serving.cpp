// The run file's validator, a trace run's /serving (see run_file_checks.hpp): its attributes,
// its steps and requests row by row, and what the attributes say of both tables.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "app/h5.hpp"
#include "app/run_file_checks.hpp"
#include "app/run_file_schema.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "models/serving.hpp"

namespace ridgeline::run_file_detail {
namespace {

// Whether `a` and `b` agree within `rel` of the larger or `abs`, whichever is more (NaN never).
bool close_to(double a, double b, double rel, double abs) {
  return std::fabs(a - b) <= std::max(abs, rel * std::max(std::fabs(a), std::fabs(b)));
}

// The integer attribute `key`, where present and an integer (else the generic checks said so).
std::optional<int64_t> int_if(const Attrs& attrs, const char* key) {
  const AttrValue* value = find_attr(attrs, key);
  const auto* number = value ? std::get_if<int64_t>(value) : nullptr;
  return number ? std::optional<int64_t>(*number) : std::nullopt;
}

// The number attribute `key`, where present and a number.
std::optional<double> number_if(const Attrs& attrs, const char* key) {
  const AttrValue* value = find_attr(attrs, key);
  if (value == nullptr) return std::nullopt;
  if (const auto* number = std::get_if<double>(value)) return *number;
  if (const auto* number = std::get_if<int64_t>(value)) return static_cast<double>(*number);
  return std::nullopt;
}

// Row problems of one table, the first kMaxRowProblems listed and the rest counted (finish()).
class RowProblems {
public:
  RowProblems(std::string path, std::vector<std::string>& problems)
      : m_path(std::move(path)), m_problems(problems) {}
  void add(size_t row, const std::string& what) {
    if (++m_found <= kMaxRowProblems)
      m_problems.push_back(m_path + ": row " + std::to_string(row) + ": " + what);
  }
  void finish() {
    if (m_found > kMaxRowProblems)
      m_problems.push_back(m_path + ": " + std::to_string(m_found - kMaxRowProblems) +
                           " more row problems");
  }

private:
  std::string m_path;
  std::vector<std::string>& m_problems;
  size_t m_found = 0;
};

// /serving/steps row by row: steps in order on the scheduler's clock, each lasting its measured
// time, its mix within the scheduler's limits.
void validate_serving_steps(const h5::Table& table, const std::string& path, const Attrs& attrs,
                            std::vector<std::string>& problems) {
  namespace f = sf::serving_steps;
  const auto& step = column<int64_t>(table, f::step, path);
  const auto& start = column<double>(table, f::start_s, path);
  const auto& end = column<double>(table, f::end_s, path);
  const auto& step_ns = column<double>(table, f::step_ns, path);
  const auto& prepare = column<double>(table, f::prepare_ns, path);
  const auto& prefill = column<int64_t>(table, f::prefill_tokens, path);
  const auto& decode = column<int64_t>(table, f::decode_tokens, path);
  const auto& prefill_seqs = column<int64_t>(table, f::prefill_sequences, path);
  const auto& decode_seqs = column<int64_t>(table, f::decode_sequences, path);
  const auto& context_min = column<int64_t>(table, f::context_min, path);
  const auto& context_max = column<int64_t>(table, f::context_max, path);
  const auto& context_mean = column<double>(table, f::context_mean, path);
  const std::optional<int64_t> budget = int_if(attrs, sa::serving::token_budget);
  const std::optional<int64_t> max_batch = int_if(attrs, sa::serving::max_batch);
  RowProblems rows(path, problems);
  for (size_t i = 0; i < step.size(); ++i) {
    if (step[i] != static_cast<int64_t>(i))
      rows.add(i, "step " + std::to_string(step[i]) + ", expected " + std::to_string(i));
    if (!(start[i] >= 0 && start[i] <= end[i]))
      rows.add(i, "expected 0 <= start_s <= end_s, found " + number_text(start[i]) + ", " +
                      number_text(end[i]));
    if (i + 1 < step.size() && !(end[i] <= start[i + 1]))
      rows.add(i, "end_s " + number_text(end[i]) + " is after the next step's start_s " +
                      number_text(start[i + 1]));
    if (!(step_ns[i] > 0))
      rows.add(i, "step_ns must be > 0, found " + number_text(step_ns[i]));
    else if (!close_to(end[i] - start[i], step_ns[i] * 1e-9, 1e-6, 1e-12))
      rows.add(i, "end_s - start_s is " + number_text(end[i] - start[i]) + " s but step_ns is " +
                      number_text(step_ns[i]));
    if (!(prepare[i] >= 0))
      rows.add(i, "prepare_ns must be >= 0, found " + number_text(prepare[i]));
    if (prefill[i] < 0 || decode[i] < 0 || prefill_seqs[i] < 0 || decode_seqs[i] < 0)
      rows.add(i, "prefill_tokens, decode_tokens, prefill_sequences and decode_sequences must be "
                  ">= 0");
    const int64_t tokens = prefill[i] + decode[i];
    if (budget && !(tokens >= 1 && tokens <= *budget))
      rows.add(i, "expected 1 <= prefill_tokens + decode_tokens <= token_budget " +
                      std::to_string(*budget) + ", found " + std::to_string(tokens));
    if (max_batch && prefill_seqs[i] + decode_seqs[i] > *max_batch)
      rows.add(i, "prefill_sequences + decode_sequences " +
                      std::to_string(prefill_seqs[i] + decode_seqs[i]) +
                      " is more than max_batch " + std::to_string(*max_batch));
    if (decode[i] != decode_seqs[i])
      rows.add(i, "decode_tokens " + std::to_string(decode[i]) + " but decode_sequences " +
                      std::to_string(decode_seqs[i]) + " (one token each)");
    if (prefill[i] < prefill_seqs[i])
      rows.add(i, "prefill_tokens " + std::to_string(prefill[i]) +
                      " fewer than prefill_sequences " + std::to_string(prefill_seqs[i]));
    const std::string contexts = ", found " + std::to_string(context_min[i]) + ", " +
                                 number_text(context_mean[i]) + ", " +
                                 std::to_string(context_max[i]);
    if (decode_seqs[i] == 0) {
      if (context_min[i] != 0 || context_mean[i] != 0 || context_max[i] != 0)
        rows.add(i, "context_min, context_mean and context_max must be 0 without decode "
                    "sequences" +
                        contexts);
    } else if (!(static_cast<double>(context_min[i]) <= context_mean[i] &&
                 context_mean[i] <= static_cast<double>(context_max[i]))) {
      rows.add(i, "expected context_min <= context_mean <= context_max" + contexts);
    }
  }
  rows.finish();
}

// /serving/requests row by row: requests in the trace's order, each one's times in order and
// its latencies what its times say.
void validate_serving_requests(const h5::Table& table, const std::string& path,
                               std::vector<std::string>& problems) {
  namespace f = sf::serving_requests;
  const auto& request = column<int64_t>(table, f::request, path);
  const auto& arrival = column<double>(table, f::arrival_s, path);
  const auto& prompt = column<int64_t>(table, f::prompt_tokens, path);
  const auto& output = column<int64_t>(table, f::output_tokens, path);
  const auto& first = column<double>(table, f::first_token_s, path);
  const auto& finish = column<double>(table, f::finish_s, path);
  const auto& ttft = column<double>(table, f::ttft_s, path);
  const auto& e2e = column<double>(table, f::e2e_s, path);
  const auto& tpot = column<double>(table, f::tpot_s, path);
  RowProblems rows(path, problems);
  for (size_t i = 0; i < request.size(); ++i) {
    if (request[i] != static_cast<int64_t>(i))
      rows.add(i, "request " + std::to_string(request[i]) + ", expected " + std::to_string(i));
    if (!(arrival[i] >= 0)) rows.add(i, "arrival_s must be >= 0, found " + number_text(arrival[i]));
    if (i > 0 && !(arrival[i] >= arrival[i - 1]))
      rows.add(i, "arrival_s " + number_text(arrival[i]) + " is before the previous request's " +
                      number_text(arrival[i - 1]));
    if (!(arrival[i] <= first[i] && first[i] <= finish[i]))
      rows.add(i, "expected arrival_s <= first_token_s <= finish_s, found " +
                      number_text(arrival[i]) + ", " + number_text(first[i]) + ", " +
                      number_text(finish[i]));
    if (!close_to(ttft[i], first[i] - arrival[i], 1e-9, 1e-12))
      rows.add(i, "ttft_s " + number_text(ttft[i]) + ", expected first_token_s - arrival_s = " +
                      number_text(first[i] - arrival[i]));
    if (!close_to(e2e[i], finish[i] - arrival[i], 1e-9, 1e-12))
      rows.add(i, "e2e_s " + number_text(e2e[i]) +
                      ", expected finish_s - arrival_s = " + number_text(finish[i] - arrival[i]));
    if (prompt[i] < 1)
      rows.add(i, "prompt_tokens must be >= 1, found " + std::to_string(prompt[i]));
    if (output[i] < 1) {
      rows.add(i, "output_tokens must be >= 1, found " + std::to_string(output[i]));
    } else if (output[i] == 1) {
      if (!std::isnan(tpot[i]))
        rows.add(i, "tpot_s must be NaN for one output token, found " + number_text(tpot[i]));
    } else {
      const double expected = (finish[i] - first[i]) / static_cast<double>(output[i] - 1);
      if (!close_to(tpot[i], expected, 1e-9, 1e-12))
        rows.add(i, "tpot_s " + number_text(tpot[i]) +
                        ", expected (finish_s - first_token_s) / (output_tokens - 1) = " +
                        number_text(expected));
    }
  }
  rows.finish();
}

// What /serving's attributes say of its tables: their rows, the tokens the steps ran against the
// requests' (each prompt token prefilled once; the first output token comes with the step
// finishing the prompt, every later one from a decode entry), the latency percentiles (by
// percentiles(), TPOT over the requests of more than one output token), good requests, the span
// and the rates over it.
void validate_serving_totals(const h5::Table& steps, const std::string& steps_path,
                             const h5::Table& requests, const std::string& requests_path,
                             const Attrs& attrs, const std::string& group,
                             std::vector<std::string>& problems) {
  namespace s = sf::serving_steps;
  namespace r = sf::serving_requests;
  namespace a = sa::serving;
  const auto& output = column<int64_t>(requests, r::output_tokens, requests_path);
  int64_t prefilled = 0, decoded = 0, prompts = 0, later_outputs = 0;
  for (int64_t tokens : column<int64_t>(steps, s::prefill_tokens, steps_path))
    prefilled += tokens;
  for (int64_t tokens : column<int64_t>(steps, s::decode_tokens, steps_path))
    decoded += tokens;
  for (int64_t tokens : column<int64_t>(requests, r::prompt_tokens, requests_path))
    prompts += tokens;
  for (int64_t tokens : output)
    later_outputs += tokens - 1;
  if (prefilled != prompts)
    problems.push_back(steps_path + ": the steps prefill " + std::to_string(prefilled) +
                       " tokens but the requests' prompts hold " + std::to_string(prompts));
  if (decoded != later_outputs)
    problems.push_back(steps_path + ": the steps decode " + std::to_string(decoded) +
                       " tokens but the requests' output tokens after their first are " +
                       std::to_string(later_outputs));

  const auto& ttft = column<double>(requests, r::ttft_s, requests_path);
  const auto& e2e = column<double>(requests, r::e2e_s, requests_path);
  const auto& tpot_column = column<double>(requests, r::tpot_s, requests_path);
  std::vector<double> tpot;
  for (size_t i = 0; i < output.size(); ++i)
    if (output[i] > 1) tpot.push_back(tpot_column[i]);
  const struct {
    const char* column;
    const std::vector<double>* values;
    const char* names[3];
  } metrics[] = {{r::ttft_s, &ttft, {a::ttft_p50_s, a::ttft_p95_s, a::ttft_p99_s}},
                 {r::tpot_s, &tpot, {a::tpot_p50_s, a::tpot_p95_s, a::tpot_p99_s}},
                 {r::e2e_s, &e2e, {a::e2e_p50_s, a::e2e_p95_s, a::e2e_p99_s}}};
  for (const auto& m : metrics) {
    // A value that is not a finite time was a row's problem: no percentile to compare.
    if (!std::all_of(m.values->begin(), m.values->end(), [](double x) { return std::isfinite(x); }))
      continue;
    const Percentiles p = percentiles(*m.values);
    const double expected[3] = {p.p50, p.p95, p.p99};
    for (int k = 0; k < 3; ++k) {
      const std::optional<double> found = number_if(attrs, m.names[k]);
      if (found && !close_to(*found, expected[k], 1e-9, 0))
        problems.push_back(group + ": " + m.names[k] + " is " + number_text(*found) + ", but " +
                           requests_path + " " + m.column + " gives " + number_text(expected[k]));
    }
  }

  const auto count = static_cast<int64_t>(output.size());
  const std::optional<int64_t> good = int_if(attrs, a::good);
  if (good && !(*good >= 0 && *good <= count))
    problems.push_back(group + ": expected 0 <= good <= requests, found " + std::to_string(*good) +
                       ", " + std::to_string(count));
  const std::optional<double> span = number_if(attrs, a::span_s);
  if (!span) return;
  if (count > 0) {
    const auto& arrival = column<double>(requests, r::arrival_s, requests_path);
    const auto& finish = column<double>(requests, r::finish_s, requests_path);
    const double expected = *std::max_element(finish.begin(), finish.end()) -
                            *std::min_element(arrival.begin(), arrival.end());
    if (!close_to(*span, expected, 1e-9, 1e-12))
      problems.push_back(group + ": span_s is " + number_text(*span) + ", but " + requests_path +
                         " spans " + number_text(expected) + " (first arrival to last finish)");
  }
  if (!(*span > 0)) return;
  const std::optional<double> throughput = number_if(attrs, a::throughput_per_s);
  if (throughput && !close_to(*throughput, static_cast<double>(count) / *span, 1e-9, 0))
    problems.push_back(
        group + ": throughput_per_s is " + number_text(*throughput) +
        ", expected requests / span_s = " + number_text(static_cast<double>(count) / *span));
  const std::optional<double> goodput = number_if(attrs, a::goodput_per_s);
  if (good && goodput && !close_to(*goodput, static_cast<double>(*good) / *span, 1e-9, 0))
    problems.push_back(
        group + ": goodput_per_s is " + number_text(*goodput) +
        ", expected good / span_s = " + number_text(static_cast<double>(*good) / *span));
}

// The check of a trace run's steps (/serving check, check_steps, check_max_rel_error,
// check_tolerance; /serving/steps check_rel_error): a status of its three kinds, every step
// compared unless skipped, the status the errors and the tolerance give, and the steps' errors
// (NaN where not compared) whose largest is check_max_rel_error.
void validate_serving_check(const h5::Table& steps, const std::string& steps_path,
                            const Attrs& attrs, const std::string& group,
                            std::vector<std::string>& problems) {
  namespace a = sa::serving;
  const AttrValue* value = find_attr(attrs, a::check);
  const auto* status = value ? std::get_if<std::string>(value) : nullptr;
  if (status == nullptr) return;
  const bool compared = *status == "passed" || *status == "failed";
  if (!compared && status->rfind("skipped: ", 0) != 0) {
    problems.push_back(group + ": check is \"" + *status +
                       "\", expected passed, failed or skipped: <why>");
    return;
  }
  const std::optional<int64_t> checked = int_if(attrs, a::check_steps);
  const std::optional<int64_t> run = int_if(attrs, a::steps);
  const std::optional<double> worst = number_if(attrs, a::check_max_rel_error);
  const std::optional<double> tolerance = number_if(attrs, a::check_tolerance);
  if (checked && run && *checked != (compared ? *run : 0))
    problems.push_back(group + ": check_steps is " + std::to_string(*checked) + ", expected " +
                       (compared ? "steps " + std::to_string(*run) : std::string("0 (skipped)")));
  if (compared && worst && tolerance && (*worst <= *tolerance) != (*status == "passed"))
    problems.push_back(group + ": check is " + *status + " but check_max_rel_error " +
                       number_text(*worst) + " against check_tolerance " + number_text(*tolerance));
  if (h5::find_column(steps, sf::serving_steps::check_rel_error) == nullptr) return;
  const auto& errors = column<double>(steps, sf::serving_steps::check_rel_error, steps_path);
  double largest = 0;
  size_t missing = 0;
  for (double e : errors) {
    if (std::isnan(e))
      ++missing;
    else
      largest = std::max(largest, e);
  }
  if (!compared && missing != errors.size())
    problems.push_back(steps_path + ": check_rel_error holds " +
                       std::to_string(errors.size() - missing) +
                       " compared step(s) but /serving check is skipped");
  if (compared && missing > 0)
    problems.push_back(steps_path + ": check_rel_error is NaN in " + std::to_string(missing) +
                       " step(s) but /serving check compared every step");
  // An infinite error (an output that is not finite) only matches an infinite largest one.
  if (compared && missing == 0 && !errors.empty() && worst &&
      (std::isfinite(largest) != std::isfinite(*worst) ||
       (std::isfinite(*worst) && !close_to(largest, *worst, 1e-9, 0))))
    problems.push_back(steps_path + ": the largest check_rel_error is " + number_text(largest) +
                       " but " + group + " check_max_rel_error is " + number_text(*worst));
}

} // namespace

// A trace run (`base`/config trace or trace_gen not empty: the condition "serving"): `base`/serving
// with its attributes and both tables, checked against each other. A /serving of another run is
// checked as far as it goes (its tables where present).
void validate_serving(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  bool trace = false;
  const std::string config = base + "/config";
  if (h5::exists(file, config)) {
    const Attrs attrs = h5::read_attrs(h5::open_group(file, config).id());
    for (const char* key : {sa::config::trace, sa::config::trace_gen}) {
      const AttrValue* v = find_attr(attrs, key);
      const auto* text = v ? std::get_if<std::string>(v) : nullptr;
      trace = trace || (text != nullptr && !text->empty());
    }
  }
  const std::string group = base + schema::attributes::serving.path;
  if (!trace && !h5::exists(file, group)) return;
  if (!require_object(file, group, "group (a trace run)", problems)) return;
  const Conditions held = trace ? Conditions{"serving"} : Conditions{};
  const Attrs attrs = h5::read_attrs(h5::open_group(file, group).id());
  require_attrs(attrs, group, required_attributes(schema::attributes::serving, held), problems);
  check_attribute_types(attrs, group, schema::attributes::serving, problems);
  const std::string steps_path = base + schema::tables::serving_steps.path;
  const std::string requests_path = base + schema::tables::serving_requests.path;
  std::optional<h5::Table> steps, requests;
  if (trace || h5::exists(file, steps_path))
    check_section(problems, [&] {
      steps = validate_table(file, steps_path, schema::tables::serving_steps, held, problems);
    });
  if (trace || h5::exists(file, requests_path))
    check_section(problems, [&] {
      requests =
          validate_table(file, requests_path, schema::tables::serving_requests, held, problems);
    });
  // Rows as the attributes count them, at least one of each.
  auto check_rows = [&](const std::optional<h5::Table>& table, const std::string& path,
                        const char* key) {
    if (!table) return;
    const size_t rows = row_count(*table);
    const std::optional<int64_t> expected = int_if(attrs, key);
    if (expected && static_cast<int64_t>(rows) != *expected)
      problems.push_back(path + ": " + std::to_string(rows) + " rows but " + group + " " + key +
                         " is " + std::to_string(*expected));
    if (rows == 0) problems.push_back(path + ": empty");
  };
  check_rows(steps, steps_path, sa::serving::steps);
  check_rows(requests, requests_path, sa::serving::requests);
  if (steps)
    check_section(problems, [&] { validate_serving_steps(*steps, steps_path, attrs, problems); });
  if (requests)
    check_section(problems, [&] { validate_serving_requests(*requests, requests_path, problems); });
  if (steps && requests)
    check_section(problems, [&] {
      validate_serving_totals(*steps, steps_path, *requests, requests_path, attrs, group, problems);
    });
  if (steps)
    check_section(problems,
                  [&] { validate_serving_check(*steps, steps_path, attrs, group, problems); });
}

} // namespace ridgeline::run_file_detail
