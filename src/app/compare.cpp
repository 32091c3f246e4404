// `ridgeline compare`: two files' units of comparison (a run's strategies, a sweep's points,
// a collectives file's sizes) matched and compared, the stack diff beside them, printed and
// written (the analysis is compare_stack.cpp's).
#include "app/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/h5.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

// ---- the files: units of comparison ----

// One timing: a series of per-iteration samples, or only its stored median.
struct Timing {
  std::string name;            // "step", an op, or a message size
  std::vector<double> samples; // ns; empty when only the median was kept
  double p50_ns = 0;
  std::string ceiling; // the op's (or step's) ceiling; "" where the file kind has none
  std::string scope;   // a collective's scope (intra, inter, hier); "" for others and older files
};

// What is compared as a whole: a run (or one of its strategies), a sweep point, a collective.
struct Unit {
  std::string label;
  std::string status = "ok";
  std::vector<Timing> timings;
  Attrs summary; // its /summary attributes (the NVML gpu.* means)
};

struct ResultFile {
  std::string path;
  std::string kind; // run | sweep | collectives
  RunData data;
  std::vector<Unit> units;
};

std::string text_attr(const Attrs& attrs, const char* key, const std::string& otherwise) {
  const AttrValue* v = find_attr(attrs, key);
  return v ? attr_to_string(*v) : otherwise;
}

// The step, then each op in /summary/ops order: per-iteration series where timelines exist,
// else the stored per_step_p50_ns.
std::vector<Timing> run_timings(const std::vector<double>& step_ns, const Attrs& summary,
                                const std::vector<OpAggregate>& ops, const OpTable& table,
                                const std::vector<std::vector<TimelineRecord>>& timelines) {
  std::vector<Timing> out;
  out.push_back(
      {"step", step_ns, percentile(step_ns, 50), text_attr(summary, "ceiling", "none"), ""});
  const std::map<std::string, std::vector<double>> series =
      op_totals_per_iteration(table, timelines);
  for (const OpAggregate& op : ops) {
    const auto it = series.find(op.name);
    Timing t{op.name, {}, op.per_step_p50_ns, op.ceiling, op.scope};
    if (it != series.end()) t.samples = it->second;
    out.push_back(std::move(t));
  }
  return out;
}

// Field `name` of `table` (stored at `where`); a missing or mistyped field is the file's fault.
template <class T>
const std::vector<T>& field(const Table& table, const char* name, const std::string& where) {
  const Column* c = h5::find_column(table, name);
  if (c == nullptr || !std::holds_alternative<std::vector<T>>(c->values))
    throw UsageError(where + ": no field '" + name + "' of the expected type");
  return std::get<std::vector<T>>(c->values);
}

// /points/<k>/summary/ops rows, as far as compare needs them (name, per-step median, ceiling,
// scope; files written before attribution have no ceiling: "none", nor before scopes a scope).
std::vector<OpAggregate> point_ops(hid_t summary, const std::string& where) {
  const Table table = h5::read_table(summary, "ops");
  const auto& names = field<std::string>(table, "name", where);
  const auto& per_step = field<double>(table, "per_step_p50_ns", where);
  const bool attributed = h5::find_column(table, "ceiling") != nullptr;
  const bool scoped = h5::find_column(table, "scope") != nullptr;
  std::vector<OpAggregate> ops(names.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].name = names[i];
    ops[i].per_step_p50_ns = per_step[i];
    if (attributed) ops[i].ceiling = field<std::string>(table, "ceiling", where)[i];
    if (scoped) ops[i].scope = field<std::string>(table, "scope", where)[i];
  }
  return ops;
}

// Every /points/<k>: the strategies of a run ("overlap=<strategy>") or the points of a sweep
// (their /sweep/points label). read_run_file() leaves /points alone, so they are read here.
std::vector<Unit> read_points(const std::string& path, bool sweep, size_t ranks) {
  std::vector<Unit> units;
  h5::Handle file = h5::open_file_read(path);
  if (!h5::exists(file.id(), "/points")) return units;
  h5::Handle points = h5::open_group(file.id(), "/points");
  for (const std::string& k : h5::list_children(points.id())) {
    const std::string base = "/points/" + k;
    const Attrs attrs = h5::read_attrs(h5::open_group(file.id(), base).id());
    const Attrs config = h5::read_attrs(h5::open_group(file.id(), base + "/config").id());
    Unit u;
    u.label = sweep ? text_attr(attrs, "label", "point " + k)
                    : "overlap=" + text_attr(config, "strategy", "point " + k);
    if (u.label.empty()) u.label = "(one point)";
    u.status = text_attr(attrs, "status", "ok");
    if (!h5::exists(file.id(), base + "/summary")) {
      if (u.status == "ok") u.status = "no summary";
      units.push_back(std::move(u));
      continue;
    }
    h5::Handle summary = h5::open_group(file.id(), base + "/summary");
    u.summary = h5::read_attrs(summary.id());
    const std::vector<double> step = h5::read_vector<double>(summary.id(), "step_time_ns");
    const std::vector<OpAggregate> ops =
        point_ops(summary.id(), path + ": " + base + "/summary/ops");
    OpTable table;
    std::vector<std::vector<TimelineRecord>> timelines;
    if (h5::exists(file.id(), base + "/ops")) {
      const Table t = h5::read_table(file.id(), base + "/ops");
      const auto& names = field<std::string>(t, "name", path + ": " + base + "/ops");
      const auto& kinds = field<std::string>(t, "kind", path + ": " + base + "/ops");
      for (size_t i = 0; i < names.size(); ++i)
        table.intern(names[i], parse_op_kind(kinds[i]));
      for (size_t r = 0; r < ranks; ++r)
        timelines.push_back(
            h5::read_timeline(file.id(), base + "/ranks/" + std::to_string(r) + "/timeline"));
    }
    u.timings = run_timings(step, u.summary, ops, table, timelines);
    units.push_back(std::move(u));
  }
  return units;
}

std::string size_text(int64_t bytes) {
  const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0)
    bytes /= 1024, ++u;
  return std::to_string(bytes) + " " + units[u];
}

const NamedTable* find_table(const RunData& d, const std::string& path) {
  for (const NamedTable& t : d.tables)
    if (t.path == path) return &t;
  return nullptr;
}

// One unit per collective, one timing per message size: the samples of /collectives/<name>_
// samples_ns (each already the max over the group's ranks), or the stored p50 without them.
std::vector<Unit> collective_units(const RunData& d) {
  const std::string prefix = "/collectives/";
  const std::string suffix = "_samples_ns";
  std::vector<Unit> units;
  for (const NamedTable& t : d.tables) {
    if (t.path.rfind(prefix, 0) != 0) continue;
    const std::string name = t.path.substr(prefix.size());
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      continue;
    Unit u;
    u.label = name;
    const auto& sizes = field<int64_t>(t.table, "size_bytes", t.path);
    const auto& p50 = field<double>(t.table, "time_p50_ns", t.path);
    for (size_t i = 0; i < sizes.size(); ++i)
      u.timings.push_back({size_text(sizes[i]), {}, p50[i], "", ""});
    if (const NamedTable* samples = find_table(d, t.path + suffix)) {
      const auto& index = field<int64_t>(samples->table, "size_index", samples->path);
      const auto& time = field<double>(samples->table, "time_ns", samples->path);
      for (size_t i = 0; i < index.size(); ++i)
        if (index[i] >= 0 && static_cast<size_t>(index[i]) < u.timings.size())
          u.timings[static_cast<size_t>(index[i])].samples.push_back(time[i]);
    }
    units.push_back(std::move(u));
  }
  return units;
}

// Reads and checks one file; throws UsageError with one line naming it.
ResultFile load(const std::string& path) {
  const std::vector<std::string> problems = validate_run_file(path);
  if (!problems.empty()) {
    std::string line = problems.front();
    if (line.rfind(path, 0) != 0) line = path + ": " + line;
    if (problems.size() > 1)
      line += " (and " + std::to_string(problems.size() - 1) + " more: ridgeline validate " + path +
              ")";
    throw UsageError(line);
  }
  ResultFile f;
  f.path = path;
  f.data = read_run_file(path);
  f.kind = text_attr(f.data.root, "command", "run");
  const size_t ranks = f.data.topology.size();
  if (f.kind == "run") {
    f.units = read_points(path, false, ranks);
    if (f.units.empty()) {
      Unit u;
      u.label = "overlap=" + text_attr(f.data.config, "overlap", "none");
      u.summary = f.data.summary.attrs;
      u.timings = run_timings(f.data.summary.step_ns, f.data.summary.attrs, f.data.summary.ops,
                              f.data.ops, f.data.timelines);
      f.units.push_back(std::move(u));
    }
  } else if (f.kind == "sweep") {
    f.units = read_points(path, true, ranks);
  } else if (f.kind == "collectives") {
    f.units = collective_units(f.data);
  } else {
    throw UsageError(path + ": a " + f.kind +
                     " file holds no timings to compare (compare takes run, "
                     "sweep and collectives files)");
  }
  return f;
}

// ---- comparing ----

struct Row {
  std::string unit;
  std::string item;
  MedianChange change;
  bool compared = false; // both sides have the timing
  std::string note;      // why there is no verdict
  std::string ceiling_a, ceiling_b;
  std::string scope_a, scope_b; // a collective's scope in A and in B ("" where not recorded)
};

const char* verdict_of(const Row& r) {
  if (!r.compared || !r.change.has_interval) return "n/a";
  return r.change.moved ? "moved" : "unchanged";
}

// A change against a stored median only: no interval, no verdict.
MedianChange medians_only(double a, double b) {
  MedianChange c;
  c.a_p50_ns = a;
  c.b_p50_ns = b;
  c.change = relative_change(b - a, a);
  return c;
}

const Timing* find_timing(const Unit& u, const std::string& name) {
  for (const Timing& t : u.timings)
    if (t.name == name) return &t;
  return nullptr;
}

void compare_units(const Unit& a, const Unit& b, const std::string& label, std::vector<Row>& rows) {
  if (a.status != "ok" || b.status != "ok") {
    Row r{label, "step", {}, false, "", "", "", "", ""};
    r.note = a.status != "ok" ? "A: " + a.status : "B: " + b.status;
    rows.push_back(r);
    return;
  }
  for (const Timing& ta : a.timings) {
    Row r{label, ta.name, {}, false, "", ta.ceiling, "", ta.scope, ""};
    const Timing* tb = find_timing(b, ta.name);
    if (tb == nullptr) {
      r.note = "only in A";
      r.change = medians_only(ta.p50_ns, 0);
      rows.push_back(r);
      continue;
    }
    r.compared = true;
    r.ceiling_b = tb->ceiling;
    r.scope_b = tb->scope;
    if (!ta.samples.empty() && !tb->samples.empty()) {
      r.change = compare_medians(ta.samples, tb->samples);
      if (!r.change.has_interval) r.note = "fewer than " + std::to_string(kMinSamples) + " samples";
    } else {
      r.change = medians_only(ta.p50_ns, tb->p50_ns);
      r.note = "median only: no timelines";
    }
    rows.push_back(r);
  }
  for (const Timing& tb : b.timings)
    if (find_timing(a, tb.name) == nullptr) {
      Row r{label, tb.name, medians_only(0, tb.p50_ns), false, "only in B", "", tb.ceiling,
            "",    tb.scope};
      rows.push_back(r);
    }
}

// Units matched by label; two files of one unit each are matched whatever their labels.
std::vector<Row> compare_files(const ResultFile& a, const ResultFile& b,
                               std::vector<StackDifference>& diffs) {
  std::vector<Row> rows;
  auto clocks = [&](const Unit& ua, const Unit& ub, const std::string& label) {
    // Sweep points carry their own NVML means; a run's are the root /summary's (in diff_stack).
    if (a.kind == "sweep") diff_summary_attrs(ua.summary, ub.summary, label + ": ", diffs);
  };
  if (a.units.size() == 1 && b.units.size() == 1) {
    const Unit& ua = a.units.front();
    const Unit& ub = b.units.front();
    const std::string label = ua.label == ub.label ? ua.label : ua.label + " vs " + ub.label;
    compare_units(ua, ub, label, rows);
    clocks(ua, ub, label);
    sort_stack_differences(diffs);
    return rows;
  }
  for (const Unit& ua : a.units) {
    const auto ub = std::find_if(b.units.begin(), b.units.end(),
                                 [&](const Unit& u) { return u.label == ua.label; });
    if (ub == b.units.end()) {
      rows.push_back({ua.label, "", {}, false, "only in A", "", "", "", ""});
      continue;
    }
    compare_units(ua, *ub, ua.label, rows);
    clocks(ua, *ub, ua.label);
  }
  for (const Unit& ub : b.units)
    if (std::none_of(a.units.begin(), a.units.end(),
                     [&](const Unit& u) { return u.label == ub.label; }))
      rows.push_back({ub.label, "", {}, false, "only in B", "", "", "", ""});
  sort_stack_differences(diffs);
  return rows;
}

// The output checksums of the units compare_files matches: (label, A's, B's); "" where a
// unit has none (files written before it, collectives).
struct ChecksumRow {
  std::string unit, a, b;
  const char* verdict() const {
    return a.empty() || b.empty() ? "absent" : a == b ? "same" : "differs";
  }
};

std::vector<ChecksumRow> checksum_rows(const ResultFile& a, const ResultFile& b) {
  auto sum = [](const Unit& u) { return text_attr(u.summary, "output_checksum", ""); };
  std::vector<ChecksumRow> rows;
  if (a.units.size() == 1 && b.units.size() == 1) {
    const Unit& ua = a.units.front();
    const Unit& ub = b.units.front();
    rows.push_back(
        {ua.label == ub.label ? ua.label : ua.label + " vs " + ub.label, sum(ua), sum(ub)});
    return rows;
  }
  for (const Unit& ua : a.units)
    for (const Unit& ub : b.units)
      if (ub.label == ua.label) rows.push_back({ua.label, sum(ua), sum(ub)});
  return rows;
}

// One line: the checksums that differ (each with both values), else how many are the same.
std::string checksums_text(const std::vector<ChecksumRow>& rows) {
  std::vector<std::string> differ;
  size_t same = 0, absent = 0;
  for (const ChecksumRow& r : rows) {
    const std::string verdict = r.verdict();
    if (verdict == "differs") differ.push_back(r.unit + " (A " + r.a + ", B " + r.b + ")");
    same += verdict == "same";
    absent += verdict == "absent";
  }
  std::string text = "output checksums (" + std::string(kOutputChecksumAlgorithm) + "): ";
  if (!differ.empty())
    text += std::to_string(differ.size()) + " differ: " + join(differ, "; ");
  else if (same > 0)
    text += "identical (" + std::to_string(same) + " of " + std::to_string(rows.size()) + ")";
  else
    text += "not recorded";
  if (absent > 0 && absent < rows.size())
    text += "; " + std::to_string(absent) +
            " without a checksum in A or B (failed, or written before checksums)";
  return text;
}

// ---- output ----

struct CompareOptions {
  std::string a, b;
  std::string json, markdown;
  double fail_above_pct = 0; // 0: no gate
};

std::string pct(double fraction) {
  if (!std::isfinite(fraction)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", 100 * fraction);
  return buf;
}

std::string us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", ns / 1e3);
  return buf;
}

const char* unit_heading(const std::string& kind) {
  if (kind == "sweep") return "point";
  if (kind == "collectives") return "collective";
  return "overlap";
}

std::string rule_text() {
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "change = B median / A median - 1; %.0f %% interval: bootstrap of the difference of "
      "medians (%d resamples of each side, mt19937_64 seed %llu); moved = the interval "
      "excludes 0 and |change| > noise = max((p75-p25)/p50 of A, of B, %.0f %%); no verdict "
      "under %zu samples a side",
      100 * kConfidence, kBootstrapResamples, static_cast<unsigned long long>(kBootstrapSeed),
      100 * kNoiseFloor, kMinSamples);
  return buf;
}

std::vector<std::string> split_rule(const std::string& rule) {
  std::vector<std::string> clauses;
  size_t start = 0;
  for (size_t end; (end = rule.find("; ", start)) != std::string::npos; start = end + 2)
    clauses.push_back(rule.substr(start, end - start));
  clauses.push_back(rule.substr(start));
  return clauses;
}

void print_stack(std::ostream& out, const std::vector<StackDifference>& diffs) {
  std::set<StackLayer> layers;
  std::vector<std::string> ignored;
  for (const StackDifference& d : diffs)
    if (d.layer == StackLayer::not_compared)
      ignored.push_back(std::string(key_source_name(d.source)) + " " + d.key);
    else
      layers.insert(d.layer);
  out << "\nstack: "
      << (layers.empty() ? "no layer differs" : std::to_string(layers.size()) + " layer(s) differ")
      << "\n";
  StackLayer shown = StackLayer::not_compared;
  for (const StackDifference& d : diffs) {
    if (d.layer == StackLayer::not_compared) continue;
    if (d.layer != shown) out << "  [" << stack_layer_title(d.layer) << "]\n";
    shown = d.layer;
    const std::string key = std::string(key_source_name(d.source)) + " " + d.key;
    if (key.size() + d.a.size() + d.b.size() < 90) {
      out << "    " << key << ": " << d.a << " -> " << d.b << "\n";
    } else {
      out << "    " << key << "\n      A: " << d.a << "\n      B: " << d.b << "\n";
    }
  }
  if (ignored.empty()) return;
  out << "  not compared (run identity, " << ignored.size() << " key(s) differ):";
  size_t column = 100;
  for (size_t i = 0; i < ignored.size(); ++i) {
    const std::string word = ignored[i] + (i + 1 < ignored.size() ? "," : "");
    if (column + word.size() + 1 > 100) out << "\n   ", column = 3;
    out << " " << word;
    column += word.size() + 1;
  }
  out << "\n";
}

// Console lines end without padding: the verdict is the last column when there is no ceiling.
void put_line(std::ostream& out, std::string line) {
  line.erase(line.find_last_not_of(' ') + 1);
  out << line << "\n";
}

void print_rows(std::ostream& out, const std::vector<Row>& rows, const std::string& kind,
                bool show_unit) {
  size_t unit_w = std::string(unit_heading(kind)).size(), item_w = 4;
  for (const Row& r : rows)
    unit_w = std::max(unit_w, r.unit.size()), item_w = std::max(item_w, r.item.size());
  const int uw = show_unit ? static_cast<int>(unit_w) : 0;
  const char* gap = show_unit ? "  " : "";
  const bool ceilings = kind != "collectives";
  char line[512];
  std::snprintf(line, sizeof(line), "%-*s%s%-*s %12s %12s %9s %22s %7s  %-9s%s", uw,
                show_unit ? unit_heading(kind) : "", gap, static_cast<int>(item_w),
                kind == "collectives" ? "size" : "item", "A p50 (us)", "B p50 (us)", "change",
                "95% interval", "noise", "verdict", ceilings ? "  ceiling A / B" : "");
  put_line(out, line);
  for (const Row& r : rows) {
    const MedianChange& c = r.change;
    const std::string interval =
        c.has_interval ? "[" + pct(c.ci_low) + ", " + pct(c.ci_high) + "]" : "-";
    const std::string a = c.a_p50_ns > 0 ? us(c.a_p50_ns) : "-";
    const std::string b = c.b_p50_ns > 0 ? us(c.b_p50_ns) : "-";
    const std::string noise = c.has_interval ? pct(c.noise).substr(1) : "-";
    std::snprintf(line, sizeof(line), "%-*s%s%-*s %12s %12s %9s %22s %7s  %-9s", uw,
                  show_unit ? r.unit.c_str() : "", gap, static_cast<int>(item_w), r.item.c_str(),
                  a.c_str(), b.c_str(), r.compared ? pct(c.change).c_str() : "-", interval.c_str(),
                  noise.c_str(), verdict_of(r));
    std::string text = line;
    // A collective's ceiling names the scope of the roof that bounds it: "interconnect (inter)".
    auto ceiling = [](const std::string& c, const std::string& scope) {
      return (c.empty() ? "-" : c) + (scope.empty() ? "" : " (" + scope + ")");
    };
    if (ceilings && !r.item.empty())
      text += "  " + ceiling(r.ceiling_a, r.scope_a) + " / " + ceiling(r.ceiling_b, r.scope_b);
    if (!r.note.empty()) text += "  (" + r.note + ")";
    put_line(out, text);
  }
}

std::string layers_text(const std::vector<StackDifference>& diffs, bool ids) {
  std::vector<std::string> names;
  StackLayer last = StackLayer::not_compared;
  for (const StackDifference& d : diffs)
    if (d.layer != StackLayer::not_compared && d.layer != last) {
      names.push_back(ids ? stack_layer_id(d.layer) : stack_layer_title(d.layer));
      last = d.layer;
    }
  return join(names, ids ? "," : ", ");
}

std::string row_name(const Row& r, bool show_unit) {
  return show_unit ? r.unit + (r.item.empty() ? "" : " " + r.item) : r.item;
}

// Returns output_status() of the files written.
int write_outputs(const CompareOptions& o, const ResultFile& a, const ResultFile& b,
                  const std::vector<StackDifference>& diffs, const std::vector<Row>& rows,
                  const std::vector<ChecksumRow>& checksums, const Attrs& outcome) {
  std::vector<std::pair<std::string, Attrs>> attrs = {
      {"compare", outcome},
      {"a",
       {{"path", a.path},
        {"kind", a.kind},
        {"created_utc", text_attr(a.data.root, "created_utc", "")},
        {"git_sha", text_attr(a.data.root, "git_sha", "")},
        {"argv", text_attr(a.data.root, "argv", "")}}},
      {"b",
       {{"path", b.path},
        {"kind", b.kind},
        {"created_utc", text_attr(b.data.root, "created_utc", "")},
        {"git_sha", text_attr(b.data.root, "git_sha", "")},
        {"argv", text_attr(b.data.root, "argv", "")}}}};
  std::vector<std::string> layer, source, key, va, vb;
  for (const StackDifference& d : diffs) {
    layer.push_back(stack_layer_id(d.layer)), source.push_back(key_source_name(d.source));
    key.push_back(d.key), va.push_back(d.a), vb.push_back(d.b);
  }
  std::vector<std::string> unit, item, verdict, note, ca, cb, sa, sb;
  std::vector<int64_t> na, nb;
  std::vector<double> pa, pb, change, lo, hi, noise;
  for (const Row& r : rows) {
    const MedianChange& c = r.change;
    const double none = NAN;
    unit.push_back(r.unit), item.push_back(r.item), verdict.push_back(verdict_of(r)),
        note.push_back(r.note);
    ca.push_back(r.ceiling_a), cb.push_back(r.ceiling_b), sa.push_back(r.scope_a),
        sb.push_back(r.scope_b);
    na.push_back(static_cast<int64_t>(c.a_count)), nb.push_back(static_cast<int64_t>(c.b_count));
    pa.push_back(c.a_p50_ns), pb.push_back(c.b_p50_ns);
    change.push_back(r.compared ? 100 * c.change : none);
    lo.push_back(c.has_interval ? 100 * c.ci_low : none),
        hi.push_back(c.has_interval ? 100 * c.ci_high : none);
    noise.push_back(c.has_interval ? 100 * c.noise : none);
  }
  std::vector<std::string> sum_unit, sum_a, sum_b, sum_verdict;
  for (const ChecksumRow& r : checksums)
    sum_unit.push_back(r.unit), sum_a.push_back(r.a), sum_b.push_back(r.b),
        sum_verdict.push_back(r.verdict());
  const std::vector<std::pair<std::string, Table>> tables = {
      {"stack", {{"layer", layer}, {"source", source}, {"key", key}, {"a", va}, {"b", vb}}},
      {"timings",
       {{"unit", unit},
        {"item", item},
        {"a_samples", na},
        {"b_samples", nb},
        {"a_p50_ns", pa},
        {"b_p50_ns", pb},
        {"change_pct", change},
        {"ci_low_pct", lo},
        {"ci_high_pct", hi},
        {"noise_pct", noise},
        {"verdict", verdict},
        {"ceiling_a", ca},
        {"ceiling_b", cb},
        {"scope_a", sa},
        {"scope_b", sb},
        {"note", note}}},
      {"checksums", {{"unit", sum_unit}, {"a", sum_a}, {"b", sum_b}, {"verdict", sum_verdict}}}};
  OutputFile json(o.json, "--json"), markdown(o.markdown, "--markdown");
  std::vector<const OutputFile*> files;
  if (!o.json.empty()) {
    json.write([&](const std::string& path) { write_json(path, attrs, tables); });
    files.push_back(&json);
  }
  if (!o.markdown.empty()) {
    markdown.write([&](const std::string& path) {
      write_markdown(path, "ridgeline compare: " + a.path + " vs " + b.path, attrs, tables);
    });
    files.push_back(&markdown);
  }
  return output_status(files);
}

// Rank 0's whole command; returns the exit code.
int compare_command(const CompareOptions& o, const std::vector<std::string>& config_files) {
  // The files asked for are checked (a probe file created beside each, none of them an input)
  // before anything is read.
  std::vector<NamedFile> inputs = {{o.a, "file A"}, {o.b, "file B"}};
  for (const std::string& config : config_files)
    inputs.push_back({config, "--config"});
  const std::vector<std::string> problems =
      file_problems({{o.json, "--json"}, {o.markdown, "--markdown"}}, inputs);
  if (!problems.empty()) throw UsageError(join(problems, "; "));
  const ResultFile a = load(o.a);
  const ResultFile b = load(o.b);
  if (a.kind != b.kind)
    throw UsageError(a.path + " is a " + a.kind + " file and " + b.path + " a " + b.kind +
                     " file: compare needs two files of the same kind");
  std::vector<StackDifference> diffs = diff_stack(a.data, b.data);
  const std::vector<Row> rows = compare_files(a, b, diffs);
  const bool show_unit = a.kind != "run" || a.units.size() > 1 || b.units.size() > 1;

  std::ostream& out = std::cout;
  out << "ridgeline compare (" << a.kind << " files)\n";
  for (const ResultFile* f : {&a, &b})
    out << "  " << (f == &a ? "A" : "B") << ": " << f->path << "  ("
        << text_attr(f->data.root, "created_utc", "?") << ", "
        << text_attr(f->data.root, "git_sha", "?") << ")\n";
  print_stack(out, diffs);
  // The rule, one clause a line: the same text as the JSON's "rule".
  out << "\ntimings, B against A:\n";
  for (const std::string& clause : split_rule(rule_text()))
    out << "  " << clause << "\n";
  print_rows(out, rows, a.kind, show_unit);
  if (std::any_of(rows.begin(), rows.end(),
                  [](const Row& r) { return r.note.rfind("median only", 0) == 0; }))
    out << "per-op intervals need timelines: these points kept only their medians (sweep "
           "--keep-timelines keeps them)\n";
  const std::vector<ChecksumRow> checksums = checksum_rows(a, b);
  if (a.kind != "collectives") out << checksums_text(checksums) << "\n";

  std::vector<std::string> moved, beyond;
  for (const Row& r : rows) {
    if (!r.change.moved) continue;
    moved.push_back(row_name(r, show_unit) + " " + pct(r.change.change));
    if (o.fail_above_pct > 0 && std::fabs(r.change.change) * 100 > o.fail_above_pct)
      beyond.push_back(row_name(r, show_unit));
  }
  const size_t compared = static_cast<size_t>(
      std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.change.has_interval; }));
  std::string moved_text =
      moved.empty() ? "nothing"
                    : join(std::vector<std::string>(
                               moved.begin(), moved.begin() + std::min<size_t>(moved.size(), 12)),
                           ", ");
  if (moved.size() > 12) moved_text += ", ... (" + std::to_string(moved.size()) + " in all)";
  const std::string layers = layers_text(diffs, false);
  out << "\nmoved (" << moved.size() << " of " << compared << " with a verdict): " << moved_text
      << "\nstack layers that differ: " << (layers.empty() ? "none" : layers) << "\n";
  const int code = beyond.empty() ? 0 : 3;
  if (o.fail_above_pct > 0)
    out << "--fail-above " << o.fail_above_pct << "%: "
        << (beyond.empty() ? "nothing moved beyond it"
                           : std::to_string(beyond.size()) + " moved beyond it (exit 3)")
        << "\n";

  Attrs outcome = {{"rule", rule_text()},
                   {"resamples", static_cast<int64_t>(kBootstrapResamples)},
                   {"seed", static_cast<int64_t>(kBootstrapSeed)},
                   {"confidence", kConfidence},
                   {"noise_floor_pct", 100 * kNoiseFloor},
                   {"min_samples", static_cast<int64_t>(kMinSamples)},
                   {"with_verdict", static_cast<int64_t>(compared)},
                   {"moved", static_cast<int64_t>(moved.size())},
                   {"layers_differ", layers_text(diffs, true)},
                   {"fail_above_pct", o.fail_above_pct},
                   {"beyond_fail_above", static_cast<int64_t>(beyond.size())},
                   {"exit_code", static_cast<int64_t>(code)},
                   {"checksums_differ",
                    static_cast<int64_t>(
                        std::count_if(checksums.begin(), checksums.end(), [](const ChecksumRow& r) {
                          return std::string(r.verdict()) == "differs";
                        }))}};
  // A gate that tripped outranks a file written elsewhere (kExitResultsMoved).
  const int files = write_outputs(o, a, b, diffs, rows, checksums, outcome);
  return code != 0 ? code : files;
}

} // namespace

void setup_compare_command(CLI::App& app, CommandAction& action) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "What changed between two run, sweep or collectives files: the stack layer by layer "
      "(hardware, driver, libraries, build, environment, clocks, configuration) and each "
      "timing's median with a bootstrap interval and a verdict (docs/COMPARE.md)");
  cmd->add_option("a", o->a, "the baseline file (A)")->required()->check(regular_file());
  cmd->add_option("b", o->b, "the file compared with it (B)")->required()->check(regular_file());
  cmd->add_option("--json", o->json, "Also write the comparison as JSON here");
  cmd->add_option("--markdown", o->markdown, "Also write the comparison as markdown here");
  cmd->add_option("--fail-above", o->fail_above_pct,
                  "Exit 3 when the step, an op, a point or a message size moved (slower or faster) "
                  "by more than this many percent")
      ->check(number_above(0));
  cmd->callback([o, &action] {
    action = [o](CommandContext& ctx) {
      // Rank 0 reads and prints; the others wait for its exit code (as `report` does).
      int code = 0;
      if (ctx.mpi.rank() == 0) {
        try {
          code = compare_command(*o, ctx.config_files);
        } catch (const std::exception& e) {
          std::cerr << "ridgeline compare: " << e.what() << "\n";
          code = dynamic_cast<const UsageError*>(&e) ? 2 : 1;
        }
      }
      RIDGELINE_CHECK(MPI_Bcast(&code, 1, MPI_INT, 0, ctx.mpi.world()));
      return code;
    };
  });
}

} // namespace ridgeline
