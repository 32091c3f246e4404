// `ridgeline sweep` and the crossover analysis (see sweep.hpp).
#include "app/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <tuple>

#include "app/attribution.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config_file.hpp"
#include "app/file_layout.hpp"
#include "app/fingerprint.hpp"
#include "app/job.hpp"
#include "app/point.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "collectives/transport.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/ranges.hpp"
#include "core/stop.hpp"
#include "models/work_model.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {

namespace {

const char* const kNumericAxes[] = {"tp", "batch", "seq", "context", "hidden"};
bool numeric_axis(const std::string& axis) {
  return std::find(std::begin(kNumericAxes), std::end(kNumericAxes), axis) !=
         std::end(kNumericAxes);
}
bool less_value(const std::string& axis, const std::string& a, const std::string& b,
                const AxisOrder& order) {
  if (axis == kLinkBandwidthAxis || axis == kLinkLatencyAxis) return std::stod(a) < std::stod(b);
  if (numeric_axis(axis)) return std::stoll(a) < std::stoll(b);
  const auto ranks = order.find(axis);
  if (ranks == order.end()) return a < b;
  // Ranked values first, fastest link first (along the axis the link gets slower), then the
  // unranked ones; text order between equals.
  auto key = [&](const std::string& v) {
    const auto it = ranks->second.find(v);
    return it == ranks->second.end() ? std::make_tuple(1, 0.0, v)
                                     : std::make_tuple(0, -it->second, v);
  };
  return key(a) < key(b);
}
int class_index(const std::string& ceiling) {
  for (int i = 0; i < kCeilingClasses; ++i)
    if (ceiling == ceiling_name(static_cast<Ceiling>(i))) return i;
  return -1;
}
// "a=1 b=2" over `axes` except `skip`.
std::string describe(const SweepRow& r, const std::vector<std::string>& axes,
                     const std::string& skip) {
  std::string text;
  for (const std::string& a : axes)
    if (a != skip) text += (text.empty() ? "" : " ") + a + "=" + r.axis.at(a);
  return text;
}

} // namespace

bool sweep_numeric_axis(const std::string& axis) {
  return numeric_axis(axis);
}

namespace {

std::string interval_text(double median_ns, double lo_ns, double hi_ns) {
  char text[96];
  std::snprintf(text, sizeof(text), "%.2f us [%.2f, %.2f]", median_ns / 1e3, lo_ns / 1e3,
                hi_ns / 1e3);
  return text;
}

Interval class_interval(const SweepRow& r, int c) {
  return {r.class_ns[c], r.class_lo_ns[c], r.class_hi_ns[c]};
}

} // namespace

std::vector<Crossover> find_crossovers(const std::vector<SweepRow>& rows,
                                       const std::vector<std::string>& axes,
                                       const AxisOrder& order) {
  std::vector<Crossover> out;
  for (const std::string& axis : axes) {
    std::map<std::string, std::vector<const SweepRow*>> groups;
    for (const SweepRow& r : rows)
      if (r.status == "ok") groups[describe(r, axes, axis)].push_back(&r);
    for (auto& [fixed, line] : groups) {
      std::stable_sort(line.begin(), line.end(), [&](const SweepRow* a, const SweepRow* b) {
        return less_value(axis, a->axis.at(axis), b->axis.at(axis), order);
      });
      // One crossover from `before` (class `from` its ceiling) to `at` (class `to`).
      auto cross = [&](const SweepRow& before, const SweepRow& at, int from, int to) {
        Crossover c;
        c.axis = axis;
        c.fixed = fixed;
        c.kind = at.ceiling;
        c.before_value = before.axis.at(axis);
        c.at_value = at.axis.at(axis);
        c.before_point = before.point;
        c.at_point = at.point;
        const Interval rising = class_interval(at, to), falling = class_interval(at, from);
        c.rising_ns = rising.median, c.rising_lo_ns = rising.lo, c.rising_hi_ns = rising.hi;
        c.falling_ns = falling.median, c.falling_lo_ns = falling.lo, c.falling_hi_ns = falling.hi;
        // Both sides must hold: the old class ahead before, the new one ahead at the point.
        const bool held = apart(rising, falling) &&
                          apart(class_interval(before, from), class_interval(before, to));
        c.status = before.repeats < 2 || at.repeats < 2 ? "unrepeated"
                   : held                               ? "found"
                                                        : "within noise";
        const char* rising_name = ceiling_name(static_cast<Ceiling>(to));
        const char* falling_name = ceiling_name(static_cast<Ceiling>(from));
        c.note =
            std::string(rising_name) + " " + interval_text(rising.median, rising.lo, rising.hi) +
            " vs " + falling_name + " " + interval_text(falling.median, falling.lo, falling.hi) +
            " at " + axis + "=" + c.at_value + "; " + falling_name + " " +
            interval_text(before.class_ns[from], before.class_lo_ns[from],
                          before.class_hi_ns[from]) +
            " vs " + rising_name + " " +
            interval_text(before.class_ns[to], before.class_lo_ns[to], before.class_hi_ns[to]) +
            " at " + axis + "=" + c.before_value;
        return c;
      };
      if (axis == kLinkBandwidthAxis) {
        // What-if links (`model`): the lowest bandwidth at which the interconnect is no longer
        // the ceiling, one row per line.
        const int ic = static_cast<int>(Ceiling::interconnect);
        size_t i = 0;
        while (i < line.size() && line[i]->ceiling == "interconnect")
          ++i;
        if (i > 0 && i < line.size() && class_index(line[i]->ceiling) >= 0) {
          out.push_back(cross(*line[i - 1], *line[i], ic, class_index(line[i]->ceiling)));
          continue;
        }
        Crossover c;
        c.axis = axis, c.fixed = fixed, c.predicted = true, c.status = "predicted";
        c.kind = line.front()->ceiling;
        c.note = i == 0
                     ? "the interconnect is not the ceiling at any bandwidth of the grid (from " +
                           line.front()->axis.at(axis) + " GB/s)"
                     : "the interconnect is the ceiling at every bandwidth of the grid (up to " +
                           line.back()->axis.at(axis) + " GB/s)";
        out.push_back(c);
        continue;
      }
      bool interconnect_found = false;
      for (size_t i = 1; i < line.size(); ++i) {
        const SweepRow& before = *line[i - 1];
        const SweepRow& at = *line[i];
        if (before.ceiling == at.ceiling) continue;
        const int from = class_index(before.ceiling), to = class_index(at.ceiling);
        if (from < 0 || to < 0 || to == static_cast<int>(Ceiling::launch)) continue;
        // The interconnect becoming the ceiling, or HBM and compute trading places.
        const bool interconnect = to == static_cast<int>(Ceiling::interconnect);
        const bool memory_compute = (from == 0 && to == 1) || (from == 1 && to == 0);
        if (!interconnect && !memory_compute) continue;
        if (interconnect && interconnect_found) continue;
        Crossover c = cross(before, at, from, to);
        interconnect_found = interconnect_found || (interconnect && c.status != "within noise");
        out.push_back(c);
      }
    }
  }
  return out;
}

double interconnect_gbps(const Roofs& roofs) {
  const InterconnectRoof* widest = nullptr;
  for (const InterconnectRoof& ic : roofs.interconnect)
    if (ic.collective == "all_reduce" && (widest == nullptr || ic.group_size > widest->group_size))
      widest = &ic;
  return widest ? widest->beta_gbps : 0;
}

void aggregate_repeats(SweepRow& row, const std::vector<SweepRepeat>& repeats,
                       const std::vector<std::vector<double>>& step_samples) {
  std::vector<const SweepRepeat*> mine;
  for (const SweepRepeat& r : repeats)
    if (r.point == row.point && r.status == "ok") mine.push_back(&r);
  row.repeats = static_cast<int64_t>(mine.size());
  if (mine.empty()) return;
  auto over_repeats = [&](auto field) {
    std::vector<std::vector<double>> values;
    for (const SweepRepeat* r : mine)
      values.push_back({field(*r)});
    return repeated_median(values);
  };
  const Interval step = repeated_median(step_samples);
  row.step_p50_ns = step.median, row.step_lo_ns = step.lo, row.step_hi_ns = step.hi;
  row.step_p99_ns = over_repeats([](const SweepRepeat& r) { return r.step_p99_ns; }).median;
  row.exposed_interconnect_ns =
      over_repeats([](const SweepRepeat& r) { return r.exposed_interconnect_ns; }).median;
  double largest = 0;
  for (int c = 0; c < kCeilingClasses; ++c) {
    const Interval t = over_repeats([c](const SweepRepeat& r) { return r.class_ns[c]; });
    row.class_ns[c] = t.median, row.class_lo_ns[c] = t.lo, row.class_hi_ns[c] = t.hi;
    if (t.median > largest) largest = t.median, row.ceiling = ceiling_name(static_cast<Ceiling>(c));
  }
  // Without roofs nothing is attributed: the repeats' own word ("none").
  if (largest == 0) row.ceiling = mine.front()->ceiling;
}

Table sweep_points_table(const std::vector<SweepRow>& rows) {
  std::vector<int64_t> point;
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, std::vector<std::string>> texts;
  std::vector<std::string> status, label, ceiling, check;
  std::vector<double> p50, p99, cls[4], exposed, flops, hbm, comm, setup, measure, step_lo, step_hi,
      cls_lo[4], cls_hi[4];
  std::vector<int64_t> repeats;
  for (const SweepRow& r : rows) {
    point.push_back(r.point);
    repeats.push_back(r.repeats);
    step_lo.push_back(r.step_lo_ns);
    step_hi.push_back(r.step_hi_ns);
    for (int i = 0; i < 4; ++i)
      cls_lo[i].push_back(r.class_lo_ns[i]), cls_hi[i].push_back(r.class_hi_ns[i]);
    status.push_back(r.status);
    label.push_back(r.label);
    for (const char* a : kSweepAxes) {
      if (numeric_axis(a)) {
        const std::string& v = r.axis.at(a);
        ints[a].push_back(v.empty() ? 0 : std::stoll(v));
      } else {
        texts[a].push_back(r.axis.at(a));
      }
    }
    p50.push_back(r.step_p50_ns);
    p99.push_back(r.step_p99_ns);
    for (int i = 0; i < 4; ++i)
      cls[i].push_back(r.class_ns[i]);
    exposed.push_back(r.exposed_interconnect_ns);
    ceiling.push_back(r.ceiling);
    flops.push_back(r.step_flops);
    hbm.push_back(r.step_hbm_bytes);
    comm.push_back(r.step_comm_bytes);
    check.push_back(r.check);
    setup.push_back(r.setup_s);
    measure.push_back(r.measure_s);
  }
  Table t = {{"point", point}, {"status", status}, {"label", label}};
  for (const char* a : kSweepAxes) {
    if (numeric_axis(a))
      t.push_back({a, ints[a]});
    else
      t.push_back({a, texts[a]});
  }
  const Table rest = {{"step_p50_ns", p50},
                      {"step_p99_ns", p99},
                      {"compute_ns", cls[0]},
                      {"hbm_ns", cls[1]},
                      {"interconnect_ns", cls[2]},
                      {"launch_ns", cls[3]},
                      {"exposed_interconnect_ns", exposed},
                      {"ceiling", ceiling},
                      {"step_flops", flops},
                      {"step_hbm_bytes", hbm},
                      {"step_comm_bytes", comm},
                      {"check", check},
                      {"setup_s", setup},
                      {"measure_s", measure},
                      {"repeats", repeats},
                      {"step_p50_lo_ns", step_lo},
                      {"step_p50_hi_ns", step_hi}};
  t.insert(t.end(), rest.begin(), rest.end());
  const char* names[] = {"compute", "hbm", "interconnect", "launch"};
  for (int i = 0; i < 4; ++i) {
    t.push_back({std::string(names[i]) + "_lo_ns", cls_lo[i]});
    t.push_back({std::string(names[i]) + "_hi_ns", cls_hi[i]});
  }
  return t;
}

Table sweep_repeats_table(const std::vector<SweepRepeat>& repeats) {
  std::vector<int64_t> point, repeat;
  std::vector<std::string> status, ceiling;
  std::vector<double> p50, p99, cls[4], exposed;
  for (const SweepRepeat& r : repeats) {
    point.push_back(r.point), repeat.push_back(r.repeat), status.push_back(r.status);
    p50.push_back(r.step_p50_ns), p99.push_back(r.step_p99_ns);
    for (int i = 0; i < 4; ++i)
      cls[i].push_back(r.class_ns[i]);
    exposed.push_back(r.exposed_interconnect_ns), ceiling.push_back(r.ceiling);
  }
  return {{"point", point},      {"repeat", repeat},
          {"status", status},    {"step_p50_ns", p50},
          {"step_p99_ns", p99},  {"compute_ns", cls[0]},
          {"hbm_ns", cls[1]},    {"interconnect_ns", cls[2]},
          {"launch_ns", cls[3]}, {"exposed_interconnect_ns", exposed},
          {"ceiling", ceiling}};
}

Table crossovers_table(const std::vector<Crossover>& cs) {
  std::vector<std::string> axis, fixed, kind, before, at, note, status;
  std::vector<int64_t> predicted, before_point, at_point;
  std::vector<double> rising, falling, rising_lo, rising_hi, falling_lo, falling_hi;
  for (const Crossover& c : cs) {
    status.push_back(c.status);
    rising_lo.push_back(c.rising_lo_ns), rising_hi.push_back(c.rising_hi_ns);
    falling_lo.push_back(c.falling_lo_ns), falling_hi.push_back(c.falling_hi_ns);
    axis.push_back(c.axis), fixed.push_back(c.fixed), kind.push_back(c.kind),
        before.push_back(c.before_value);
    at.push_back(c.at_value), note.push_back(c.note), predicted.push_back(c.predicted ? 1 : 0);
    before_point.push_back(c.before_point), at_point.push_back(c.at_point);
    rising.push_back(c.rising_ns), falling.push_back(c.falling_ns);
  }
  return {{"axis", axis},
          {"fixed", fixed},
          {"kind", kind},
          {"predicted", predicted},
          {"before_value", before},
          {"at_value", at},
          {"before_point", before_point},
          {"at_point", at_point},
          {"rising_ns", rising},
          {"falling_ns", falling},
          {"note", note},
          {"status", status},
          {"rising_lo_ns", rising_lo},
          {"rising_hi_ns", rising_hi},
          {"falling_lo_ns", falling_lo},
          {"falling_hi_ns", falling_hi}};
}

std::vector<SweepRow> sweep_rows_from(const Table& t) {
  auto col = [&](const char* name) -> const Column& {
    for (const Column& c : t)
      if (c.name == name) return c;
    throw Error(std::string("/sweep/points: missing field '") + name + "'");
  };
  auto has = [&](const char* name) {
    return std::any_of(t.begin(), t.end(), [&](const Column& c) { return c.name == name; });
  };
  auto ints = [&](const char* n) { return std::get<std::vector<int64_t>>(col(n).values); };
  auto nums = [&](const char* n) { return std::get<std::vector<double>>(col(n).values); };
  auto texts = [&](const char* n) { return std::get<std::vector<std::string>>(col(n).values); };
  const auto point = ints("point");
  std::vector<SweepRow> rows(point.size());
  const auto status = texts("status"), label = texts("label"), ceiling = texts("ceiling"),
             check = texts("check");
  const auto p50 = nums("step_p50_ns"), p99 = nums("step_p99_ns"),
             exposed = nums("exposed_interconnect_ns");
  const std::vector<double> cls[4] = {nums("compute_ns"), nums("hbm_ns"), nums("interconnect_ns"),
                                      nums("launch_ns")};
  const auto flops = nums("step_flops"), hbm = nums("step_hbm_bytes"),
             comm = nums("step_comm_bytes");
  for (size_t i = 0; i < rows.size(); ++i) {
    SweepRow& r = rows[i];
    r.point = point[i], r.status = status[i], r.label = label[i], r.ceiling = ceiling[i],
    r.check = check[i];
    r.step_p50_ns = p50[i], r.step_p99_ns = p99[i], r.exposed_interconnect_ns = exposed[i];
    for (int c = 0; c < 4; ++c)
      r.class_ns[c] = cls[c][i];
    r.step_flops = flops[i], r.step_hbm_bytes = hbm[i], r.step_comm_bytes = comm[i];
    for (const char* a : kSweepAxes)
      r.axis[a] = numeric_axis(a) ? std::to_string(ints(a)[i]) : texts(a)[i];
    // Files of one repeat per point (before --repeats) carry no intervals.
    r.repeats = has("repeats") ? ints("repeats")[i] : 1;
    r.step_lo_ns = has("step_p50_lo_ns") ? nums("step_p50_lo_ns")[i] : r.step_p50_ns;
    r.step_hi_ns = has("step_p50_hi_ns") ? nums("step_p50_hi_ns")[i] : r.step_p50_ns;
    const char* names[] = {"compute", "hbm", "interconnect", "launch"};
    for (int c = 0; c < 4; ++c) {
      const std::string lo = std::string(names[c]) + "_lo_ns",
                        hi = std::string(names[c]) + "_hi_ns";
      r.class_lo_ns[c] = has(lo.c_str()) ? nums(lo.c_str())[i] : r.class_ns[c];
      r.class_hi_ns[c] = has(hi.c_str()) ? nums(hi.c_str())[i] : r.class_ns[c];
    }
  }
  return rows;
}

void print_sweep(std::ostream& out, const std::vector<SweepRow>& rows,
                 const std::vector<std::string>& axes, const std::vector<Crossover>& crossovers) {
  char line[2048];
  std::snprintf(line, sizeof(line), "%5s  %-34s %10s %21s %2s %10s %10s %10s %10s %10s  %-12s %s\n",
                "point", "label", "p50 ms", "95 % interval", "R", "p99 ms", "compute", "hbm",
                "interconn", "launch", "ceiling", "check / status");
  out << "\n" << line;
  bool measured = false, predicted = false;
  for (const SweepRow& r : rows) {
    if (r.status != "ok") {
      std::snprintf(line, sizeof(line), "%5lld  %-34s %s\n", static_cast<long long>(r.point),
                    r.label.c_str(), r.status.c_str());
      out << line;
      continue;
    }
    // A prediction is one number: no repeats, no interval, no tail.
    const bool model = r.check == "predicted";
    (model ? predicted : measured) = true;
    char interval[64] = "-", repeats[16] = "-", p99[32] = "-";
    if (!model) {
      std::snprintf(interval, sizeof(interval), "[%.4f, %.4f]", r.step_lo_ns / 1e6,
                    r.step_hi_ns / 1e6);
      std::snprintf(repeats, sizeof(repeats), "%lld", static_cast<long long>(r.repeats));
      std::snprintf(p99, sizeof(p99), "%.4f", r.step_p99_ns / 1e6);
    }
    std::snprintf(line, sizeof(line),
                  "%5lld  %-34s %10.4f %21s %2s %10s %10.4f %10.4f %10.4f %10.4f  %-12s %s\n",
                  static_cast<long long>(r.point), r.label.c_str(), r.step_p50_ns / 1e6, interval,
                  repeats, p99, r.class_ns[0] / 1e6, r.class_ns[1] / 1e6, r.class_ns[2] / 1e6,
                  r.class_ns[3] / 1e6, r.ceiling.c_str(),
                  r.check.substr(0, r.check.find(':')).c_str());
    out << line;
  }
  if (measured || !predicted)
    out << "p50: the median over R repeats of each repeat's p50 step, with its 95 % interval; "
           "compute .. launch: the median step's time by ceiling (ms): compute-lane ops by their "
           "own ceiling, the exposed interconnect, and the gaps between ops (launch)\n";
  if (predicted)
    out << "predicted rows: the analytic model's step (p50 column) and its time by ceiling (ms), "
           "a point estimate: no repeats, interval or p99\n";
  if (axes.empty()) return;
  out << "\ncrossovers\n";
  for (const std::string& axis : axes) {
    bool any = false;
    for (const Crossover& c : crossovers) {
      if (c.axis != axis) continue;
      any = true;
      const std::string where = axis + "=" + c.before_value + " and " + axis + "=" + c.at_value;
      if (c.predicted && c.at_value.empty())
        std::snprintf(line, sizeof(line), "  %-8s [%s] no crossover in the grid; %s\n",
                      axis.c_str(), c.fixed.c_str(), c.note.c_str());
      else if (c.predicted)
        std::snprintf(line, sizeof(line),
                      "  %-8s [%s] no crossover in the grid; predicted: %s becomes the ceiling at "
                      "%s=%s (%s)\n",
                      axis.c_str(), c.fixed.c_str(), c.kind.c_str(), axis.c_str(),
                      c.at_value.c_str(), c.note.c_str());
      else if (c.status == "within noise")
        std::snprintf(line, sizeof(line),
                      "  %-8s [%s] within noise: the ceiling moves to %s between %s, but the "
                      "intervals overlap: %s\n",
                      axis.c_str(), c.fixed.c_str(), c.kind.c_str(), where.c_str(), c.note.c_str());
      else
        std::snprintf(line, sizeof(line), "  %-8s [%s] %s becomes the ceiling between %s%s: %s\n",
                      axis.c_str(), c.fixed.c_str(), c.kind.c_str(), where.c_str(),
                      c.status == "unrepeated"  ? " (measured once, no interval: --repeats 3)"
                      : c.status == "predicted" ? " (predicted: a point estimate)"
                                                : "",
                      c.note.c_str());
      out << line;
    }
    if (!any) out << "  " << axis << ": no crossover in the grid\n";
  }
}

void predict_classes(const RunConfig& cfg, const Roofs& roofs, const std::string& transport,
                     double (&class_ns)[4], std::string& note) {
  for (double& t : class_ns)
    t = 0;
  Roofs r = roofs;
  // A group size never measured (more ranks than the job had) borrows the largest measured.
  std::set<std::string> borrowed;
  for (const InterconnectRoof& ic : roofs.interconnect)
    if (roofs.interconnect_for(ic.collective, cfg.tp, transport) == nullptr) {
      const InterconnectRoof* best = nullptr;
      for (const InterconnectRoof& c : roofs.interconnect)
        if (c.collective == ic.collective && (best == nullptr || c.group_size > best->group_size))
          best = &c;
      InterconnectRoof copy = *best;
      copy.group_size = cfg.tp;
      r.interconnect.push_back(copy);
      borrowed.insert("the interconnect roof of " + std::to_string(best->group_size) + " ranks");
    }
  if (!borrowed.empty()) note = "assumes " + *borrowed.begin() + " at tp=" + std::to_string(cfg.tp);
  const DType dtype = parse_dtype(cfg.dtype);
  const AttentionImpl attn = parse_attention(attention_list(cfg).front());
  const double instances = static_cast<double>(cfg.layers / cfg.pp * cfg.microbatches);
  for (const OpSpec& o : layer_ops(model_spec(cfg), layer_shape(cfg), attn)) {
    const OpBounds b = op_bounds(op_work(o, o.cost, cfg.tp, dtype), r, transport);
    if (b.ceiling != Ceiling::none) class_ns[static_cast<int>(b.ceiling)] += b.bound_ns * instances;
  }
}

// One item of an axis list: an integer of the axis's range, or a value of its kind.
std::string sweep_axis_item(const std::string& axis, const std::string& item,
                            std::string& canonical) {
  if (numeric_axis(axis)) {
    std::string text = item;
    const std::string problem = integer_in(
        axis == "context" ? 0 : 1,
        axis == "tp" ? std::numeric_limits<int>::max() : std::numeric_limits<int64_t>::max())(text);
    if (problem.empty()) canonical = std::to_string(std::stoll(item));
    return problem;
  }
  try {
    if (axis == "phase") canonical = item == "train" ? item : phase_name(parse_phase(item));
    if (axis == "overlap") canonical = parse_overlap(item).name();
    if (axis == "dtype") {
      if (const std::string problem = run_dtype_problem(item); !problem.empty()) return problem;
      canonical = item;
    }
  } catch (const UsageError& e) {
    return e.what();
  }
  if (axis == "transport" && find_transport(item) == nullptr)
    return "unknown transport '" + item + "' (expected " + transport_names() + ")";
  return "";
}

namespace {

struct SweepOptions {
  RunConfig base;
  std::string lists[std::size(kSweepAxes)]; ///< as given; split by split_list (empty items kept)
  bool keep_timelines = false;
  int repeats = 3;
};

// The p50 step of `point`'s ok repeats that is their median (the lower middle of an even count),
// so that it names one repeat.
double median_repeat(const std::vector<SweepRepeat>& repeats, int64_t point) {
  std::vector<double> p50s;
  for (const SweepRepeat& r : repeats)
    if (r.point == point && r.status == "ok") p50s.push_back(r.step_p50_ns);
  std::sort(p50s.begin(), p50s.end());
  return p50s[(p50s.size() - 1) / 2];
}

// Ranks beyond a point's tp x pp run it as data-parallel replicas.
void replicate(RunConfig& cfg, int world) {
  cfg.dp =
      cfg.tp > 0 && cfg.pp > 0 && world % (cfg.tp * cfg.pp) == 0 ? world / (cfg.tp * cfg.pp) : 1;
}

} // namespace

void set_sweep_axis(RunConfig& cfg, const std::string& axis, const std::string& value) {
  if (axis == "tp") cfg.tp = std::stoi(value);
  if (axis == "batch") cfg.batch = std::stoll(value);
  if (axis == "seq") cfg.seq = std::stoll(value);
  if (axis == "context") cfg.context = std::stoll(value);
  if (axis == "hidden") {
    // The MLP keeps its ratio to the hidden size (a model given by its dimensions alone gets 4h
    // from the defaults).
    const int64_t hidden = std::stoll(value);
    if (cfg.hidden > 0 && cfg.ffn_hidden > 0) cfg.ffn_hidden = cfg.ffn_hidden * hidden / cfg.hidden;
    cfg.hidden = hidden;
  }
  if (axis == "phase") cfg.phase = value;
  if (axis == "overlap") cfg.overlap = value;
  if (axis == "transport") cfg.transport = value;
  if (axis == "dtype") cfg.dtype = value;
}

Crossover predict_crossover(const std::string& axis, const std::string& fixed,
                            const RunConfig& first, const RunConfig& last, const Roofs& roofs,
                            const std::string& transport) {
  Crossover c;
  c.axis = axis;
  c.fixed = fixed;
  c.kind = "interconnect";
  c.predicted = true;
  c.status = "predicted";
  auto margin = [&](const RunConfig& cfg, double(&t)[4], std::string& note) {
    predict_classes(cfg, roofs, transport, t, note);
    return t[2] - std::max(t[0], t[1]);
  };
  double t[4];
  std::string note;
  const double m_first = margin(first, t, note), m_last = margin(last, t, note);
  if (roofs.interconnect.empty()) {
    c.note = "the roofs hold no interconnect roof (a one-rank job): nothing to predict";
    return c;
  }
  const bool up = m_last >= m_first;
  RunConfig cfg = up ? last : first;
  // A prediction is of one tp x pp group: replicas change nothing in the roofs' model.
  cfg.dp = 1;
  for (int step = 0; step < 6; ++step) {
    int64_t v = 0;
    if (axis == "tp") v = up ? cfg.tp * 2 : cfg.tp / 2;
    if (axis == "batch") v = up ? cfg.batch * 2 : cfg.batch / 2;
    if (axis == "seq") v = up ? cfg.seq * 2 : cfg.seq / 2;
    if (axis == "context") v = up ? cfg.context * 2 : cfg.context / 2;
    if (axis == "hidden") v = up ? cfg.hidden * 2 : cfg.hidden / 2;
    if (v <= 0) break;
    if (axis == "tp") cfg.tp = static_cast<int>(v);
    if (axis == "batch") cfg.batch = v;
    if (axis == "seq") cfg.seq = v;
    if (axis == "context") cfg.context = v;
    if (axis == "hidden") set_sweep_axis(cfg, axis, std::to_string(v));
    if (!validate(cfg, cfg.tp * cfg.pp).empty()) break;
    std::string n;
    if (margin(cfg, t, n) > 0) {
      c.at_value = std::to_string(v);
      c.rising_ns = t[2];
      c.falling_ns = std::max(t[0], t[1]);
      c.note = "work model under the roofs: interconnect " +
               std::to_string(t[2] / 1e3).substr(0, 8) + " us vs " +
               std::to_string(c.falling_ns / 1e3).substr(0, 8) + " us" +
               (n.empty() ? "" : "; " + n) + "; a point estimate (no interval)";
      return c;
    }
  }
  c.note = "none predicted within x64 of the grid (work model under the roofs)";
  return c;
}

std::string sweep_axis_value(const RunConfig& cfg, const std::string& axis) {
  if (axis == "tp") return std::to_string(cfg.tp);
  if (axis == "batch") return std::to_string(cfg.batch);
  if (axis == "seq") return std::to_string(cfg.seq);
  if (axis == "context") return std::to_string(cfg.context);
  if (axis == "hidden") return std::to_string(cfg.hidden);
  if (axis == "phase") return cfg.phase;
  if (axis == "overlap") return cfg.overlap;
  if (axis == "transport") return cfg.transport;
  return cfg.dtype;
}

namespace {

// When a sweep rewrites its file: after runs 1, 2, 4, 8, ... (the early points are safe at
// once) and whenever kCheckpointSeconds and twenty times the last write's duration have passed,
// so that a run costs the same at run 1 and at run 5,000 (the writes take at most about 5 % of
// the time however long the file grows) and a job killed without warning loses that much time
// at most. Rank 0 keeps the clock; every rank takes part in each write.
class Checkpoints {
public:
  static constexpr double kCheckpointSeconds = 30;
  static constexpr double kWriteShare = 20;
  bool due(const MpiSession& mpi) {
    ++m_runs;
    using clock = std::chrono::steady_clock;
    int due = (m_runs & (m_runs - 1)) == 0 || clock::now() >= m_next;
    RIDGELINE_CHECK(MPI_Bcast(&due, 1, MPI_INT, 0, mpi.world()));
    if (due) ++m_writes;
    return due != 0;
  }
  /// After a write that took `seconds`: the next time-based checkpoint.
  void wrote(double seconds) {
    m_next =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(std::max(kCheckpointSeconds, kWriteShare * seconds)));
  }
  int64_t runs() const { return m_runs; }
  int64_t writes() const { return m_writes; }

private:
  int64_t m_runs = 0, m_writes = 0;
  std::chrono::steady_clock::time_point m_next =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(kCheckpointSeconds));
};

int run_sweep(CommandContext& ctx, SweepOptions o) {
  JobContext job(ctx, o.base.backend, o.base.allow_shared_gpu);
  MpiSession& mpi = job.mpi();
  if (reject_if_any(ctx, "invalid GPU placement", job.placement_problems())) return 2;
  const int world = mpi.size();
  std::vector<std::string> problems, axes;
  const size_t naxes = std::size(kSweepAxes);
  // The lists were checked while parsing (axis_item): no empty, bad or repeated item.
  std::vector<std::string> lists[std::size(kSweepAxes)];
  split_sweep_axis_lists(o.lists, lists, axes);
  // What every point shares is checked once, before anything is measured: the backend, the
  // output files and the roofs file (a point's own problems fail only that point).
  {
    RunConfig shared = o.base;
    apply_defaults(shared, job.backend_name());
    o.base.file_layout = shared.file_layout; // one layout for every rewrite of the file
    for (std::string& problem : validate_shared(shared))
      problems.push_back(std::move(problem));
    if (shared.backend == "cuda" && job.gpus() == 0)
      problems.emplace_back("--backend cuda: no CUDA device is visible");
  }
  const size_t transport_axis = static_cast<size_t>(
      std::find(std::begin(kSweepAxes), std::end(kSweepAxes), std::string("transport")) -
      std::begin(kSweepAxes));
  if (lists[transport_axis].size() > 1)
    problems.emplace_back(
        "--transport: NCCL reads its environment once per process, so a job runs one transport: "
        "run one sweep per transport and join them with `ridgeline report A.h5 B.h5`");
  o.base.out = output_path(mpi.world(), o.base.out, "sweep");
  // Every file the sweep will write is checked before anything is measured.
  for (std::string& problem : check_outputs(
           ctx, {{o.base.out, "--out"}, {o.base.json, "--json"}, {o.base.markdown, "--markdown"}},
           input_files(o.base)))
    problems.push_back(std::move(problem));
  if (reject_if_any(ctx, "invalid sweep", problems)) return 2;
  if (mpi.rank() == 0 && !o.base.quiet) progress::enable_line("sweep");

  // The grid: every combination, the last axis fastest; a point's options are those of the
  // base configuration with its axis values.
  const std::vector<RunConfig> grid = sweep_grid(o.base, lists);
  const std::string transport =
      lists[transport_axis].empty() ? o.base.transport : lists[transport_axis].front();
  for (const std::string& warning : job.use_transport(transport))
    if (mpi.rank() == 0) std::cerr << "ridgeline: warning: " << warning << "\n";
  // Roofs: one file, or one short measurement for every point with the GEMM shapes of every
  // point that can run.
  std::vector<RoofsPlan::Shape> shapes;
  std::vector<DType> dtypes;
  for (RunConfig cfg : grid) {
    apply_defaults(cfg, job.backend_name());
    replicate(cfg, world);
    if (!validate(cfg, world).empty()) continue;
    const DType dtype = parse_dtype(cfg.dtype);
    if (std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end()) dtypes.push_back(dtype);
    for (const RoofsPlan::Shape& shape : layer_gemm_shapes(cfg))
      if (std::none_of(shapes.begin(), shapes.end(), [&](const RoofsPlan::Shape& s) {
            return s.m == shape.m && s.n == shape.n && s.k == shape.k;
          }))
        shapes.push_back(shape);
  }
  const Roofs roofs = obtain_roofs(job, o.base.roofs, dtypes, shapes, o.base.timeout_s);
  if (mpi.rank() == 0 && !roofs.empty() && o.base.roofs.empty())
    print_roofs_summary(std::cout, roofs);
  if (mpi.rank() == 0)
    std::cout << "ridgeline sweep: " << grid.size() << " point(s) on " << world
              << " rank(s); a point with tp x pp below the ranks runs as data-parallel replicas "
                 "(gradient traffic in the train phase only, the global --batch shared), its "
                 "step the longest replica's\n";

  RunData data;
  data.root = job.root_attrs("sweep");
  data.stack = job.stack();
  data.env = performance_env();
  data.config = config_attrs(o.base);
  for (size_t a = 0; a < naxes; ++a)
    if (!lists[a].empty())
      data.config.emplace_back(std::string("sweep_") + kSweepAxes[a], join(lists[a], ","));
  data.config.emplace_back("keep_timelines", static_cast<int64_t>(o.keep_timelines));
  data.config.emplace_back("repeats", static_cast<int64_t>(o.repeats));
  data.topology = job.topology({});
  if (!roofs.empty()) add_roofs(data, roofs, {{"transport", job.transport()}});
  const size_t fixed_tables = data.tables.size();
  const size_t fixed_groups = data.group_attrs.size();

  std::vector<SweepRow> rows;
  std::vector<SweepRepeat> repeats; ///< rank 0: every repeat that ran, in the order run
  std::vector<RunConfig> resolved;
  // Rank 0 holds the sweep's tables after the roofs. With --keep-timelines every rank keeps its
  // own timeline of each point and writes it (or sends it to its node's writer) at every rewrite
  // of the file; every rank takes part in each write, at rank 0's fallback path from the first
  // write that fails on.
  OutputFile h5(o.base.out, "--out", mpi.rank() == 0);
  std::vector<std::unique_ptr<std::vector<TimelineRecord>>> kept;
  RankRows mine;
  const FileWriteOptions layout{parse_file_layout(o.base.file_layout), o.base.ranks_per_file};
  auto write_sweep = [&](const std::vector<Crossover>& crossovers, bool complete) {
    data.tables.resize(fixed_tables);
    data.group_attrs.resize(fixed_groups);
    data.tables.push_back({"/sweep/points", sweep_points_table(rows), {}});
    data.tables.push_back({"/sweep/repeats", sweep_repeats_table(repeats), {}});
    data.tables.push_back({"/sweep/crossovers", crossovers_table(crossovers), {}});
    int64_t failed = 0;
    for (const SweepRow& r : rows)
      failed += r.status.rfind("failed", 0) == 0 ? 1 : 0;
    data.group_attrs.emplace_back("/sweep", Attrs{{"axes", join(axes, ",")},
                                                  {"points", static_cast<int64_t>(rows.size())},
                                                  {"failed", failed},
                                                  {"repeats", static_cast<int64_t>(o.repeats)},
                                                  {"interval", std::string(kIntervalMethod)},
                                                  {"complete", static_cast<int64_t>(complete)}});
    h5.write([&](const std::string& path) {
      write_run_files(mpi.world(), broadcast_string(mpi.world(), path, 0), data, mine, layout);
    });
  };
  // The points, each once: decode ignores --seq and prefill --context, so such combinations
  // repeat a point.
  struct Planned {
    RunConfig cfg;
    std::vector<std::string> problems;
  };
  std::vector<Planned> planned;
  std::set<std::string> labels;
  for (const RunConfig& point : grid) {
    RunConfig cfg = point;
    replicate(cfg, world);
    std::vector<std::string> point_problems = resolve_point(job, cfg);
    if (cfg.phase == "prefill") cfg.context = 0;
    SweepRow row;
    row.point = static_cast<int64_t>(rows.size());
    for (const char* a : kSweepAxes)
      row.axis[a] = sweep_axis_value(cfg, a);
    row.label = axes.empty() ? "point" : describe(row, axes, "");
    if (!labels
             .insert(describe(
                 row, std::vector<std::string>(std::begin(kSweepAxes), std::end(kSweepAxes)), ""))
             .second)
      continue;
    row.repeats = 0;
    // "pending" until its first repeat runs (what a file written midway shows).
    row.status = point_problems.empty() ? "pending" : "failed: " + join(point_problems, "; ");
    RunData::Point p;
    p.config = config_attrs(cfg);
    p.has_summary = false;
    p.attrs = {{"status", row.status}, {"label", row.label}};
    rows.push_back(row);
    resolved.push_back(cfg);
    data.points.push_back(std::move(p));
    planned.push_back({cfg, std::move(point_problems)});
  }
  // Every repeat of every point, the points taking turns (1..n, 1..n, ...) so that the clock's
  // drift at the power cap spreads over all of them.
  std::vector<std::vector<std::vector<double>>> step_samples(rows.size());
  std::vector<std::vector<std::pair<double, RunSummary>>> summaries(rows.size());
  bool any_failed_check = false;
  int status = 0;
  const int64_t runs = static_cast<int64_t>(rows.size()) * o.repeats;
  // SIGTERM or SIGINT (a time limit, Ctrl-C): the point in flight finishes, then the file keeps
  // every run so far, marked incomplete. Every rank learns of it before the next point.
  const stop::BetweenPoints between_points;
  int stopped = 0;
  Checkpoints checkpoints;
  for (int rep = 0; rep < o.repeats && stopped == 0; ++rep)
    for (size_t k = 0; k < rows.size(); ++k) {
      SweepRow& row = rows[k];
      if (!planned[k].problems.empty()) continue;
      stopped = stop::requested();
      RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &stopped, 1, MPI_INT, MPI_MAX, mpi.world()));
      if (stopped != 0) break;
      // A repeat after a failure of the same point would fail the same way.
      if (rep > 0 && row.status != "ok") continue;
      RunConfig cfg = planned[k].cfg;
      // The output does not change between repeats: the first repeat checks it.
      if (rep > 0) cfg.check = "off";
      if (mpi.rank() == 0)
        progress::set_point(static_cast<int64_t>(rep) * static_cast<int64_t>(rows.size()) +
                                static_cast<int64_t>(k) + 1,
                            runs,
                            o.repeats > 1 ? row.label + " (repeat " + std::to_string(rep + 1) +
                                                "/" + std::to_string(o.repeats) + ")"
                                          : row.label);
      Watchdog watchdog(cfg.timeout_s, "point " + row.label);
      const ranges::Scope range(
          [&] { return "point " + std::to_string(row.point) + ": " + row.label; });
      PointResult result = run_point(job, cfg, roofs, watchdog);
      // A library loaded on first use (cuDNN) joins the fingerprint once a point loaded it.
      if (!result.attention_plans.empty()) data.stack = point_stack(job, result);
      any_failed_check = any_failed_check || result.check_failed;
      SweepRepeat measured;
      measured.point = row.point;
      measured.repeat = rep;
      measured.status = result.status;
      if (rep == 0) row.status = result.status;
      row.setup_s += result.setup_s;
      row.measure_s += result.measure_s;
      if (result.ok() && mpi.rank() == 0) {
        const StrategyResult& r = result.strategies.front();
        const Attrs& a = r.summary.attrs;
        auto num = [&](const char* key) {
          const AttrValue* v = find_attr(a, key);
          return v ? std::get<double>(*v) : 0.0;
        };
        measured.step_p50_ns = r.summary.step.p50;
        measured.step_p99_ns = r.summary.step.p99;
        const char* keys[] = {"step_compute_ns", "step_hbm_ns", "step_interconnect_ns",
                              "step_launch_ns"};
        for (int c = 0; c < 4; ++c)
          measured.class_ns[c] = num(keys[c]);
        measured.exposed_interconnect_ns = num("exposed_interconnect_ns");
        if (const AttrValue* v = find_attr(a, "ceiling")) measured.ceiling = attr_to_string(*v);
        if (rep == 0) {
          row.step_flops = num("step_flops");
          row.step_hbm_bytes = num("step_hbm_bytes");
          row.step_comm_bytes = num("step_comm_bytes");
          row.check = r.check.status;
        }
        step_samples[k].push_back(r.summary.step_ns);
        repeats.push_back(measured);
        aggregate_repeats(row, repeats, step_samples[k]);
        // The point's summary group holds the repeat whose step is the median so far (kept for
        // every repeat: a later repeat can make an earlier one the median).
        RunData::Point& p = data.points[k];
        summaries[k].emplace_back(measured.step_p50_ns, r.summary);
        const double median = median_repeat(repeats, row.point);
        for (const auto& [p50, summary] : summaries[k])
          if (p50 == median) {
            p.summary = summary;
            break;
          }
        if (!p.has_summary && o.keep_timelines) p.ops = result.ops;
        p.has_summary = true;
      } else if (!result.ok() && mpi.rank() == 0) {
        repeats.push_back(measured);
      }
      if (rep == 0 && result.ok() && o.keep_timelines) {
        kept.push_back(std::make_unique<std::vector<TimelineRecord>>(
            std::move(result.strategies.front().rows)));
        mine.groups.push_back("/points/" + std::to_string(k));
        mine.timelines.push_back(kept.back().get());
      }
      data.points[k].attrs = {{"status", row.status},
                              {"label", row.label},
                              {"repeats", static_cast<int64_t>(row.repeats)}};
      // The file is rewritten (complete = 0 until the last) at checkpoints, so a job killed
      // midway keeps the repeats it finished up to the last one, marked as incomplete.
      if (checkpoints.due(mpi)) {
        const double started = MPI_Wtime();
        write_sweep(mpi.rank() == 0 ? find_crossovers(rows, axes) : std::vector<Crossover>{},
                    false);
        checkpoints.wrote(MPI_Wtime() - started);
      }
    }
  if (stopped != 0) {
    write_sweep(mpi.rank() == 0 ? find_crossovers(rows, axes) : std::vector<Crossover>{}, false);
    progress::finish_line("");
    if (mpi.rank() == 0) {
      print_sweep(std::cout, rows, axes, {});
      std::cerr << "ridgeline: sweep stopped by " << (stopped == SIGINT ? "SIGINT" : "SIGTERM")
                << " after " << checkpoints.runs() << " of " << runs << " runs";
      if (!h5.lost()) std::cerr << "; '" << h5.path() << "' keeps them, marked incomplete";
      std::cerr << "\n";
    }
    return stop::exit_status(stopped);
  }
  std::vector<Crossover> crossovers;
  if (mpi.rank() == 0) {
    // Where a line of the grid holds no interconnect crossover, the roofs' prediction.
    crossovers = find_crossovers(rows, axes);
    if (!roofs.empty())
      for (const std::string& axis : axes) {
        if (!numeric_axis(axis)) continue;
        std::map<std::string, std::vector<size_t>> groups;
        for (size_t i = 0; i < rows.size(); ++i)
          if (rows[i].status == "ok") groups[describe(rows[i], axes, axis)].push_back(i);
        for (auto& [fixed, line] : groups) {
          bool found = false;
          for (const Crossover& c : crossovers)
            found = found || (c.axis == axis && c.fixed == fixed && c.kind == "interconnect" &&
                              c.status != "within noise");
          if (found || line.empty()) continue;
          std::sort(line.begin(), line.end(), [&](size_t a, size_t b) {
            return less_value(axis, rows[a].axis.at(axis), rows[b].axis.at(axis), {});
          });
          // A line that starts on the interconnect has nothing to cross within the grid.
          if (rows[line.front()].ceiling == "interconnect") {
            Crossover c;
            c.axis = axis, c.fixed = fixed, c.kind = "interconnect", c.predicted = true;
            c.status = "from the first point";
            c.note = "the interconnect is the ceiling from the first point of the grid on (" +
                     axis + "=" + rows[line.front()].axis.at(axis) + ")";
            crossovers.push_back(c);
            continue;
          }
          crossovers.push_back(predict_crossover(axis, fixed, resolved[line.front()],
                                                 resolved[line.back()], roofs, job.transport()));
        }
      }
    progress::finish_line("");
    // The table first: whatever happens to the files, the numbers are on stdout.
    print_sweep(std::cout, rows, axes, crossovers);
  }
  write_sweep(crossovers, true);
  if (mpi.rank() == 0) {
    const std::vector<std::pair<std::string, Attrs>> attrs = {{"sweep", data.root},
                                                              {"config", data.config}};
    const std::vector<std::pair<std::string, Table>> tables = {
        {"points", sweep_points_table(rows)},
        {"repeats", sweep_repeats_table(repeats)},
        {"crossovers", crossovers_table(crossovers)}};
    SummaryFiles summaries(o.base.json, o.base.markdown);
    std::vector<const OutputFile*> files = {&h5};
    summaries.write("ridgeline sweep", attrs, tables, files);
    for (const OutputFile* f : files)
      if (!f->lost())
        std::cout << "wrote " << f->path()
                  << (f == &h5 ? " (written " + std::to_string(checkpoints.writes() + 1) +
                                     " times during the sweep)"
                               : std::string())
                  << "\n";
    status = output_status(files);
  }
  RIDGELINE_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, mpi.world()));
  if (any_failed_check) return 3;
  // Every rank knows the statuses: a sweep of which no point ran has measured nothing.
  if (std::none_of(rows.begin(), rows.end(), [](const SweepRow& r) { return r.status == "ok"; })) {
    if (mpi.rank() == 0)
      std::cerr << "ridgeline: no point of the sweep could run (see the status of each)\n";
    return 1;
  }
  return status;
}

} // namespace

void split_sweep_axis_lists(const std::string (&given)[std::size(kSweepAxes)],
                            std::vector<std::string> (&lists)[std::size(kSweepAxes)],
                            std::vector<std::string>& axes) {
  for (size_t a = 0; a < std::size(kSweepAxes); ++a) {
    if (!given[a].empty()) lists[a] = split_list(given[a]);
    if (numeric_axis(kSweepAxes[a]))
      for (std::string& v : lists[a])
        v = std::to_string(std::stoll(v)); // +4 -> 4
    if (lists[a].size() > 1) axes.emplace_back(kSweepAxes[a]);
  }
}

void apply_run_table(CLI::App& app, CLI::App& cmd) {
  CLI::Option* config = app.get_option("--config");
  if (config->count() == 0) return;
  for (const CLI::ConfigItem& item : read_config_file(config->as<std::string>(), app)) {
    if (item.parents != std::vector<std::string>{"run"}) continue;
    CLI::Option* opt = cmd.get_option_no_throw("--" + item.name);
    if (opt == nullptr || opt->count() > 0) continue;
    opt->add_result(item.inputs);
    opt->run_callback();
  }
}

std::vector<RunConfig> sweep_grid(const RunConfig& base,
                                  const std::vector<std::string> (&lists)[std::size(kSweepAxes)]) {
  std::vector<RunConfig> grid = {base};
  for (size_t a = 0; a < std::size(kSweepAxes); ++a) {
    if (lists[a].empty()) continue;
    std::vector<RunConfig> next;
    for (const RunConfig& cfg : grid)
      for (const std::string& v : lists[a]) {
        RunConfig c = cfg;
        set_sweep_axis(c, kSweepAxes[a], v);
        next.push_back(c);
      }
    grid.swap(next);
  }
  return grid;
}

void bind_sweep_axis_lists(CLI::App& cmd, std::string (&lists)[std::size(kSweepAxes)]) {
  for (size_t a = 0; a < std::size(kSweepAxes); ++a) {
    const std::string flag = std::string("--") + kSweepAxes[a];
    CLI::Option* scalar = cmd.get_option(flag);
    const std::string group = scalar->get_group();
    std::string description = scalar->get_description();
    // `run` runs its --overlap list back to back in one point; here each value is a point.
    const std::string back_to_back = "Comma list of strategies run back to back: ";
    if (description.rfind(back_to_back, 0) == 0)
      description = "Overlap strategy: " + description.substr(back_to_back.size());
    cmd.remove_option(scalar);
    const std::string axis = kSweepAxes[a];
    cmd.add_option(flag, lists[a], description + " (comma list: one point per value)")
        ->check(comma_list([axis](const std::string& item, std::string& canonical) {
          return sweep_axis_item(axis, item, canonical);
        }))
        ->group(group);
  }
}

void setup_sweep_command(CLI::App& app, CommandAction& action) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run every point of a grid of configurations in one job -> one HDF5 file with a group per "
      "point, the step's time by ceiling per point, and the crossovers along each axis");
  bind_run_options(*cmd, o->base);
  bind_sweep_axis_lists(*cmd, o->lists);
  // What `run` takes as a list or a degree, a sweep takes as one value or not at all.
  cmd->get_option("--transport")
      ->description(
          "NCCL transport preset: auto, nvlink (checked against the link matrix), host "
          "(NCCL_P2P_DISABLE=1: NCCL's shared-memory path through host memory over PCIe) or net "
          "(sockets, as between nodes); one value: NCCL reads its environment once per process, "
          "so a job runs one transport (join one sweep per transport with `ridgeline report`)");
  cmd->get_option("--attention")
      ->description(
          "Attention implementation, one per sweep: fused (the project's kernel, online "
          "softmax), naive (materialised scores) or cudnn (cuDNN's fused SDPA; cuda backend, a "
          "build with cuDNN); `run --attention a,b` compares them side by side");
  cmd->get_option("--dp")->description(
      "Not taken: each point runs ranks / (tp x pp) data-parallel replicas");
  cmd->add_flag("--keep-timelines", o->keep_timelines,
                "Store every point's per-rank timelines of its first repeat (large)")
      ->group("Measurement");
  cmd->add_option("--repeats", o->repeats,
                  "Measure every point this many times, the points taking turns (1..n, 1..n, ...) "
                  "so that clock drift spreads over all of them; each point reports the median "
                  "step and time by ceiling with 95 % intervals, and a crossover is found only "
                  "where the crossing times differ beyond their intervals (1: no intervals)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str()
      ->group("Measurement");
  cmd->footer(
      "Every combination of the listed values is one point, run in turn by every rank, --repeats "
      "times with the points taking turns; a point that fails (invalid, out of memory) is "
      "recorded with its reason and the sweep goes on. Each point: the median step and time by "
      "ceiling over its repeats, with 95 % intervals. One transport per job: NCCL reads its "
      "environment once (join one sweep per transport with `ridgeline report A.h5 B.h5`, the "
      "transports ordered by measured bandwidth). Crossover: along each listed axis, the first "
      "point where the interconnect becomes the step's ceiling, found only where the two "
      "crossing times differ beyond their intervals at both points (else 'within noise'); where "
      "the grid holds none, the roofs' prediction (a point estimate).");
  // Presets are [run] tables (CLI11 applies a table to the subcommand of its name, [sweep] to
  // this one): a sweep takes the [run] table too, read as strictly, for every option that the
  // command line and the [sweep] table left unset.
  cmd->callback([o, &action, &app, cmd] {
    apply_run_table(app, *cmd);
    // Each point's data-parallel degree is ranks / (tp x pp): a given one would be replaced.
    if (cmd->get_option("--dp")->count() > 0)
      throw CLI::ValidationError(
          "--dp", "a sweep runs each point as ranks / (tp x pp) data-parallel replicas: "
                  "give no --dp (nor dp in the [run] table)");
    // A point runs one attention implementation (`run --attention a,b` compares them).
    if (o->base.attention.find(',') != std::string::npos)
      throw CLI::ValidationError("--attention",
                                 "a sweep point runs one implementation: give one (run --attention "
                                 "fused,cudnn,naive compares them side by side)");
    action = [o](CommandContext& ctx) { return run_sweep(ctx, *o); };
  });
}

} // namespace ridgeline
