// The run file (schema version 1, docs/SCHEMA.md): writing RunData to HDF5, reading it back,
// and validating a file against the schema.
#pragma once

#include <string>
#include <vector>

#include "app/run_data.hpp"
#include "models/roofs.hpp"

namespace ridgeline {

/// Writes `data` to `path` through a temporary file in the same directory that is renamed onto
/// `path` once closed, so `path` only ever holds a complete file. The temporary file is removed
/// on failure. Throws UsageError if the directory does not exist, Error for anything else.
/// Called by rank 0 only.
void write_run_file(const std::string& path, const RunData& data);

/// Reads a whole run file (of either file layout); without `timelines`, everything but the
/// per-rank timelines and samples (what a report needs, whatever the ranks). Throws UsageError
/// naming `path` if it is missing, not HDF5, of another schema major version, or malformed.
RunData read_run_file(const std::string& path, bool timelines = true);
/// The /points/<k> groups of a run or sweep file, in order: attributes, config and, where the
/// point has one, its summary (no timelines). Throws UsageError as read_run_file().
std::vector<RunData::Point> read_points(const std::string& path);

/// Every problem found in `path` against the schema, one short message each naming the object;
/// empty when the file is valid. A file its job left incomplete (a collectives file with root
/// `complete` = 0, a sweep with /sweep `complete` = 0: the job ended before its last size or
/// point) is a problem unless `accept_incomplete`. Never throws for a malformed or missing file.
std::vector<std::string> validate_run_file(const std::string& path, bool accept_incomplete = false);

/// Empty for a complete file; else what is missing from it, e.g. "incomplete: the job ended
/// before it finished; 5 sizes of all_reduce, all_gather", for report and validate.
std::string incomplete_note(const RunData& data);

/// The /summary/ops table of `ops` (also what the JSON and markdown reporters print).
Table aggregates_table(const std::vector<OpAggregate>& ops);

/// Appends `roofs` to `data` as the /roofs tables (gemm, memory, launch, interconnect) and the
/// /roofs group attributes (backend, source, headline figures), followed by `extra`.
void add_roofs(RunData& data, const Roofs& roofs, const Attrs& extra);

/// The /roofs of a roofs, run or sweep file; `source` names the file. Throws UsageError naming
/// `path` when it cannot be read or holds no /roofs.
Roofs read_roofs(const std::string& path);

/// Version of the HDF5 library linked in, e.g. "1.10.8" (for the stack fingerprint).
std::string hdf5_library_version();
/// "parallel" when the HDF5 library linked in has MPI-IO, else "serial" (/stack hdf5_build).
std::string hdf5_build();

} // namespace ridgeline
