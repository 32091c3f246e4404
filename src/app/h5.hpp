// A thin RAII layer over the HDF5 C API (1.10): owned handles, checked calls, ordered attributes,
// 1-D datasets, column tables and the timeline compound. Every ridgeline file goes through it.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "app/run_data.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"

namespace ridgeline::h5 {

/// Move-only owner of an HDF5 identifier; closes it with the function matching its type.
class Handle {
public:
  Handle() = default;
  /// Takes ownership of `id`, the result of `call` on object `path`; throws Error if it is
  /// negative.
  Handle(hid_t id, const char* call, const std::string& path);
  ~Handle();
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  /// The identifier, for C API calls; the Handle keeps ownership.
  hid_t id() const { return m_id; }
  /// Closes now and throws Error on failure (a file's close is where its data reach the disk);
  /// the destructor only reports failures to stderr.
  void close();

private:
  hid_t m_id = H5I_INVALID_HID;
};

/// Throws Error naming `call`, `path` and HDF5's innermost error message if `status` is negative.
void check_status(herr_t status, const char* call, const std::string& path);
/// Absolute path of `name` below the object `loc` ("/ranks/0/timeline"), for messages.
std::string object_path(hid_t loc, const std::string& name);

/// Creates (truncates) a file whose groups keep link and attribute creation order.
Handle create_file(const std::string& path);
/// A new file built in memory (HDF5's core driver without a backing store) under the name
/// `path`: nothing reaches the disk until save_memory_file(), so a full filesystem can never
/// leave HDF5 a file it fails to close.
Handle create_memory_file(const std::string& path);
/// An existing file read into memory for changes that save_memory_file() writes back.
Handle open_memory_file(const std::string& path);
/// Writes the image of an in-memory file to `path` (created or truncated; every write checked,
/// removed on failure) and closes the file.
void save_memory_file(Handle& file, const std::string& path);
/// True if `path` is an HDF5 file (false for other files); throws Error if it cannot be read.
bool is_hdf5_file(const std::string& path);
/// Opens an existing file read-only.
Handle open_file_read(const std::string& path);
/// Opens an existing file for writing (this process alone).
Handle open_file_write(const std::string& path);
/// Whether the HDF5 library was built with MPI-IO (parallel HDF5).
bool parallel_library();
/// Opens an existing file for writing by every rank of `comm` at once through MPI-IO, with
/// collective metadata operations (every rank calls, and must then create, open and close the
/// same objects in the same order). Throws Error where the library is serial.
Handle open_file_parallel(const std::string& path, MPI_Comm comm);
/// Creates group `name` below `loc`, keeping link and attribute creation order.
Handle create_group(hid_t loc, const std::string& name);
/// Opens the existing group `name` (a relative or absolute path) below `loc`.
Handle open_group(hid_t loc, const std::string& name);
/// True if every component of `path` below `loc` exists.
bool exists(hid_t loc, const std::string& path);
/// Names of the links in group `loc`: creation order where tracked, else name order.
std::vector<std::string> list_children(hid_t loc);

/// Writes one scalar attribute (int64, float64 or variable-length UTF-8 string) on `obj`.
void write_attr(hid_t obj, const std::string& name, const AttrValue& value);
/// Writes every attribute of `attrs` on `obj`, in order.
void write_attrs(hid_t obj, const Attrs& attrs);
/// Reads every scalar attribute of `obj` (integers as int64, floats as double, fixed or
/// variable-length strings as text), in creation order where tracked, else name order.
Attrs read_attrs(hid_t obj);

// The plain table types live in run_data.hpp (free of HDF5 headers); these names keep the
// writer's and reader's code in h5:: terms.
using ColumnValues = ::ridgeline::ColumnValues;
using Column = ::ridgeline::Column;
using Table = ::ridgeline::Table;

/// Number of values in a column.
size_t column_size(const ColumnValues& values);
/// The column called `name`, or nullptr.
const Column* find_column(const Table& table, const std::string& name);

/// Writes a 1-D float64 dataset.
void write_dataset(hid_t loc, const std::string& name, const std::vector<double>& values);
/// Writes a 1-D int64 dataset.
void write_dataset(hid_t loc, const std::string& name, const std::vector<int64_t>& values);
/// Writes a 1-D dataset of variable-length UTF-8 strings.
void write_dataset(hid_t loc, const std::string& name, const std::vector<std::string>& values);
/// Number of rows of the 1-D dataset `name` below `loc` (its data are not read).
size_t dataset_rows(hid_t loc, const std::string& name);
/// Reads a 1-D dataset as int64, double or string values, following its stored type class.
ColumnValues read_dataset(hid_t loc, const std::string& name);

/// Reads a 1-D dataset whose stored type class must be that of T (int64_t, double, string).
template <class T> std::vector<T> read_vector(hid_t loc, const std::string& name) {
  ColumnValues values = read_dataset(loc, name);
  auto* typed = std::get_if<std::vector<T>>(&values);
  if (typed == nullptr) throw Error(object_path(loc, name) + ": unexpected element type");
  return std::move(*typed);
}

/// Writes `table` as one compound dataset (int64, float64, variable-length string fields);
/// chunked and deflate-compressed when `compress` and non-empty. Throws if lengths differ.
void write_table(hid_t loc, const std::string& name, const Table& table, bool compress);
/// Reads a compound dataset written by write_table (or any compound of integer, float and
/// string fields) back into columns, in field order.
Table read_table(hid_t loc, const std::string& name);

/// Creates a compound dataset of `rows` rows with the fields (names and types) of `like`, whose
/// values are not written; chunked and compressed as write_table() when `compress`.
Handle create_table(hid_t loc, const std::string& name, const Table& like, size_t rows,
                    bool compress);
/// Writes every row of `table` into `dataset`, created by create_table() with its fields and row
/// count (independent I/O in a parallel file).
void write_table_rows(hid_t dataset, const Table& table);

/// Writes a timeline: compound fields named as the TimelineRecord members, chunked (at most
/// 4096 rows a chunk), shuffled and deflate-compressed (level 4). Empty timelines are allowed.
void write_timeline(hid_t loc, const std::string& name, const std::vector<TimelineRecord>& rows);
/// Creates an empty timeline of `rows` rows: chunked and compressed as write_timeline() when
/// `compress`, contiguous otherwise (what independent writes into a parallel file need).
Handle create_timeline(hid_t loc, const std::string& name, size_t rows, bool compress);
/// Writes `rows` into a timeline created by create_timeline() with as many rows.
void write_timeline_rows(hid_t dataset, const std::vector<TimelineRecord>& rows);
/// Reads a timeline; throws if a TimelineRecord field is missing or of another type class.
std::vector<TimelineRecord> read_timeline(hid_t loc, const std::string& name);

/// Creates a hard link `name` below `loc` to the existing object `target`.
void create_hard_link(hid_t loc, const std::string& target, const std::string& name);
/// Creates an external link `name` below `loc` to `object` in the file `file` (a path that HDF5
/// resolves relative to the directory of the file holding the link when it is relative).
void create_external_link(hid_t loc, const std::string& name, const std::string& file,
                          const std::string& object);
/// Where an external link points.
struct ExternalLink {
  std::string file;
  std::string object;
};
/// The target of link `name` below `loc` when it is an external link (the link is not followed).
std::optional<ExternalLink> external_link(hid_t loc, const std::string& name);

} // namespace ridgeline::h5
