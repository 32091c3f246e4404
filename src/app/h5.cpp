// RAII layer over the HDF5 C API. Only the 1.10 API is used so that the distributions' 1.10
// packages and newer libraries all build it unchanged.
#include "app/h5.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "app/h5_detail.hpp"
#include "core/files.hpp"

namespace ridgeline::h5 {

using detail::kCreationOrder;
using detail::quiet;
using detail::set_attr_order;

namespace {

constexpr size_t kTimelineChunkRows = 4096;
constexpr unsigned kDeflateLevel = 4;
// In-memory compound rows give every field an 8-byte slot: int64, double and char* all fit, so
// no field needs more alignment than the row provides.
constexpr size_t kSlot = 8;
static_assert(sizeof(const char*) <= kSlot, "variable-length string pointers must fit a slot");

// The most specific message on HDF5's error stack (the stack is cleared afterwards).
std::string innermost_error() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* err, void* out) -> herr_t {
        if (n == 0 && err->desc != nullptr) *static_cast<std::string*>(out) = err->desc;
        return 0;
      },
      &text);
  H5Eclear2(H5E_DEFAULT);
  if (text.empty()) return "failed";
  // The file drivers describe a failed system call over several lines ("file write failed:
  // time = ..., errno = 28, error message = 'No space left on device', ..."): the reason only.
  const std::string key = "error message = '";
  if (const size_t at = text.find(key); at != std::string::npos) {
    const size_t end = text.find('\'', at + key.size());
    const size_t colon = text.find(':');
    return (colon < at ? text.substr(0, colon) + ": " : std::string()) +
           text.substr(at + key.size(), end == std::string::npos ? end : end - at - key.size());
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// Name and size queries return a length, negative on failure.
void check_size(ssize_t len, const char* call, const std::string& path) {
  if (len < 0) check_status(-1, call, path);
}

std::string describe(hid_t id) {
  if (H5Iget_type(id) == H5I_FILE) {
    const ssize_t len = H5Fget_name(id, nullptr, 0);
    if (len < 0) return "?";
    std::string name(static_cast<size_t>(len) + 1, '\0');
    H5Fget_name(id, name.data(), name.size());
    name.resize(static_cast<size_t>(len));
    return name;
  }
  return object_path(id, "");
}

herr_t close_id(hid_t id) {
  switch (H5Iget_type(id)) {
  case H5I_FILE:
    return H5Fclose(id);
  case H5I_GROUP:
    return H5Gclose(id);
  case H5I_DATASET:
    return H5Dclose(id);
  case H5I_DATASPACE:
    return H5Sclose(id);
  case H5I_DATATYPE:
    return H5Tclose(id);
  case H5I_ATTR:
    return H5Aclose(id);
  case H5I_GENPROP_LST:
    return H5Pclose(id);
  default:
    return H5Idec_ref(id) < 0 ? -1 : 0;
  }
}

std::string attr_path(hid_t obj, const std::string& name) {
  return object_path(obj, "") + "@" + name;
}

// The creation property list of a file's root group, a group or a dataset; an empty Handle
// for objects that have none.
Handle creation_plist(hid_t obj, const std::string& path) {
  switch (H5Iget_type(obj)) {
  case H5I_FILE: {
    Handle root(H5Gopen2(obj, "/", H5P_DEFAULT), "H5Gopen2", path);
    return Handle(H5Gget_create_plist(root.id()), "H5Gget_create_plist", path);
  }
  case H5I_GROUP:
    return Handle(H5Gget_create_plist(obj), "H5Gget_create_plist", path);
  case H5I_DATASET:
    return Handle(H5Dget_create_plist(obj), "H5Dget_create_plist", path);
  default:
    return Handle();
  }
}

Handle vlen_string_type(H5T_cset_t cset, const std::string& path) {
  Handle type(H5Tcopy(H5T_C_S1), "H5Tcopy", path);
  check_status(H5Tset_size(type.id(), H5T_VARIABLE), "H5Tset_size", path);
  check_status(H5Tset_cset(type.id(), cset), "H5Tset_cset", path);
  return type;
}

bool is_variable_string(hid_t type, const std::string& path) {
  const htri_t vlen = H5Tis_variable_str(type);
  check_status(vlen, "H5Tis_variable_str", path);
  return vlen > 0;
}

// Text of one fixed-length string element: up to the first NUL, without trailing pad spaces.
std::string fixed_string(const char* data, size_t size, H5T_str_t pad) {
  size_t len = strnlen(data, size);
  if (pad == H5T_STR_SPACEPAD)
    while (len > 0 && data[len - 1] == ' ')
      --len;
  return std::string(data, len);
}

// Releases the strings HDF5 allocated while reading variable-length strings into a buffer.
class VlenStrings {
public:
  void add(char* text) { m_texts.push_back(text); }
  ~VlenStrings() {
    for (char* text : m_texts)
      H5free_memory(text);
  }

private:
  std::vector<char*> m_texts;
};

// Reads `count` strings stored with string type `stored`; `read(memory_type, buffer)` performs
// the H5Aread or H5Dread.
template <class ReadFn>
std::vector<std::string> read_strings_as(hid_t stored, size_t count, const std::string& path,
                                         ReadFn read) {
  std::vector<std::string> out;
  out.reserve(count);
  if (is_variable_string(stored, path)) {
    Handle memory = vlen_string_type(H5Tget_cset(stored), path);
    std::vector<char*> texts(count, nullptr);
    read(memory.id(), texts.data());
    VlenStrings owned;
    for (char* text : texts)
      owned.add(text);
    for (const char* text : texts)
      out.emplace_back(text != nullptr ? text : "");
    return out;
  }
  const size_t size = H5Tget_size(stored);
  if (size == 0) throw Error(path + ": string type of size 0");
  Handle memory(H5Tcopy(stored), "H5Tcopy", path);
  std::vector<char> buffer(count * size);
  read(memory.id(), buffer.data());
  const H5T_str_t pad = H5Tget_strpad(stored);
  for (size_t i = 0; i < count; ++i)
    out.push_back(fixed_string(&buffer[i * size], size, pad));
  return out;
}

Handle open_dataset(hid_t loc, const std::string& name, const std::string& path) {
  return Handle(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "H5Dopen2", path);
}

// Number of rows of a 1-D dataset; throws for any other rank.
hsize_t row_count(hid_t dataset, const std::string& path) {
  Handle space(H5Dget_space(dataset), "H5Dget_space", path);
  const int rank = H5Sget_simple_extent_ndims(space.id());
  check_status(rank, "H5Sget_simple_extent_ndims", path);
  if (rank != 1) throw Error(path + ": expected a 1-D dataset, found rank " + std::to_string(rank));
  hsize_t rows = 0;
  check_status(H5Sget_simple_extent_dims(space.id(), &rows, nullptr), "H5Sget_simple_extent_dims",
               path);
  return rows;
}

// row_count() of a dataset about to be read, refused when the file does not hold what that many
// rows need (a damaged or hostile shape would otherwise have the reader allocate it first): a
// chunked dataset must have every chunk its rows span, a contiguous one its bytes.
hsize_t stored_row_count(hid_t dataset, const std::string& path) {
  const hsize_t rows = row_count(dataset, path);
  if (rows == 0) return rows;
  Handle dcpl(H5Dget_create_plist(dataset), "H5Dget_create_plist", path);
  const H5D_layout_t layout = H5Pget_layout(dcpl.id());
  if (layout == H5D_CHUNKED) {
    hsize_t chunk = 0;
    check_status(H5Pget_chunk(dcpl.id(), 1, &chunk) < 0 ? -1 : 0, "H5Pget_chunk", path);
    hsize_t held = 0;
    Handle space(H5Dget_space(dataset), "H5Dget_space", path);
    check_status(H5Dget_num_chunks(dataset, space.id(), &held), "H5Dget_num_chunks", path);
    const hsize_t need = chunk == 0 ? 0 : rows / chunk + (rows % chunk != 0);
    if (held < need)
      throw Error(path + ": " + std::to_string(rows) + " rows in its shape, but the file holds " +
                  std::to_string(held) + " of the " + std::to_string(need) + " chunks they need");
  } else if (layout == H5D_CONTIGUOUS) {
    Handle type(H5Dget_type(dataset), "H5Dget_type", path);
    const size_t size = H5Tget_size(type.id());
    const hsize_t held = H5Dget_storage_size(dataset);
    if (size > 0 && held / size < rows)
      throw Error(path + ": " + std::to_string(rows) + " rows in its shape, but the file holds " +
                  std::to_string(held) + " bytes");
  }
  return rows;
}

// Creates a 1-D dataset of `rows` elements; chunked, shuffled and deflated when `compress` and
// non-empty (a chunk cannot have zero rows), contiguous otherwise.
Handle create_dataset(hid_t loc, const std::string& name, hid_t file_type, size_t rows,
                      bool compress, const std::string& path) {
  const hsize_t dims = rows;
  Handle space(H5Screate_simple(1, &dims, nullptr), "H5Screate_simple", path);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", path);
  set_attr_order(dcpl.id(), path);
  if (compress && rows > 0) {
    const hsize_t chunk = std::min(rows, kTimelineChunkRows);
    check_status(H5Pset_chunk(dcpl.id(), 1, &chunk), "H5Pset_chunk", path);
    // Shuffling bytes first groups the slowly varying high bytes of the integer and float
    // fields, which deflate then compresses several times better.
    check_status(H5Pset_shuffle(dcpl.id()), "H5Pset_shuffle", path);
    check_status(H5Pset_deflate(dcpl.id(), kDeflateLevel), "H5Pset_deflate", path);
  }
  return Handle(
      H5Dcreate2(loc, name.c_str(), file_type, space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
      "H5Dcreate2", path);
}

// Writes all rows; an empty dataset needs no write (and `data` may then be null).
void write_rows(hid_t dataset, hid_t memory_type, size_t rows, const void* data,
                const std::string& path) {
  if (rows == 0) return;
  check_status(H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite",
               path);
}

void read_rows(hid_t dataset, hid_t memory_type, size_t rows, void* data, const std::string& path) {
  if (rows == 0) return;
  check_status(H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dread", path);
}

template <class T>
void write_numbers(hid_t loc, const std::string& name, const std::vector<T>& values,
                   hid_t file_type, hid_t memory_type) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle dataset = create_dataset(loc, name, file_type, values.size(), false, path);
  write_rows(dataset.id(), memory_type, values.size(), values.data(), path);
}

H5T_class_t type_class(hid_t type, const std::string& path) {
  const H5T_class_t cls = H5Tget_class(type);
  if (cls == H5T_NO_CLASS) throw Error(path + ": cannot determine the stored type");
  return cls;
}

// One field of a compound row buffer being read: its in-memory type and slot.
struct ReadField {
  std::string name;
  H5T_class_t cls = H5T_NO_CLASS;
  Handle memory_type;
  hid_t native = H5I_INVALID_HID; ///< predefined memory type for numbers (never closed)
  size_t offset = 0;
  size_t size = 0;
  bool variable = false;
  H5T_str_t pad = H5T_STR_NULLTERM;
};

// The timeline compound: every TimelineRecord member, named as in the struct.
struct TimelineField {
  const char* name;
  size_t offset;
  hid_t type;
};

std::vector<TimelineField> timeline_fields() {
  return {{"op_id", HOFFSET(TimelineRecord, op_id), H5T_NATIVE_INT32},
          {"layer", HOFFSET(TimelineRecord, layer), H5T_NATIVE_INT32},
          {"microbatch", HOFFSET(TimelineRecord, microbatch), H5T_NATIVE_INT32},
          {"iteration", HOFFSET(TimelineRecord, iteration), H5T_NATIVE_INT32},
          {"lane", HOFFSET(TimelineRecord, lane), H5T_NATIVE_UINT8},
          {"warmup", HOFFSET(TimelineRecord, warmup), H5T_NATIVE_UINT8},
          {"t_start_ns", HOFFSET(TimelineRecord, t_start_ns), H5T_NATIVE_INT64},
          {"t_end_ns", HOFFSET(TimelineRecord, t_end_ns), H5T_NATIVE_INT64},
          {"flops", HOFFSET(TimelineRecord, flops), H5T_NATIVE_DOUBLE},
          {"hbm_bytes", HOFFSET(TimelineRecord, hbm_bytes), H5T_NATIVE_DOUBLE},
          {"comm_bytes", HOFFSET(TimelineRecord, comm_bytes), H5T_NATIVE_DOUBLE}};
}

Handle timeline_memory_type(const std::string& path) {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(TimelineRecord)), "H5Tcreate", path);
  for (const TimelineField& field : timeline_fields())
    check_status(H5Tinsert(type.id(), field.name, field.offset, field.type), "H5Tinsert", path);
  return type;
}

} // namespace

namespace detail {

// HDF5 prints its whole error stack to stderr on every failure by default. ridgeline reports
// each failure once, as an Error carrying HDF5's own message, so the printing is switched off.
void quiet() {
  static const bool silenced = H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0;
  (void)silenced;
}

// Creation order of attributes tracked and indexed in `plist` (kCreationOrder).
void set_attr_order(hid_t plist, const std::string& path) {
  check_status(H5Pset_attr_creation_order(plist, kCreationOrder), "H5Pset_attr_creation_order",
               path);
}

} // namespace detail

Handle::Handle(hid_t id, const char* call, const std::string& path) {
  if (id < 0) check_status(-1, call, path);
  m_id = id;
}

Handle::~Handle() {
  if (m_id >= 0 && close_id(m_id) < 0)
    std::fprintf(stderr, "[rank %d] HDF5: closing an object failed: %s\n", error_rank(),
                 innermost_error().c_str());
}

Handle::Handle(Handle&& other) noexcept : m_id(std::exchange(other.m_id, H5I_INVALID_HID)) {}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    Handle old(std::move(*this));
    m_id = std::exchange(other.m_id, H5I_INVALID_HID);
  }
  return *this;
}

void Handle::close() {
  if (m_id < 0) return;
  const hid_t id = std::exchange(m_id, H5I_INVALID_HID);
  const std::string what = describe(id);
  check_status(close_id(id), "close", what);
}

void check_status(herr_t status, const char* call, const std::string& path) {
  if (status < 0)
    throw Error("HDF5 " + std::string(call) + " on '" + path + "': " + innermost_error());
}

std::string object_path(hid_t loc, const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;
  std::string base = "?";
  const ssize_t len = H5Iget_name(loc, nullptr, 0);
  if (len > 0) {
    base.assign(static_cast<size_t>(len) + 1, '\0');
    H5Iget_name(loc, base.data(), base.size());
    base.resize(static_cast<size_t>(len));
  }
  if (name.empty()) return base;
  return base.back() == '/' ? base + name : base + "/" + name;
}

Handle create_group(hid_t loc, const std::string& name) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), "H5Pcreate", path);
  set_attr_order(gcpl.id(), path);
  check_status(H5Pset_link_creation_order(gcpl.id(), kCreationOrder), "H5Pset_link_creation_order",
               path);
  return Handle(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl.id(), H5P_DEFAULT), "H5Gcreate2",
                path);
}

Handle open_group(hid_t loc, const std::string& name) {
  quiet();
  return Handle(H5Gopen2(loc, name.c_str(), H5P_DEFAULT), "H5Gopen2", object_path(loc, name));
}

bool exists(hid_t loc, const std::string& path) {
  quiet();
  // H5Lexists fails rather than answering false when an intermediate group is missing, so the
  // path is checked one component at a time.
  std::string prefix = !path.empty() && path.front() == '/' ? "/" : "";
  size_t begin = prefix.size();
  bool any = false;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find('/', begin), path.size());
    if (end > begin) {
      if (!prefix.empty() && prefix.back() != '/') prefix += '/';
      prefix += path.substr(begin, end - begin);
      const htri_t found = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
      check_status(found, "H5Lexists", object_path(loc, prefix));
      if (found == 0) return false;
      any = true;
    }
    begin = end + 1;
  }
  return any || path == "/";
}

std::vector<std::string> list_children(hid_t loc) {
  quiet();
  const std::string path = object_path(loc, "");
  H5G_info_t info;
  check_status(H5Gget_info(loc, &info), "H5Gget_info", path);
  Handle plist = creation_plist(loc, path);
  unsigned order = 0;
  check_status(H5Pget_link_creation_order(plist.id(), &order), "H5Pget_link_creation_order", path);
  const H5_index_t index = (order & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len =
        H5Lget_name_by_idx(loc, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check_size(len, "H5Lget_name_by_idx", path);
    std::string name(static_cast<size_t>(len) + 1, '\0');
    check_size(
        H5Lget_name_by_idx(loc, ".", index, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT),
        "H5Lget_name_by_idx", path);
    name.resize(static_cast<size_t>(len));
    names.push_back(std::move(name));
  }
  return names;
}

void write_attr(hid_t obj, const std::string& name, const AttrValue& value) {
  quiet();
  const std::string path = attr_path(obj, name);
  Handle space(H5Screate(H5S_SCALAR), "H5Screate", path);
  auto create = [&](hid_t file_type) {
    return Handle(H5Acreate2(obj, name.c_str(), file_type, space.id(), H5P_DEFAULT, H5P_DEFAULT),
                  "H5Acreate2", path);
  };
  if (const auto* i = std::get_if<int64_t>(&value)) {
    Handle attr = create(H5T_STD_I64LE);
    check_status(H5Awrite(attr.id(), H5T_NATIVE_INT64, i), "H5Awrite", path);
  } else if (const auto* d = std::get_if<double>(&value)) {
    Handle attr = create(H5T_IEEE_F64LE);
    check_status(H5Awrite(attr.id(), H5T_NATIVE_DOUBLE, d), "H5Awrite", path);
  } else {
    Handle type = vlen_string_type(H5T_CSET_UTF8, path);
    Handle attr = create(type.id());
    const char* text = std::get<std::string>(value).c_str();
    check_status(H5Awrite(attr.id(), type.id(), &text), "H5Awrite", path);
  }
}

void write_attrs(hid_t obj, const Attrs& attrs) {
  for (const auto& [name, value] : attrs)
    write_attr(obj, name, value);
}

Attrs read_attrs(hid_t obj) {
  quiet();
  const std::string path = object_path(obj, "");
  Handle plist = creation_plist(obj, path);
  unsigned order = 0;
  if (plist.id() >= 0)
    check_status(H5Pget_attr_creation_order(plist.id(), &order), "H5Pget_attr_creation_order",
                 path);
  const H5_index_t index = (order & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
  std::vector<std::string> names;
  check_status(H5Aiterate2(
                   obj, index, H5_ITER_INC, nullptr,
                   [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
                     static_cast<std::vector<std::string>*>(out)->emplace_back(name);
                     return 0;
                   },
                   &names),
               "H5Aiterate2", path);

  Attrs attrs;
  for (const std::string& name : names) {
    const std::string where = attr_path(obj, name);
    Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "H5Aopen", where);
    Handle type(H5Aget_type(attr.id()), "H5Aget_type", where);
    Handle space(H5Aget_space(attr.id()), "H5Aget_space", where);
    if (H5Sget_simple_extent_npoints(space.id()) != 1)
      throw Error(where + ": attribute is not a single value");
    switch (type_class(type.id(), where)) {
    case H5T_INTEGER: {
      int64_t value = 0;
      check_status(H5Aread(attr.id(), H5T_NATIVE_INT64, &value), "H5Aread", where);
      attrs.emplace_back(name, value);
      break;
    }
    case H5T_FLOAT: {
      double value = 0;
      check_status(H5Aread(attr.id(), H5T_NATIVE_DOUBLE, &value), "H5Aread", where);
      attrs.emplace_back(name, value);
      break;
    }
    case H5T_STRING: {
      auto texts = read_strings_as(type.id(), 1, where, [&](hid_t memory, void* buffer) {
        check_status(H5Aread(attr.id(), memory, buffer), "H5Aread", where);
      });
      attrs.emplace_back(name, std::move(texts.front()));
      break;
    }
    default:
      throw Error(where + ": unsupported attribute type (not integer, float or string)");
    }
  }
  return attrs;
}

size_t column_size(const ColumnValues& values) {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

const Column* find_column(const Table& table, const std::string& name) {
  for (const Column& column : table)
    if (column.name == name) return &column;
  return nullptr;
}

void write_dataset(hid_t loc, const std::string& name, const std::vector<double>& values) {
  write_numbers(loc, name, values, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
}

void write_dataset(hid_t loc, const std::string& name, const std::vector<int64_t>& values) {
  write_numbers(loc, name, values, H5T_STD_I64LE, H5T_NATIVE_INT64);
}

void write_dataset(hid_t loc, const std::string& name, const std::vector<std::string>& values) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle type = vlen_string_type(H5T_CSET_UTF8, path);
  Handle dataset = create_dataset(loc, name, type.id(), values.size(), false, path);
  std::vector<const char*> texts;
  texts.reserve(values.size());
  for (const std::string& value : values)
    texts.push_back(value.c_str());
  write_rows(dataset.id(), type.id(), texts.size(), texts.data(), path);
}

size_t dataset_rows(hid_t loc, const std::string& name) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle dataset = open_dataset(loc, name, path);
  return row_count(dataset.id(), path);
}

ColumnValues read_dataset(hid_t loc, const std::string& name) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle dataset = open_dataset(loc, name, path);
  const size_t rows = stored_row_count(dataset.id(), path);
  Handle type(H5Dget_type(dataset.id()), "H5Dget_type", path);
  switch (type_class(type.id(), path)) {
  case H5T_INTEGER: {
    std::vector<int64_t> values(rows);
    read_rows(dataset.id(), H5T_NATIVE_INT64, rows, values.data(), path);
    return values;
  }
  case H5T_FLOAT: {
    std::vector<double> values(rows);
    read_rows(dataset.id(), H5T_NATIVE_DOUBLE, rows, values.data(), path);
    return values;
  }
  case H5T_STRING:
    return read_strings_as(type.id(), rows, path, [&](hid_t memory, void* buffer) {
      read_rows(dataset.id(), memory, rows, buffer, path);
    });
  default:
    throw Error(path + ": unsupported element type (not integer, float or string)");
  }
}

namespace {

// A table as HDF5 writes it: the compound type (an 8-byte slot per field) and the packed rows,
// whose string fields point into `table`.
struct PackedTable {
  Handle type;
  size_t rows = 0;
  std::vector<unsigned char> buffer;
};

PackedTable pack_table(const Table& table, const std::string& path, bool with_rows) {
  if (table.empty()) throw Error(path + ": a table needs at least one column");
  const size_t rows = column_size(table.front().values);
  for (const Column& column : table)
    if (column_size(column.values) != rows)
      throw Error(path + ": column '" + column.name + "' has " +
                  std::to_string(column_size(column.values)) + " values, column '" +
                  table.front().name + "' has " + std::to_string(rows));

  const size_t row_size = table.size() * kSlot;
  PackedTable packed;
  packed.type = Handle(H5Tcreate(H5T_COMPOUND, row_size), "H5Tcreate", path);
  packed.rows = rows;
  Handle text_type = vlen_string_type(H5T_CSET_UTF8, path);
  if (with_rows) packed.buffer.resize(rows * row_size);
  std::vector<unsigned char>& buffer = packed.buffer;
  for (size_t c = 0; c < table.size(); ++c) {
    const size_t offset = c * kSlot;
    const char* field = table[c].name.c_str();
    std::visit(
        [&](const auto& values) {
          using T = typename std::decay_t<decltype(values)>::value_type;
          if constexpr (std::is_same_v<T, std::string>) {
            check_status(H5Tinsert(packed.type.id(), field, offset, text_type.id()), "H5Tinsert",
                         path);
            for (size_t r = 0; with_rows && r < rows; ++r) {
              const char* text = values[r].c_str();
              std::memcpy(&buffer[r * row_size + offset], &text, sizeof(text));
            }
          } else {
            const hid_t native = std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
            check_status(H5Tinsert(packed.type.id(), field, offset, native), "H5Tinsert", path);
            for (size_t r = 0; with_rows && r < rows; ++r)
              std::memcpy(&buffer[r * row_size + offset], &values[r], sizeof(T));
          }
        },
        table[c].values);
  }
  return packed;
}

} // namespace

void write_table(hid_t loc, const std::string& name, const Table& table, bool compress) {
  quiet();
  const std::string path = object_path(loc, name);
  const PackedTable packed = pack_table(table, path, true);
  Handle dataset = create_dataset(loc, name, packed.type.id(), packed.rows, compress, path);
  write_rows(dataset.id(), packed.type.id(), packed.rows, packed.buffer.data(), path);
}

Handle create_table(hid_t loc, const std::string& name, const Table& like, size_t rows,
                    bool compress) {
  quiet();
  const std::string path = object_path(loc, name);
  const PackedTable packed = pack_table(like, path, false);
  return create_dataset(loc, name, packed.type.id(), rows, compress, path);
}

void write_table_rows(hid_t dataset, const Table& table) {
  quiet();
  const std::string path = object_path(dataset, "");
  const PackedTable packed = pack_table(table, path, true);
  const size_t rows = row_count(dataset, path);
  if (rows != packed.rows)
    throw Error(path + ": " + std::to_string(packed.rows) + " rows for a dataset of " +
                std::to_string(rows));
  write_rows(dataset, packed.type.id(), packed.rows, packed.buffer.data(), path);
}

Table read_table(hid_t loc, const std::string& name) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle dataset = open_dataset(loc, name, path);
  const size_t rows = stored_row_count(dataset.id(), path);
  Handle stored(H5Dget_type(dataset.id()), "H5Dget_type", path);
  if (type_class(stored.id(), path) != H5T_COMPOUND) throw Error(path + ": not a compound dataset");
  const int members = H5Tget_nmembers(stored.id());
  check_status(members, "H5Tget_nmembers", path);
  if (members == 0) throw Error(path + ": compound type without fields");

  std::vector<ReadField> fields(static_cast<size_t>(members));
  size_t row_size = 0;
  for (unsigned i = 0; i < static_cast<unsigned>(members); ++i) {
    ReadField& field = fields[i];
    char* member_name = H5Tget_member_name(stored.id(), i);
    if (member_name == nullptr) check_status(-1, "H5Tget_member_name", path);
    field.name = member_name;
    H5free_memory(member_name);
    Handle member(H5Tget_member_type(stored.id(), i), "H5Tget_member_type", path);
    field.cls = type_class(member.id(), path);
    switch (field.cls) {
    case H5T_INTEGER:
      field.native = H5T_NATIVE_INT64;
      field.size = sizeof(int64_t);
      break;
    case H5T_FLOAT:
      field.native = H5T_NATIVE_DOUBLE;
      field.size = sizeof(double);
      break;
    case H5T_STRING:
      field.variable = is_variable_string(member.id(), path);
      if (field.variable) {
        field.memory_type = vlen_string_type(H5Tget_cset(member.id()), path);
        field.size = sizeof(char*);
      } else {
        field.memory_type = Handle(H5Tcopy(member.id()), "H5Tcopy", path);
        field.size = H5Tget_size(member.id());
        field.pad = H5Tget_strpad(member.id());
      }
      break;
    default:
      throw Error(path + ": field '" + field.name +
                  "' has an unsupported type (not integer, float or string)");
    }
    field.offset = row_size;
    row_size += (field.size + kSlot - 1) / kSlot * kSlot;
  }

  Handle memory(H5Tcreate(H5T_COMPOUND, row_size), "H5Tcreate", path);
  for (const ReadField& field : fields) {
    const hid_t member = field.native >= 0 ? field.native : field.memory_type.id();
    check_status(H5Tinsert(memory.id(), field.name.c_str(), field.offset, member), "H5Tinsert",
                 path);
  }
  std::vector<unsigned char> buffer(rows * row_size);
  VlenStrings owned;
  read_rows(dataset.id(), memory.id(), rows, buffer.data(), path);
  for (const ReadField& field : fields)
    if (field.variable)
      for (size_t r = 0; r < rows; ++r) {
        char* text = nullptr;
        std::memcpy(&text, &buffer[r * row_size + field.offset], sizeof(text));
        owned.add(text);
      }

  Table table;
  for (const ReadField& field : fields) {
    const unsigned char* base = buffer.data() + field.offset;
    if (field.cls == H5T_INTEGER || field.cls == H5T_FLOAT) {
      auto extract = [&](auto zero) {
        std::vector<decltype(zero)> values(rows);
        for (size_t r = 0; r < rows; ++r)
          std::memcpy(&values[r], base + r * row_size, sizeof(zero));
        table.push_back({field.name, std::move(values)});
      };
      if (field.cls == H5T_INTEGER)
        extract(int64_t{0});
      else
        extract(double{0});
      continue;
    }
    std::vector<std::string> values;
    values.reserve(rows);
    for (size_t r = 0; r < rows; ++r) {
      const unsigned char* cell = base + r * row_size;
      if (field.variable) {
        const char* text = nullptr;
        std::memcpy(&text, cell, sizeof(text));
        values.emplace_back(text != nullptr ? text : "");
      } else {
        values.push_back(fixed_string(reinterpret_cast<const char*>(cell), field.size, field.pad));
      }
    }
    table.push_back({field.name, std::move(values)});
  }
  return table;
}

void write_timeline(hid_t loc, const std::string& name, const std::vector<TimelineRecord>& rows) {
  Handle dataset = create_timeline(loc, name, rows.size(), true);
  write_timeline_rows(dataset.id(), rows);
}

Handle create_timeline(hid_t loc, const std::string& name, size_t rows, bool compress) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle memory = timeline_memory_type(path);
  // The file type drops the struct's padding bytes: 58 bytes a row instead of 64.
  Handle packed(H5Tcopy(memory.id()), "H5Tcopy", path);
  check_status(H5Tpack(packed.id()), "H5Tpack", path);
  return create_dataset(loc, name, packed.id(), rows, compress, path);
}

void write_timeline_rows(hid_t dataset, const std::vector<TimelineRecord>& rows) {
  quiet();
  const std::string path = object_path(dataset, "");
  if (row_count(dataset, path) != rows.size())
    throw Error(path + ": " + std::to_string(rows.size()) + " rows for a timeline of " +
                std::to_string(row_count(dataset, path)));
  Handle memory = timeline_memory_type(path);
  write_rows(dataset, memory.id(), rows.size(), rows.data(), path);
}

std::vector<TimelineRecord> read_timeline(hid_t loc, const std::string& name) {
  quiet();
  const std::string path = object_path(loc, name);
  Handle dataset = open_dataset(loc, name, path);
  const size_t rows = stored_row_count(dataset.id(), path);
  Handle stored(H5Dget_type(dataset.id()), "H5Dget_type", path);
  if (type_class(stored.id(), path) != H5T_COMPOUND) throw Error(path + ": not a compound dataset");
  // HDF5 matches compound fields by name and silently leaves unmatched ones untouched, so a
  // missing field would read as zeros; check every field first.
  for (const TimelineField& field : timeline_fields()) {
    const int index = H5Tget_member_index(stored.id(), field.name);
    if (index < 0) throw Error(path + ": field '" + field.name + "' missing");
    if (H5Tget_member_class(stored.id(), static_cast<unsigned>(index)) != H5Tget_class(field.type))
      throw Error(path + ": field '" + field.name + "' has the wrong type class");
  }
  Handle memory = timeline_memory_type(path);
  std::vector<TimelineRecord> records(rows);
  read_rows(dataset.id(), memory.id(), rows, records.data(), path);
  return records;
}

} // namespace ridgeline::h5
