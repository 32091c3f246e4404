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

namespace {

// What `value` is, as a problem words it: "the string 'x'" or "the number 2".
std::string found_text(const AttrValue& value) {
  if (std::holds_alternative<std::string>(value))
    return "the string '" + attr_to_string(value) + "'";
  return "the number " + attr_to_string(value);
}

// Why `value` is not of `type`, or "".
std::string type_problem(const AttrValue& value, schema::AttrType type) {
  const auto* integer = std::get_if<int64_t>(&value);
  switch (type) {
  case schema::AttrType::Text:
    return std::holds_alternative<std::string>(value)
               ? ""
               : "must be a string, found " + attr_to_string(value);
  case schema::AttrType::Number:
    return std::holds_alternative<std::string>(value)
               ? "must be a number, found " + found_text(value)
               : "";
  case schema::AttrType::Int:
  case schema::AttrType::Count:
  case schema::AttrType::Flag:
    if (integer == nullptr) return "must be an integer, found " + found_text(value);
    if (type == schema::AttrType::Count && *integer < 1)
      return "must be an integer >= 1, found " + std::to_string(*integer);
    if (type == schema::AttrType::Flag && *integer != 0 && *integer != 1)
      return "must be 0 or 1, found " + std::to_string(*integer);
    return "";
  }
  return "";
}

} // namespace

void check_attribute_types(const Attrs& attrs, const std::string& where,
                           const schema::AttributeGroup& group,
                           std::vector<std::string>& problems) {
  for (const schema::Attribute& attribute : schema::attributes_of(group)) {
    if (attribute.code) continue;
    const std::string name = attribute.name;
    const size_t family = name.find('<');
    for (const auto& [key, value] : attrs) {
      const bool match =
          family == std::string::npos ? key == name : key.compare(0, family, name, 0, family) == 0;
      if (!match) continue;
      if (const std::string problem = type_problem(value, attribute.type); !problem.empty())
        problems.push_back(where + ": " + key + " " + problem);
    }
  }
}

std::vector<std::string> required_attributes(const schema::AttributeGroup& group,
                                             const Conditions& held) {
  std::vector<std::string> names;
  for (const schema::Attribute& attribute : schema::attributes_of(group))
    if (schema::always(attribute.required) || held.count(attribute.required) > 0)
      names.emplace_back(attribute.name);
  return names;
}

std::vector<std::string> attributes_required_by(const schema::AttributeGroup& group,
                                                const char* condition) {
  std::vector<std::string> names;
  for (const schema::Attribute& attribute : schema::attributes_of(group))
    if (std::string(attribute.required) == condition) names.emplace_back(attribute.name);
  return names;
}

} // namespace run_file_detail

using namespace run_file_detail;

namespace {

void validate_stack(hid_t file, std::vector<std::string>& problems) {
  h5::Handle stack = h5::open_group(file, "/stack");
  const Attrs stack_attrs = h5::read_attrs(stack.id());
  require_attrs(stack_attrs, "/stack", required_attributes(schema::attributes::stack), problems);
  // cuDNN's plans are recorded only beside the version of the cuDNN that chose them.
  if (find_attr(stack_attrs, sa::stack::cudnn_plans) != nullptr &&
      find_attr(stack_attrs, sa::stack::cudnn) == nullptr)
    problems.push_back("/stack: cudnn_plans without cudnn (the loaded cuDNN version)");
  validate_table(file, schema::tables::stack_env, {}, problems);
}

// The op table at `path` (/ops, or a point's); returns the number of ops (the valid op_id range).
int64_t validate_ops(hid_t file, const std::string& path, std::vector<std::string>& problems) {
  const std::optional<h5::Table> table =
      validate_table(file, path, schema::tables::ops, {}, problems);
  if (!table) return -1;
  const auto& ids = column<int64_t>(*table, sf::ops::id, path);
  const auto& kinds = column<std::string>(*table, sf::ops::kind, path);
  const auto& known = schema::enums::op_kind;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string row = path + ": row " + std::to_string(i) + ": ";
    if (ids[i] != static_cast<int64_t>(i))
      problems.push_back(row + "id " + std::to_string(ids[i]) + ", expected " + std::to_string(i));
    if (std::find(std::begin(known), std::end(known), kinds[i]) == std::end(known))
      problems.push_back(row + "unknown kind '" + kinds[i] + "'");
  }
  return static_cast<int64_t>(ids.size());
}

// The `rows` attribute of a rank's group (the rows its timeline must have), or -1 when absent
// (files written before it).
int64_t recorded_rows(hid_t file, const std::string& rank_group) {
  const Attrs attrs = h5::read_attrs(h5::open_group(file, rank_group).id());
  const AttrValue* rows = find_attr(attrs, sa::rank::rows);
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
  validate_table(file, path, schema::tables::samples, {}, problems);
  const h5::Table table = h5::read_table(file, path);
  const h5::Column* t = h5::find_column(table, sf::samples::t_ns);
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
void validate_config(const Attrs& attrs, const std::string& where,
                     std::vector<std::string>& problems) {
  check_attribute_types(attrs, where, schema::attributes::config, problems);
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
    check_attribute_types(attrs, base, schema::attributes::point, problems);
    const AttrValue* status = find_attr(attrs, sa::point::status);
    // A failed point has no summary, nor has one an incomplete sweep had not run yet.
    const bool failed = status != nullptr && (attr_to_string(*status).rfind("failed", 0) == 0 ||
                                              attr_to_string(*status) == "pending");
    const AttrValue* predicted = find_attr(attrs, sa::point::predicted);
    if (predicted_file && (predicted == nullptr || *predicted != AttrValue(int64_t{1})))
      problems.push_back(base + ": a point of a predicted file lacks predicted = 1");
    if (predicted != nullptr && *predicted == AttrValue(int64_t{1})) {
      // A predicted point measured nothing: its ops are in a prediction table, not a summary.
      if (h5::exists(file, base + "/summary"))
        problems.push_back(base + ": a predicted point holds a measured summary");
      if (!failed)
        check_section(problems, [&] {
          validate_table(file, base + "/prediction", schema::tables::prediction, {"predicted"},
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
// finite, non-negative times), and each crossover's status one of the schema's; the points and
// crossovers only where their tables have every field (else they were reported).
void validate_sweep_repeats(hid_t file, const Attrs& attrs, const std::optional<h5::Table>& table,
                            const std::optional<h5::Table>& cross,
                            std::vector<std::string>& problems) {
  namespace f = sf::sweep_points;
  require_attrs(attrs, "/sweep", attributes_required_by(schema::attributes::sweep, "repeats"),
                problems);
  check_section(problems, [&] {
    validate_table(file, schema::tables::sweep_repeats, {"repeats"}, problems);
  });
  if (!table) return;
  const h5::Table& points = *table;
  const auto& status = column<std::string>(points, f::status, "/sweep/points");
  const auto& repeats = column<int64_t>(points, f::repeats, "/sweep/points");
  const bool complete = !marked_incomplete(attrs);
  for (size_t i = 0; i < status.size(); ++i) {
    if (status[i] == "ok" && repeats[i] < 1)
      problems.push_back("/sweep/points: row " + std::to_string(i) +
                         ": an ok point with no repeat");
    if (status[i] == "pending" && complete)
      problems.push_back("/sweep/points: row " + std::to_string(i) +
                         ": a point not run (pending) in a sweep marked complete");
  }
  const char* const medians[][4] = {
      {"step_p50", f::step_p50_ns, f::step_p50_lo_ns, f::step_p50_hi_ns},
      {"compute", f::compute_ns, f::compute_lo_ns, f::compute_hi_ns},
      {"hbm", f::hbm_ns, f::hbm_lo_ns, f::hbm_hi_ns},
      {"interconnect", f::interconnect_ns, f::interconnect_lo_ns, f::interconnect_hi_ns},
      {"launch", f::launch_ns, f::launch_lo_ns, f::launch_hi_ns}};
  for (const auto& m : medians) {
    const std::string base = m[0];
    const auto& mid = column<double>(points, m[1], "/sweep/points");
    const auto& lo = column<double>(points, m[2], "/sweep/points");
    const auto& hi = column<double>(points, m[3], "/sweep/points");
    for (size_t i = 0; i < mid.size(); ++i) {
      if (status[i] != "ok") continue;
      if (!(lo[i] >= 0 && lo[i] <= mid[i] && mid[i] <= hi[i] && std::isfinite(hi[i])))
        problems.push_back("/sweep/points: row " + std::to_string(i) + ": " + base +
                           " must lie in its interval [lo, hi] of finite times >= 0, found " +
                           number_text(mid[i]) + " in [" + number_text(lo[i]) + ", " +
                           number_text(hi[i]) + "]");
    }
  }
  if (!cross || row_count(*cross) == 0) return;
  const auto& known = schema::enums::crossover_status;
  for (const std::string& s :
       column<std::string>(*cross, sf::sweep_crossovers::status, "/sweep/crossovers"))
    if (std::find(std::begin(known), std::end(known), s) == std::end(known))
      problems.push_back("/sweep/crossovers: unknown status '" + s + "'");
}

// Sweep files: the point and crossover tables (with their repeats' fields where the sweep was
// measured with repeats: the attribute `repeats`), one /points group per row.
void validate_sweep(hid_t file, std::vector<std::string>& problems) {
  const Attrs attrs = h5::read_attrs(h5::open_group(file, "/sweep").id());
  const bool repeated = find_attr(attrs, sa::sweep::repeats) != nullptr;
  const Conditions held = repeated ? Conditions{"repeats"} : Conditions{};
  std::optional<h5::Table> points, crossovers;
  check_section(problems, [&] {
    points = validate_table(file, schema::tables::sweep_points, held, problems);
  });
  check_section(problems, [&] {
    crossovers = validate_table(file, schema::tables::sweep_crossovers, held, problems);
  });
  const char* const points_path = schema::tables::sweep_points.path;
  if (!h5::exists(file, points_path)) return;
  const h5::Table stored = h5::read_table(file, points_path);
  const size_t rows = row_count(stored);
  const size_t groups = h5::exists(file, "/points")
                            ? h5::list_children(h5::open_group(file, "/points").id()).size()
                            : 0;
  if (rows != groups)
    problems.push_back("/sweep/points: " + std::to_string(rows) + " rows but " +
                       std::to_string(groups) + " groups under /points");
  require_attrs(attrs, "/sweep", required_attributes(schema::attributes::sweep), problems);
  if (const AttrValue* axes = find_attr(attrs, sa::sweep::axes)) {
    const std::string* text = std::get_if<std::string>(axes);
    const auto& known = schema::enums::sweep_axis;
    if (text == nullptr) problems.push_back("/sweep: axes must be a string");
    for (const std::string& axis : text ? split_by(*text, ',') : std::vector<std::string>{}) {
      if (axis.empty()) continue;
      if (std::find(std::begin(known), std::end(known), axis) == std::end(known))
        problems.push_back("/sweep: axes names '" + axis + "', which is not a sweep axis");
      else if (h5::find_column(stored, axis) == nullptr)
        problems.push_back("/sweep: axes names '" + axis + "', which is not a field of " +
                           points_path);
    }
  }
  check_attribute_types(attrs, "/sweep", schema::attributes::sweep, problems);
  if (repeated)
    check_section(problems,
                  [&] { validate_sweep_repeats(file, attrs, points, crossovers, problems); });
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
  require_attrs(root, "/", required_attributes(schema::attributes::root), problems);
  if (const AttrValue* value = find_attr(root, sa::root::schema_version)) {
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
  if (const AttrValue* value = find_attr(root, sa::root::world_size)) {
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
  check_attribute_types(root, "/", schema::attributes::root, problems);

  const bool collectives = is_collectives_file(root);
  const bool roofs_file = is_command(root, "roofs");
  const bool sweep_file = is_command(root, "sweep");
  const AttrValue* predicted_attr = find_attr(root, sa::root::predicted);
  const bool predicted_file = predicted_attr != nullptr && *predicted_attr == AttrValue(int64_t{1});
  if (collectives)
    require_attrs(root, "/", attributes_required_by(schema::attributes::root, "collectives"),
                  problems);
  // `complete` (0 or 1: its type is the schema's) says whether the job finished.
  if (!accept_incomplete && marked_incomplete(root))
    problems.push_back(std::string("/: ") + kIncomplete);
  if (!accept_incomplete && sweep_file && h5::exists(file, "/sweep"))
    check_section(problems, [&] {
      if (marked_incomplete(h5::read_attrs(h5::open_group(file, "/sweep").id())))
        problems.push_back(std::string("/sweep: ") + kIncomplete);
    });
  std::vector<const char*> groups(std::begin(schema::files::run), std::end(schema::files::run));
  if (collectives)
    groups.assign(std::begin(schema::files::collectives), std::end(schema::files::collectives));
  if (roofs_file) groups.assign(std::begin(schema::files::roofs), std::end(schema::files::roofs));
  if (sweep_file) groups.assign(std::begin(schema::files::sweep), std::end(schema::files::sweep));
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
  if (h5::exists(file, "/roofs"))
    check_section(problems, [&] {
      check_attribute_types(h5::read_attrs(h5::open_group(file, "/roofs").id()), "/roofs",
                            schema::attributes::roofs, problems);
    });
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
