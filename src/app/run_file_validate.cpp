// The run file's validator (see run_file.hpp): structure, ranks, links, topology, config,
// points and sweep; the results it holds are checked in run_file_validate_results.cpp.
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

namespace ridgeline {
namespace run_file_detail {

bool require_object(hid_t file, const std::string& path, const char* what,
                    std::vector<std::string>& problems) {
  if (h5::exists(file, path)) return true;
  problems.push_back(path + ": missing " + what);
  return false;
}

void require_attrs(const Attrs& attrs, const std::string& where,
                   const std::vector<std::string>& keys, std::vector<std::string>& problems) {
  for (const std::string& key : keys)
    if (find_attr(attrs, key) == nullptr)
      problems.push_back(where + ": missing attribute '" + key + "'");
}

// output_checksum (added within schema version 1, absent from older files): 16 lowercase hex
// digits, with the name of its algorithm.
void validate_checksum(const Attrs& attrs, const std::string& where,
                       std::vector<std::string>& problems) {
  const AttrValue* sum = find_attr(attrs, "output_checksum");
  const AttrValue* algorithm = find_attr(attrs, "output_checksum_algorithm");
  if (sum == nullptr && algorithm == nullptr) return;
  if (sum == nullptr) {
    problems.push_back(
        where + ": missing attribute 'output_checksum' (output_checksum_algorithm is given)");
  } else {
    const auto* text = std::get_if<std::string>(sum);
    const bool hex = text != nullptr && text->size() == 16 &&
                     std::all_of(text->begin(), text->end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
    if (!hex)
      problems.push_back(where +
                         ": output_checksum must be 16 lowercase hexadecimal digits, found '" +
                         attr_to_string(*sum) + "'");
  }
  if (algorithm == nullptr)
    problems.push_back(where + ": missing attribute 'output_checksum_algorithm'");
  else if (*algorithm != AttrValue(std::string(kOutputChecksumAlgorithm)))
    problems.push_back(where + ": output_checksum_algorithm '" + attr_to_string(*algorithm) +
                       "' is not " + kOutputChecksumAlgorithm);
}

} // namespace run_file_detail

using namespace run_file_detail;

namespace {

void validate_stack(hid_t file, std::vector<std::string>& problems) {
  h5::Handle stack = h5::open_group(file, "/stack");
  const Attrs stack_attrs = h5::read_attrs(stack.id());
  require_attrs(stack_attrs, "/stack", {std::begin(kStackAttrs), std::end(kStackAttrs)}, problems);
  // cuDNN's plans are recorded only beside the version of the cuDNN that chose them.
  if (find_attr(stack_attrs, "cudnn_plans") != nullptr &&
      find_attr(stack_attrs, "cudnn") == nullptr)
    problems.push_back("/stack: cudnn_plans without cudnn (the loaded cuDNN version)");
  if (!require_object(file, "/stack/env", "dataset", problems)) return;
  const h5::Table env = h5::read_table(file, "/stack/env");
  column<std::string>(env, "name", "/stack/env");
  column<std::string>(env, "value", "/stack/env");
}

// The op table at `path` (/ops, or a point's); returns the number of ops (the valid op_id range).
int64_t validate_ops(hid_t file, const std::string& path, std::vector<std::string>& problems) {
  const h5::Table table = h5::read_table(file, path);
  const auto& ids = column<int64_t>(table, "id", path);
  column<std::string>(table, "name", path);
  const auto& kinds = column<std::string>(table, "kind", path);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string row = path + ": row " + std::to_string(i) + ": ";
    if (ids[i] != static_cast<int64_t>(i))
      problems.push_back(row + "id " + std::to_string(ids[i]) + ", expected " + std::to_string(i));
    try {
      parse_op_kind(kinds[i]);
    } catch (const Error&) {
      problems.push_back(row + "unknown kind '" + kinds[i] + "'");
    }
  }
  return static_cast<int64_t>(ids.size());
}

// The `rows` attribute of a rank's group (the rows its timeline must have), or -1 when absent
// (files written before it).
int64_t recorded_rows(hid_t file, const std::string& rank_group) {
  const Attrs attrs = h5::read_attrs(h5::open_group(file, rank_group).id());
  const AttrValue* rows = find_attr(attrs, "rows");
  return rows != nullptr && std::holds_alternative<int64_t>(*rows) ? std::get<int64_t>(*rows) : -1;
}

void validate_timeline(hid_t file, const std::string& path, int64_t op_count, int64_t expected_rows,
                       std::vector<std::string>& problems) {
  if (!require_object(file, path, "dataset", problems)) return;
  const std::vector<TimelineRecord> rows = h5::read_timeline(file, path);
  if (expected_rows >= 0 && static_cast<int64_t>(rows.size()) != expected_rows)
    problems.push_back(path + ": " + std::to_string(rows.size()) + " rows, the file recorded " +
                       std::to_string(expected_rows) + " (incomplete)");
  size_t found = 0;
  auto report = [&](size_t row, const std::string& what) {
    if (++found <= kMaxRowProblems)
      problems.push_back(path + ": row " + std::to_string(row) + ": " + what);
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const TimelineRecord& row = rows[i];
    if (row.op_id < 0 || (op_count >= 0 && row.op_id >= op_count))
      report(i, "op_id " + std::to_string(row.op_id) + " outside [0, " +
                    (op_count >= 0 ? std::to_string(op_count) : "?") + ")");
    if (row.t_start_ns < 0) report(i, "t_start_ns " + std::to_string(row.t_start_ns) + " < 0");
    for (const auto& [name, value] : {std::pair<const char*, double>{"flops", row.flops},
                                      {"hbm_bytes", row.hbm_bytes},
                                      {"comm_bytes", row.comm_bytes}})
      if (!(std::isfinite(value) && value >= 0))
        report(i, std::string(name) + " is " + number_text(value) + ", expected finite >= 0");
    if (row.t_end_ns < row.t_start_ns) report(i, "t_end_ns < t_start_ns");
    if (row.lane >= kLaneCount) report(i, "lane " + std::to_string(row.lane) + " not in {0, 1, 2}");
    if (row.warmup > 1) report(i, "warmup " + std::to_string(row.warmup) + " not in {0, 1}");
  }
  if (found > kMaxRowProblems)
    problems.push_back(path + ": " + std::to_string(found - kMaxRowProblems) +
                       " more row problems");
}

// Optional NVML samples of a rank's GPU: the six fields, times in order.
void validate_samples(hid_t file, const std::string& path, std::vector<std::string>& problems) {
  if (!h5::exists(file, path)) return;
  const h5::Table table = h5::read_table(file, path);
  for (const char* field : {"t_ns", "sm_clock_mhz", "mem_clock_mhz", "power_w", "power_avg_w",
                            "temp_c", "clock_event_reasons"})
    if (h5::find_column(table, field) == nullptr)
      problems.push_back(path + ": missing field " + field);
  const h5::Column* t = h5::find_column(table, "t_ns");
  if (t == nullptr) return;
  const auto* values = std::get_if<std::vector<int64_t>>(&t->values);
  if (values == nullptr) {
    problems.push_back(path + ": t_ns is not an integer field");
    return;
  }
  for (size_t i = 1; i < values->size(); ++i)
    if ((*values)[i] < (*values)[i - 1]) {
      problems.push_back(path + ": t_ns decreases at row " + std::to_string(i));
      return;
    }
}

// /ranks holds exactly the groups 0 .. world_size-1 (world_size < 0: unknown, not checked).
// Objects in `unreadable` (links into missing or foreign files, already reported) are skipped.
void validate_ranks(hid_t file, int64_t world_size, int64_t op_count,
                    const std::set<std::string>& unreadable, std::vector<std::string>& problems) {
  h5::Handle ranks = h5::open_group(file, "/ranks");
  const std::vector<std::string> children = h5::list_children(ranks.id());
  std::set<std::string> expected;
  for (int64_t rank = 0; rank < world_size; ++rank)
    expected.insert(std::to_string(rank));
  for (const std::string& name : expected)
    if (std::find(children.begin(), children.end(), name) == children.end())
      problems.push_back("/ranks/" + name + ": missing group");
  for (const std::string& name : children) {
    if (world_size >= 0 && expected.count(name) == 0) {
      problems.push_back("/ranks/" + name + ": unexpected (world_size is " +
                         std::to_string(world_size) + ")");
      continue;
    }
    const std::string group = "/ranks/" + name;
    check_section(problems, [&] {
      if (unreadable.count(group + "/timeline") == 0)
        validate_timeline(file, group + "/timeline", op_count, recorded_rows(file, group),
                          problems);
      if (unreadable.count(group + "/samples") == 0)
        validate_samples(file, group + "/samples", problems);
    });
  }
}

// Per-node layout: every external link below /ranks and /points/<k>/ranks must lead into a file
// that exists (relative names: beside this one), belongs to this file set (root attribute
// `file_set`, new at every write) and holds the linked object. Returns the links that cannot be
// followed; each missing or foreign file is reported once.
std::set<std::string> validate_links(hid_t file, const std::string& path, const Attrs& root,
                                     std::vector<std::string>& problems) {
  std::set<std::string> unreadable;
  const AttrValue* set_attr = find_attr(root, "file_set");
  if (set_attr == nullptr)
    problems.emplace_back("/: missing attribute 'file_set' (per-node layout)");
  const std::string file_set = set_attr ? attr_to_string(*set_attr) : "";
  std::vector<std::string> bases;
  if (h5::exists(file, "/ranks")) bases.emplace_back("/ranks");
  if (h5::exists(file, "/points"))
    for (const std::string& k : h5::list_children(h5::open_group(file, "/points").id()))
      if (h5::exists(file, "/points/" + k + "/ranks")) bases.push_back("/points/" + k + "/ranks");
  // Linked file -> (link path, object path) pairs, in the order met.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> targets;
  for (const std::string& base : bases)
    for (const std::string& rank : h5::list_children(h5::open_group(file, base).id())) {
      h5::Handle group = h5::open_group(file, base + "/" + rank);
      for (const std::string& name : h5::list_children(group.id())) {
        const std::optional<h5::ExternalLink> link = h5::external_link(group.id(), name);
        if (!link) continue;
        auto it = std::find_if(targets.begin(), targets.end(),
                               [&](const auto& t) { return t.first == link->file; });
        if (it == targets.end()) it = targets.insert(targets.end(), {link->file, {}});
        it->second.emplace_back(base + "/" + rank + "/" + name, link->object);
      }
    }
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  for (const auto& [name, links] : targets) {
    const std::filesystem::path target =
        std::filesystem::path(name).is_absolute() ? std::filesystem::path(name) : directory / name;
    const std::string first =
        links.front().first +
        (links.size() > 1 ? " (and " + std::to_string(links.size() - 1) + " more links)" : "");
    std::string problem = open_problem(target.string());
    if (problem.empty()) {
      try {
        h5::Handle part = h5::open_file_read(target.string());
        const Attrs attrs = h5::read_attrs(part.id());
        const AttrValue* part_set = find_attr(attrs, "file_set");
        if (part_set == nullptr || attr_to_string(*part_set) != file_set) {
          problem = "linked file '" + name + "' belongs to another write (file_set " +
                    (part_set ? attr_to_string(*part_set) : std::string("absent")) + ", expected " +
                    file_set + ")";
        } else {
          for (const auto& [link, object] : links)
            if (!h5::exists(part.id(), object)) {
              problems.push_back(link + ": linked file '" + name + "' has no " + object);
              unreadable.insert(link);
            }
          continue;
        }
      } catch (const std::exception& e) {
        problem = "linked file '" + name + "': " + e.what();
      }
    } else {
      problem = "linked file '" + name + "' " +
                (std::filesystem::exists(target) ? problem.substr(target.string().size() + 2)
                                                 : "does not exist");
    }
    problems.push_back(first + ": " + problem);
    for (const auto& link : links)
      unreadable.insert(link.first);
  }
  return unreadable;
}

void validate_topology(hid_t file, int64_t world_size, std::vector<std::string>& problems) {
  h5::Handle topology = h5::open_group(file, "/topology");
  for (const std::string& key : h5::list_children(topology.id()))
    check_section(problems, [&] {
      const size_t size = h5::column_size(h5::read_dataset(topology.id(), key));
      if (world_size >= 0 && size != static_cast<size_t>(world_size))
        problems.push_back("/topology/" + key + ": " + std::to_string(size) +
                           " values, expected world_size " + std::to_string(world_size));
    });
}

// The rank -> GPU map in /topology: element r is rank r, each (host, local_rank) is one rank,
// a rank's device is one it could see, and the ranks of a host on one GPU (by UUID, else PCI
// bus id) are as many as each one's gpu_shared_by says; more than one only where the job was
// allowed to share GPUs (/config allow_shared_gpu; files written before that key are not
// checked for sharing).
void validate_gpu_map(hid_t file, std::vector<std::string>& problems) {
  h5::Handle topology = h5::open_group(file, "/topology");
  const auto has = [&](const char* key) { return h5::exists(topology.id(), key); };
  if (!has("rank") || !has("host") || !has("local_rank")) return;
  const auto ranks = h5::read_vector<int64_t>(topology.id(), "rank");
  const auto hosts = h5::read_vector<std::string>(topology.id(), "host");
  const auto local = h5::read_vector<int64_t>(topology.id(), "local_rank");
  const size_t n = std::min({ranks.size(), hosts.size(), local.size()});
  std::map<std::pair<std::string, int64_t>, size_t> seats;
  for (size_t r = 0; r < n; ++r) {
    if (ranks[r] != static_cast<int64_t>(r))
      problems.push_back("/topology/rank: element " + std::to_string(r) + " is " +
                         std::to_string(ranks[r]));
    if (const auto [it, fresh] = seats.emplace(std::make_pair(hosts[r], local[r]), r); !fresh)
      problems.push_back("/topology: ranks " + std::to_string(it->second) + " and " +
                         std::to_string(r) + " are both local rank " + std::to_string(local[r]) +
                         " of host " + hosts[r]);
  }
  if (!has("device")) return;
  const auto devices = h5::read_vector<int64_t>(topology.id(), "device");
  if (has("gpus_visible")) {
    const auto visible = h5::read_vector<int64_t>(topology.id(), "gpus_visible");
    for (size_t r = 0; r < std::min(n, std::min(devices.size(), visible.size())); ++r)
      if (devices[r] >= visible[r])
        problems.push_back("/topology: rank " + std::to_string(r) + " uses device " +
                           std::to_string(devices[r]) + " but saw " + std::to_string(visible[r]) +
                           " GPUs");
  }
  std::vector<std::string> ids(n);
  for (const char* key : {"gpu_pci_bus_id", "gpu_uuid"})
    if (has(key)) {
      const auto values = h5::read_vector<std::string>(topology.id(), key);
      for (size_t r = 0; r < std::min(n, values.size()); ++r)
        if (!values[r].empty()) ids[r] = values[r];
    }
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_gpu;
  for (size_t r = 0; r < std::min(n, devices.size()); ++r)
    if (devices[r] >= 0 && !ids[r].empty()) by_gpu[{hosts[r], ids[r]}].push_back(r);
  if (has("gpu_shared_by")) {
    const auto shared_by = h5::read_vector<int64_t>(topology.id(), "gpu_shared_by");
    for (const auto& [gpu, members] : by_gpu)
      for (size_t r : members)
        if (r < shared_by.size() && shared_by[r] != static_cast<int64_t>(members.size()))
          problems.push_back("/topology: rank " + std::to_string(r) + " says " +
                             std::to_string(shared_by[r]) + " ranks share its GPU " + gpu.second +
                             " but " + std::to_string(members.size()) + " ranks of host " +
                             gpu.first + " use it");
  }
  const Attrs config = h5::read_attrs(h5::open_group(file, "/config").id());
  const AttrValue* allowed = find_attr(config, "allow_shared_gpu");
  if (allowed == nullptr) return;
  const auto* flag = std::get_if<int64_t>(allowed);
  if (flag != nullptr && *flag != 0) return;
  for (const auto& [gpu, members] : by_gpu)
    if (members.size() > 1) {
      std::string list;
      for (size_t r : members)
        list += (list.empty() ? "" : ", ") + std::to_string(r);
      problems.push_back("/topology: ranks " + list + " of host " + gpu.first + " share GPU " +
                         gpu.second + " but /config allow_shared_gpu is 0");
    }
}

// The /config attributes a reader acts on, with their types: a wrong type must not turn into
// a default downstream (a tp stored as text read as tp = 1). Values are not ranged here: 0 and
// -1 stand for "the default" in a sweep's base configuration.
struct ConfigKey {
  const char* name;
  bool integer; ///< else text
};
constexpr ConfigKey kConfigKeys[] = {
    {"tp", true},       {"pp", true},         {"dp", true},           {"batch", true},
    {"seq", true},      {"layers", true},     {"hidden", true},       {"heads", true},
    {"kv_heads", true}, {"ffn_hidden", true}, {"microbatches", true}, {"iters", true},
    {"warmup", true},   {"context", true},    {"phase", false},       {"dtype", false},
    {"overlap", false}, {"backend", false},   {"transport", false}};

void validate_config(const Attrs& attrs, const std::string& where,
                     std::vector<std::string>& problems) {
  for (const ConfigKey& key : kConfigKeys) {
    const AttrValue* value = find_attr(attrs, key.name);
    if (value == nullptr) continue;
    const bool text = std::holds_alternative<std::string>(*value);
    if (key.integer && !std::holds_alternative<int64_t>(*value))
      problems.push_back(where + ": " + key.name + " must be an integer, found " +
                         (text ? "the string '" + attr_to_string(*value) + "'"
                               : "the number " + attr_to_string(*value)));
    if (!key.integer && !text)
      problems.push_back(where + ": " + key.name + " must be a string, found " +
                         attr_to_string(*value));
  }
}

// Every /points/<k>: its config; a summary as /summary's unless the point failed (status
// "failed: ..."); where its ops were kept, the op table and a timeline per rank, as /ops and
// /ranks/<r>/timeline (a timeline of a node file that cannot be opened is reported once,
// elsewhere).
void validate_points(hid_t file, int64_t world_size, const std::set<std::string>& unreadable,
                     bool predicted_file, std::vector<std::string>& problems) {
  h5::Handle points = h5::open_group(file, "/points");
  for (const std::string& k : h5::list_children(points.id())) {
    const std::string base = "/points/" + k;
    if (require_object(file, base + "/config", "group", problems))
      validate_config(h5::read_attrs(h5::open_group(file, base + "/config").id()), base + "/config",
                      problems);
    const Attrs attrs = h5::read_attrs(h5::open_group(file, base).id());
    const AttrValue* status = find_attr(attrs, "status");
    // A failed point has no summary, nor has one an incomplete sweep had not run yet.
    const bool failed = status != nullptr && (attr_to_string(*status).rfind("failed", 0) == 0 ||
                                              attr_to_string(*status) == "pending");
    const AttrValue* predicted = find_attr(attrs, "predicted");
    if (predicted_file && (predicted == nullptr || *predicted != AttrValue(int64_t{1})))
      problems.push_back(base + ": a point of a predicted file lacks predicted = 1");
    if (predicted != nullptr && *predicted == AttrValue(int64_t{1})) {
      // A predicted point measured nothing: its ops are in a prediction table, not a summary.
      if (h5::exists(file, base + "/summary"))
        problems.push_back(base + ": a predicted point holds a measured summary");
      if (!failed)
        check_section(problems, [&] {
          const std::string path = base + "/prediction";
          validate_fields(file,
                          {path.c_str(),
                           {"name", "kind", "ceiling", "interconnect_source"},
                           {},
                           {"instances", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns",
                            "efficiency", "time_ns"}},
                          problems);
        });
    } else if (!failed && require_object(file, base + "/summary", "group", problems)) {
      validate_summary(file, base, problems);
    }
    if (!h5::exists(file, base + "/ops")) continue;
    int64_t op_count = -1;
    check_section(problems, [&] { op_count = validate_ops(file, base + "/ops", problems); });
    for (int64_t r = 0; r < world_size; ++r) {
      const std::string group = base + "/ranks/" + std::to_string(r);
      if (unreadable.count(group + "/timeline") > 0) continue;
      check_section(problems, [&] {
        validate_timeline(file, group + "/timeline", op_count, recorded_rows(file, group),
                          problems);
      });
    }
  }
}

// Every repeat in /sweep/repeats, each ok point's medians inside their 95 % intervals (of
// finite, non-negative times), and each crossover's status one of kCrossoverStatuses.
void validate_sweep_repeats(hid_t file, const Attrs& attrs, std::vector<std::string>& problems) {
  require_attrs(attrs, "/sweep", {"interval"}, problems);
  for (const RoofTable& spec : kSweepRepeatTables)
    check_section(problems, [&] { validate_fields(file, spec, problems); });
  const h5::Table points = h5::read_table(file, "/sweep/points");
  const auto& status = column<std::string>(points, "status", "/sweep/points");
  const auto& repeats = column<int64_t>(points, "repeats", "/sweep/points");
  const bool complete = !marked_incomplete(attrs);
  for (size_t i = 0; i < status.size(); ++i) {
    if (status[i] == "ok" && repeats[i] < 1)
      problems.push_back("/sweep/points: row " + std::to_string(i) +
                         ": an ok point with no repeat");
    if (status[i] == "pending" && complete)
      problems.push_back("/sweep/points: row " + std::to_string(i) +
                         ": a point not run (pending) in a sweep marked complete");
  }
  const char* medians[] = {"step_p50", "compute", "hbm", "interconnect", "launch"};
  for (const char* m : medians) {
    const std::string base = m;
    const auto& mid = column<double>(points, (base + "_ns").c_str(), "/sweep/points");
    const auto& lo = column<double>(points, (base + "_lo_ns").c_str(), "/sweep/points");
    const auto& hi = column<double>(points, (base + "_hi_ns").c_str(), "/sweep/points");
    for (size_t i = 0; i < mid.size(); ++i) {
      if (status[i] != "ok") continue;
      if (!(lo[i] >= 0 && lo[i] <= mid[i] && mid[i] <= hi[i] && std::isfinite(hi[i])))
        problems.push_back("/sweep/points: row " + std::to_string(i) + ": " + base +
                           " must lie in its interval [lo, hi] of finite times >= 0, found " +
                           number_text(mid[i]) + " in [" + number_text(lo[i]) + ", " +
                           number_text(hi[i]) + "]");
    }
  }
  const h5::Table cross = h5::read_table(file, "/sweep/crossovers");
  if (row_count(cross) == 0) return;
  for (const std::string& s : column<std::string>(cross, "status", "/sweep/crossovers"))
    if (std::find(std::begin(kCrossoverStatuses), std::end(kCrossoverStatuses), s) ==
        std::end(kCrossoverStatuses))
      problems.push_back("/sweep/crossovers: unknown status '" + s + "'");
}

// Sweep files: the point and crossover tables, one /points group per row.
void validate_sweep(hid_t file, std::vector<std::string>& problems) {
  for (const RoofTable& spec : kSweepTables)
    check_section(problems, [&] { validate_fields(file, spec, problems); });
  if (!h5::exists(file, "/sweep/points")) return;
  const size_t rows = row_count(h5::read_table(file, "/sweep/points"));
  const size_t groups = h5::exists(file, "/points")
                            ? h5::list_children(h5::open_group(file, "/points").id()).size()
                            : 0;
  if (rows != groups)
    problems.push_back("/sweep/points: " + std::to_string(rows) + " rows but " +
                       std::to_string(groups) + " groups under /points");
  const Attrs attrs = h5::read_attrs(h5::open_group(file, "/sweep").id());
  require_attrs(attrs, "/sweep", {"axes", "points", "failed"}, problems);
  if (const AttrValue* axes = find_attr(attrs, "axes")) {
    const std::string* text = std::get_if<std::string>(axes);
    if (text == nullptr) problems.push_back("/sweep: axes must be a string");
    for (const std::string& axis : text ? split_by(*text, ',') : std::vector<std::string>{})
      if (!axis.empty() &&
          std::find_if(std::begin(kSweepAxes), std::end(kSweepAxes),
                       [&](const char* a) { return axis == a; }) == std::end(kSweepAxes))
        problems.push_back("/sweep: axes names '" + axis + "', which is not a sweep axis");
  }
  // Sweeps measured with repeats (the attribute `repeats`; earlier files measured once).
  if (find_attr(attrs, "repeats") != nullptr)
    check_section(problems, [&] { validate_sweep_repeats(file, attrs, problems); });
}

const char* const kIncomplete =
    "incomplete: the job ended before it finished (complete = 0); what it holds is "
    "valid but partial";

void validate_contents(hid_t file, const std::string& path, std::vector<std::string>& problems,
                       bool accept_incomplete) {
  Attrs root;
  check_section(problems, [&] { root = h5::read_attrs(file); });
  if (const AttrValue* master = find_attr(root, "part_of")) {
    problems.push_back("/: a node file of the per-node layout, part of '" +
                       attr_to_string(*master) + "': validate that file, which links this one");
    return;
  }
  require_attrs(root, "/", {std::begin(kRootAttrs), std::end(kRootAttrs)}, problems);
  if (const AttrValue* value = find_attr(root, "schema_version")) {
    const auto* version = std::get_if<int64_t>(value);
    // Another major version may lay the file out differently: nothing else can be checked.
    if (version == nullptr) {
      problems.push_back("/: schema_version is not an integer");
      return;
    }
    if (*version != kSchemaVersion) {
      problems.push_back(version_problem(*version));
      return;
    }
  }
  int64_t world_size = -1;
  if (const AttrValue* value = find_attr(root, "world_size")) {
    const auto* size = std::get_if<int64_t>(value);
    if (size != nullptr && *size >= 1)
      world_size = *size;
    else
      problems.push_back("/: world_size must be an integer >= 1");
  }

  // A world_size the file does not hold (a damaged attribute) would have the checks below loop
  // over ranks that are not there: it is held against /topology's length first.
  if (world_size > 0)
    check_section(problems, [&] {
      const std::optional<size_t> held = ranks_held(file);
      if (!held || *held == static_cast<size_t>(world_size)) return;
      problems.push_back("/: world_size " + std::to_string(world_size) + " but /topology holds " +
                         std::to_string(*held) + " ranks");
      world_size = -1;
    });

  const bool collectives = is_collectives_file(root);
  const bool roofs_file = is_command(root, "roofs");
  const bool sweep_file = is_command(root, "sweep");
  const AttrValue* predicted_attr = find_attr(root, "predicted");
  const bool predicted_file = predicted_attr != nullptr && *predicted_attr == AttrValue(int64_t{1});
  if (collectives) require_attrs(root, "/", {"check"}, problems);
  // `complete` is 0 or 1 where present (root, /sweep).
  auto check_complete = [&](const Attrs& attrs, const char* where) {
    const AttrValue* complete = find_attr(attrs, "complete");
    if (complete != nullptr && *complete != AttrValue(int64_t{0}) &&
        *complete != AttrValue(int64_t{1}))
      problems.push_back(std::string(where) + ": complete is " + attr_to_string(*complete) +
                         ", expected the integer 0 or 1");
  };
  check_complete(root, "/");
  if (!accept_incomplete && marked_incomplete(root))
    problems.push_back(std::string("/: ") + kIncomplete);
  if (sweep_file && h5::exists(file, "/sweep"))
    check_section(problems, [&] {
      const Attrs sweep = h5::read_attrs(h5::open_group(file, "/sweep").id());
      check_complete(sweep, "/sweep");
      if (!accept_incomplete && marked_incomplete(sweep))
        problems.push_back(std::string("/sweep: ") + kIncomplete);
    });
  std::vector<const char*> groups(std::begin(kGroups), std::end(kGroups));
  if (collectives) groups.assign(std::begin(kCollectivesGroups), std::end(kCollectivesGroups));
  if (roofs_file) groups = {"/stack", "/config", "/topology", "/roofs"};
  if (sweep_file) groups = {"/stack", "/config", "/topology", "/sweep", "/points"};
  std::set<std::string> present;
  for (const char* group : groups)
    check_section(problems, [&] {
      if (require_object(file, group, "group", problems)) present.insert(group);
    });
  auto has = [&](const char* group) { return present.count(group) > 0; };
  if (has("/stack")) check_section(problems, [&] { validate_stack(file, problems); });
  if (has("/config"))
    check_section(problems, [&] {
      validate_config(h5::read_attrs(h5::open_group(file, "/config").id()), "/config", problems);
    });
  if (has("/topology"))
    check_section(problems, [&] { validate_topology(file, world_size, problems); });
  std::set<std::string> unreadable;
  const AttrValue* layout = find_attr(root, "file_layout");
  if (layout != nullptr && attr_to_string(*layout) == kPerNodeLayout)
    check_section(problems, [&] { unreadable = validate_links(file, path, root, problems); });
  if (has("/topology") && has("/config"))
    check_section(problems, [&] { validate_gpu_map(file, problems); });
  int64_t op_count = -1;
  if (has("/ops"))
    check_section(problems, [&] { op_count = validate_ops(file, "/ops", problems); });
  if (has("/ranks"))
    check_section(problems,
                  [&] { validate_ranks(file, world_size, op_count, unreadable, problems); });
  if (has("/summary")) validate_summary(file, "", problems);
  if (h5::exists(file, "/points"))
    check_section(problems,
                  [&] { validate_points(file, world_size, unreadable, predicted_file, problems); });
  if (has("/sweep")) check_section(problems, [&] { validate_sweep(file, problems); });
  if (collectives) {
    if (has("/collectives")) check_section(problems, [&] { validate_collectives(file, problems); });
    if (has("/roofs")) check_section(problems, [&] { validate_roof(file, problems, false); });
  } else if (h5::exists(file, "/roofs")) {
    check_section(problems, [&] { validate_roofs(file, problems); });
  }
}

} // namespace

std::vector<std::string> validate_run_file(const std::string& path, bool accept_incomplete) {
  if (std::string problem = open_problem(path); !problem.empty()) return {problem};
  std::vector<std::string> problems;
  try {
    h5::Handle file = h5::open_file_read(path);
    validate_contents(file.id(), path, problems, accept_incomplete);
  } catch (const std::exception& e) {
    problems.push_back(e.what()); // the caller names the file
  }
  return problems;
}

} // namespace ridgeline
