// The sweep's analysis (see sweep.hpp): crossovers along each axis with their intervals, the
// roofs' predictions where a line holds none, the repeats' aggregates, and the sweep's tables.
#include "app/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <set>
#include <tuple>

#include "app/attribution.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config_file.hpp"
#include "app/config_mixed.hpp"
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

const char* const kNumericAxes[] = {"tp", "batch", "seq", "context", "hidden", "ep"};
bool numeric_axis(const std::string& axis) {
  return std::find(std::begin(kNumericAxes), std::end(kNumericAxes), axis) !=
         std::end(kNumericAxes);
}
// A share axis's value as a number: "" (a point that is no mixed step) NaN.
double share_value(const std::string& text) {
  return text.empty() ? std::numeric_limits<double>::quiet_NaN() : std::stod(text);
}
bool less_value(const std::string& axis, const std::string& a, const std::string& b,
                const AxisOrder& order) {
  if (axis == kLinkBandwidthAxis || axis == kLinkLatencyAxis) return std::stod(a) < std::stod(b);
  // Points without a share (none in a sweep along it) first.
  if (axis == "prefill_share") {
    const double x = share_value(a), y = share_value(b);
    return std::isnan(x) ? !std::isnan(y) : x < y;
  }
  // An unknown value (ep of a file written before the axis) first.
  if (numeric_axis(axis))
    return a.empty() || b.empty() ? a.empty() && !b.empty() : std::stoll(a) < std::stoll(b);
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
    if (ic.collective == "all_reduce" && ic.scope == Scope::intra &&
        (widest == nullptr || ic.group_size > widest->group_size))
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
  std::map<std::string, std::vector<double>> reals;
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
      } else if (a == std::string("prefill_share")) {
        reals[a].push_back(share_value(r.axis.at(a)));
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
    else if (a == std::string("prefill_share"))
      t.push_back({a, reals[a]});
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
      if (a != std::string("prefill_share") && a != std::string(kEpAxis))
        r.axis[a] = numeric_axis(a) ? std::to_string(ints(a)[i]) : texts(a)[i];
    // Files written before the ep axis ran one --ep, kept in each point's config only: "".
    r.axis[kEpAxis] = has(kEpAxis) ? std::to_string(ints(kEpAxis)[i]) : "";
    // Files written before the share axis have no share; a point that is no mixed step, NaN.
    const double share =
        has("prefill_share") ? nums("prefill_share")[i] : std::numeric_limits<double>::quiet_NaN();
    r.axis["prefill_share"] = std::isnan(share) ? "" : share_text(share);
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
      // An MoE point runs at tp 1: its interconnect is the dispatch and combine all-to-alls.
      const std::string kind =
          axis == kEpAxis && c.kind == "interconnect" ? "interconnect (all-to-all)" : c.kind;
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
                      axis.c_str(), c.fixed.c_str(), kind.c_str(), where.c_str(), c.note.c_str());
      else
        std::snprintf(line, sizeof(line), "  %-8s [%s] %s becomes the ceiling between %s%s: %s\n",
                      axis.c_str(), c.fixed.c_str(), kind.c_str(), where.c_str(),
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
  // A TP group (within a node) of a size never measured (more ranks than a node of the job had)
  // borrows the largest measured within a node.
  std::set<std::string> borrowed;
  for (const InterconnectRoof& ic : roofs.interconnect)
    if (ic.scope == Scope::intra &&
        roofs.interconnect_for(ic.collective, cfg.tp, transport) == nullptr) {
      const InterconnectRoof* best = nullptr;
      for (const InterconnectRoof& c : roofs.interconnect)
        if (c.collective == ic.collective && c.scope == Scope::intra &&
            (best == nullptr || c.group_size > best->group_size))
          best = &c;
      InterconnectRoof copy = *best;
      copy.group_size = cfg.tp;
      r.interconnect.push_back(copy);
      borrowed.insert("the interconnect roof of " + std::to_string(best->group_size) + " ranks");
    }
  if (!borrowed.empty()) note = "assumes " + *borrowed.begin() + " at tp=" + std::to_string(cfg.tp);
  const DType dtype = parse_dtype(cfg.dtype);
  const AttentionImpl attn = attention_list(cfg).front();
  const double instances = static_cast<double>(cfg.layers / cfg.pp * cfg.microbatches);
  // A mixed step as `model --trace` prices it.
  const std::vector<OpSpec> ops = cfg.phase == "mixed"
                                      ? mixed_step_ops(model_spec(cfg), mixed_step_of(cfg), cfg.tp,
                                                       dtype, attn, cfg.sequence_parallel)
                                      : layer_ops(model_spec(cfg), layer_shape(cfg), attn);
  for (const OpSpec& o : ops) {
    const OpBounds b = op_bounds(op_work(o, o.cost, cfg.tp, dtype), r, transport);
    if (b.ceiling != Ceiling::none) class_ns[static_cast<int>(b.ceiling)] += b.bound_ns * instances;
  }
}

// One item of an axis list: an integer of the axis's range, or a value of its kind.
std::string sweep_axis_item(const std::string& axis, const std::string& item,
                            std::string& canonical) {
  // tp auto: the ranks of one node, resolved per point once the job knows its nodes.
  if (axis == "tp" && item == "auto") {
    canonical = item;
    return "";
  }
  if (axis == "prefill_share") return prefill_share_problem(item, canonical);
  if (numeric_axis(axis)) {
    std::string text = item;
    // Degrees are ints.
    const int64_t most = axis == "tp" || axis == kEpAxis ? std::numeric_limits<int>::max()
                                                         : std::numeric_limits<int64_t>::max();
    const std::string problem = integer_in(axis == "context" ? 0 : 1, most)(text);
    if (problem.empty()) canonical = std::to_string(std::stoll(item));
    return problem;
  }
  try {
    // train and mixed are run phases, not the work model's layer phases.
    if (axis == "phase")
      canonical = item == "train" || item == "mixed" ? item : phase_name(parse_phase(item));
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

void add_predicted_crossovers(std::vector<Crossover>& crossovers, const std::vector<SweepRow>& rows,
                              const std::vector<std::string>& axes,
                              const std::vector<RunConfig>& configs, const Roofs& roofs,
                              const std::string& transport) {
  if (roofs.empty()) return;
  for (const std::string& axis : axes) {
    // The roofs' prediction is of a dense layer's ops: along ep, `ridgeline model --ep` predicts
    // the MoE layer's all-to-alls.
    if (!numeric_axis(axis) || axis == kEpAxis) continue;
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
        c.note = "the interconnect is the ceiling from the first point of the grid on (" + axis +
                 "=" + rows[line.front()].axis.at(axis) + ")";
        crossovers.push_back(c);
        continue;
      }
      crossovers.push_back(predict_crossover(axis, fixed, configs[line.front()],
                                             configs[line.back()], roofs, transport));
    }
  }
}

std::string sweep_row_label(const SweepRow& row, const std::vector<std::string>& axes) {
  return describe(row, axes, "");
}

} // namespace ridgeline
