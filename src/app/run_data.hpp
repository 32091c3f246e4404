// Everything a run writes to its HDF5 file, gathered on rank 0: the in-memory image of
// schema version 1 (docs/SCHEMA.md). The writer, the reader, `validate` and `report` share it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "app/run_file_schema_data.hpp"
#include "core/stats.hpp"
#include "core/timeline.hpp"

namespace ridgeline {

inline constexpr int64_t kSchemaVersion = schema::kVersion;

/// An HDF5 attribute value: 64-bit integer, double or UTF-8 string.
using AttrValue = std::variant<int64_t, double, std::string>;
/// Ordered attributes of one HDF5 object.
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

/// The values of one column or 1-D dataset.
using ColumnValues =
    std::variant<std::vector<int64_t>, std::vector<double>, std::vector<std::string>>;
/// One named column of a table; a field of its compound dataset.
struct Column {
  std::string name;
  ColumnValues values;
};
/// Columns of equal length: one compound dataset, one row per index.
using Table = std::vector<Column>;

/// A table stored at an absolute path outside the run layout (e.g. "/collectives/all_reduce");
/// intermediate groups are created on write. `attrs` are written on the dataset.
struct NamedTable {
  std::string path;
  Table table;
  Attrs attrs;
};

/// Looks up an attribute (nullptr if absent).
const AttrValue* find_attr(const Attrs& attrs, const std::string& key);
/// Attribute value rendered as text (integers plainly, doubles with %.6g).
std::string attr_to_string(const AttrValue& v);

/// Aggregate of one op over the timed iterations (/summary/ops row).
struct OpAggregate {
  std::string name;
  std::string kind;
  std::string lane;
  int64_t count = 0; ///< timed instances on one rank per iteration, times iterations
  double p50_ns = 0; ///< median instance time (collectives: max over ranks per instance)
  double mean_ns = 0;
  double per_step_p50_ns = 0; ///< median over iterations of the op's total time in one step
  double share = 0;           ///< per_step_p50_ns / step p50
  double flops = 0;           ///< per instance
  double hbm_bytes = 0;       ///< per instance
  double comm_bytes = 0;      ///< per instance
  double achieved_tflops = 0;
  double achieved_gbps = 0; ///< hbm_bytes (or comm_bytes for collectives) / p50
  // Attribution against the roofs (0 and "none" when the run had no roofs).
  double compute_bound_ns = 0;      ///< flops / GEMM peak of the dtype
  double hbm_bound_ns = 0;          ///< hbm_bytes / memory bandwidth at the op's working set
  double interconnect_bound_ns = 0; ///< the collective's interconnect roof at its size
  double launch_bound_ns = 0;       ///< the launch floor
  double bound_ns = 0;              ///< the largest: the time the op's ceiling allows
  std::string ceiling = "none";     ///< compute | hbm | interconnect | launch | none
  double efficiency = 0;            ///< bound_ns / p50_ns
  /// Collectives and p2p ops: the scope of their group ("intra", "inter", "hier"), whose roof
  /// bounds them; "" for other ops and in files written before scopes.
  std::string scope;
};

/// One node of a run across nodes (/summary/nodes): its ranks' times per timed iteration, each
/// iteration the longest of its ranks'.
struct NodeFigures {
  std::string node;  ///< the node's name (its ranks' host, or RIDGELINE_NODE_NAME)
  int64_t ranks = 0; ///< its ranks
  /// Compute-lane time per iteration (the ops the rank itself runs, no wait for other ranks):
  /// median and 95 % interval.
  Interval compute;
  Interval span; ///< the span per iteration, first op start to last op end (waits included)
  /// Its compute interval lies above the other nodes' (their per-iteration times together).
  bool slow = false;
};

/// /summary: step-time distribution and per-op aggregates.
struct RunSummary {
  std::vector<double> step_ns;        ///< per timed iteration, max over ranks
  std::vector<double> warmup_step_ns; ///< per warm-up iteration, max over ranks
  /// --decode-steps: keys each timed iteration attended to (context + step + 1); else empty.
  std::vector<int64_t> step_context;
  /// An MoE model: per layer step in the order run (warm-up and check included), the rows the
  /// busiest rank of the EP group computed over the mean rank's; else empty.
  std::vector<double> moe_rank_imbalance;
  SeriesStats step;
  int64_t warmup_to_steady = 0;
  std::vector<OpAggregate> ops;
  Attrs attrs; ///< check results and other scalars (check_passed, check_max_rel_error, ...)
  std::vector<NodeFigures> nodes; ///< a run across nodes: each node's figures (else empty)
};

/// Decode steps of one range of context lengths (--decode-steps): the per-token time there.
struct DecodeBin {
  int64_t context_first = 0; ///< fewest keys attended to in the bin
  int64_t context_last = 0;  ///< most keys attended to in the bin
  int64_t tokens = 0;        ///< timed iterations (one token per sequence each) in the bin
  double p50_ns = 0, p95_ns = 0, p99_ns = 0, mean_ns = 0;
};

/// The whole file.
struct RunData {
  Attrs root;  ///< schema_version, ridgeline_version, git_sha, created_utc, argv, world_size
  Attrs stack; ///< versions, compiler, build type, ...
  std::vector<std::pair<std::string, std::string>> env; ///< performance-relevant variables
  Attrs config;                                         ///< every resolved option
  std::vector<Attrs> topology; ///< one entry per rank, same keys on every rank
  OpTable ops;
  std::vector<std::vector<TimelineRecord>> timelines; ///< one per rank
  RunSummary summary;
  /// Extra tables (commands other than `run`: /collectives/..., /roofs/...), written last.
  std::vector<NamedTable> tables;
  /// Further configurations of the same job (e.g. one per overlap strategy), each written as
  /// /points/<k> with its own config, ops, ranks and summary; the root holds point 0 again so
  /// that every reader of a single run reads a multi-point file unchanged.
  struct Point {
    Attrs attrs; ///< sweep points: status ("ok" | "failed: <reason>") and label
    Attrs config;
    OpTable ops; ///< with `timelines`; both empty when a sweep keeps no timelines
    std::vector<std::vector<TimelineRecord>> timelines;
    bool has_summary = true; ///< false for a failed sweep point
    RunSummary summary;
  };
  std::vector<Point> points;
  /// Attributes of groups outside the run layout (e.g. /roofs, /sweep), written after `tables`.
  std::vector<std::pair<std::string, Attrs>> group_attrs;
};

/// Whether a file of this root has the run layout at its root (/ops, /ranks, /summary):
/// run files do; collectives, roofs and sweep files keep their results elsewhere.
bool has_run_layout(const Attrs& root);

} // namespace ridgeline
