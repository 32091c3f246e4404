// The run file (schema version 1, docs/SCHEMA.md): writing RunData to HDF5, reading it back,
// and validating a file against the schema.
#pragma once

#include <string>
#include <vector>

#include "app/run_data.hpp"

namespace ridgeline {

/// Writes `data` to `path` through a temporary file in the same directory that is renamed onto
/// `path` once closed, so `path` only ever holds a complete file. The temporary file is removed
/// on failure. Throws UsageError if the directory does not exist, Error for anything else.
/// Called by rank 0 only.
void write_run_file(const std::string& path, const RunData& data);

/// Reads a whole run file. Throws UsageError naming `path` if it is missing, not HDF5, of
/// another schema major version, or malformed.
RunData read_run_file(const std::string& path);

/// Every problem found in `path` against the schema, one short message each naming the object;
/// empty when the file is valid. Never throws for a malformed or missing file.
std::vector<std::string> validate_run_file(const std::string& path);

/// Version of the HDF5 library linked in, e.g. "1.10.8" (for the stack fingerprint).
std::string hdf5_library_version();

} // namespace ridgeline
