// How a run's per-rank rows reach the disk without passing through rank 0 (docs/SCHEMA.md,
// "File layouts"): one file written by every rank at once through MPI-IO (parallel HDF5), or
// one file per node written by the node's first rank, joined by a master file's external links.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "app/run_data.hpp"
#include "core/timeline.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {

enum class FileLayout {
  single,   ///< one file; each rank writes its own rows into it (parallel HDF5)
  per_node, ///< a node file per node (or per --ranks-per-file ranks) + a master file of links
};

/// "single" | "per-node" (throws UsageError otherwise).
FileLayout parse_file_layout(const std::string& name);
const char* file_layout_name(FileLayout layout);
/// The layout `auto` stands for: single where HDF5 has MPI-IO, else per-node.
FileLayout default_file_layout();

/// This rank's own rows of a run or sweep file.
struct RankRows {
  /// The groups that hold a timeline per rank, the same on every rank and in the same order:
  /// "" is the root (/ranks/<r>/timeline), "/points/<k>" a point. A run file whose root is not
  /// among them gets /ranks as a hard link to /points/0/ranks.
  std::vector<std::string> groups;
  /// This rank's timeline in each group (pointers: the rows stay with their owner).
  std::vector<const std::vector<TimelineRecord>*> timelines;
  /// This rank's NVML samples (none: no samples dataset), stored beside its timeline of the
  /// first group, with the attribute period_ms.
  std::vector<GpuSample> samples;
  int64_t sample_period_ms = 0;
};

struct FileWriteOptions {
  FileLayout layout = FileLayout::single;
  /// Per-node layout: at most this many ranks of a node share a node file (0 = all of them).
  int ranks_per_file = 0;
};

/// What was written.
struct FilesWritten {
  double write_seconds = 0; ///< from every rank's start to the last object written
  int64_t node_files = 0;   ///< per-node layout: node files beside the master; else 0
};

/// Writes a run or sweep file at `path` with every rank's rows (every rank of `comm` calls):
/// `data` holds everything but the rows and is read on rank 0 only; `mine` is this rank's.
/// Files are written under temporary names and renamed when complete (node files first, the
/// master file last), so `path` appears only when every part exists; on failure nothing new is
/// left behind and every rank throws the same Error. The file records its layout and
/// write_seconds (root attributes).
FilesWritten write_run_files(MPI_Comm comm, const std::string& path, const RunData& data,
                             const RankRows& mine, const FileWriteOptions& options);

/// The node file `index` of the master file `path` (per-node layout): `<path without
/// .h5>.node<index>.h5`.
std::string node_file_path(const std::string& path, int64_t index);

} // namespace ridgeline
