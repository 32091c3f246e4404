// The pieces of the run-file writer that every file layout shares (run_file_write.cpp): the checks
// before writing and the contents of a file, with the per-rank part left to the layout.
#pragma once

#include <functional>
#include <string>

#include "app/h5.hpp"
#include "app/run_data.hpp"
#include "core/files.hpp"

namespace ridgeline {

/// The per-rank part of a file: the `ranks` group below the root (prefix "") and below each
/// /points/<k> (prefix "/points/<k>").
struct RanksPart {
  /// Whether the group at `prefix` holds per-rank rows.
  std::function<bool(const std::string& prefix)> has;
  /// Writes `ranks` (and, at a point, nothing else) below `parent`, the group at `prefix`.
  std::function<void(hid_t parent, const std::string& prefix)> write;
};

/// Checks what the layout relies on before any file is created, for a file of `ranks` ranks:
/// the schema version, world_size, the topology, table paths, the directory. Throws Error
/// (UsageError when the directory does not exist).
void check_run_data(const std::string& path, const RunData& data, size_t ranks);

/// Writes `data` into a new file at `path` (truncated if it exists) and closes it: the root
/// attributes followed by `extra_root`, the stack, config, topology, ops, the per-rank part
/// through `ranks`, the summary, tables, group attributes and points. A run file whose root has
/// no per-rank part of its own gets /ranks as a hard link to /points/0/ranks.
void write_run_contents(const std::string& path, const RunData& data, const RanksPart& ranks,
                        const Attrs& extra_root);

} // namespace ridgeline
