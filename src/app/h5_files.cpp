// The HDF5 layer's files and links (see h5.hpp): creating, opening (serial, in memory, through
// MPI-IO) and saving files, the refusal of links that lead to anything but a regular file, and
// hard and external links.
#include "app/h5.hpp"

#include <cstdio>
#include <cstring>
#include <utility>

#include "app/h5_detail.hpp"
#include "core/files.hpp"

namespace ridgeline::h5 {

using detail::kCreationOrder;
using detail::quiet;
using detail::set_attr_order;

namespace {

// A file creation list whose groups keep link and attribute creation order.
Handle creation_list(const std::string& path) {
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate", path);
  set_attr_order(fcpl.id(), path);
  check_status(H5Pset_link_creation_order(fcpl.id(), kCreationOrder), "H5Pset_link_creation_order",
               path);
  return fcpl;
}

} // namespace

Handle create_file(const std::string& path) {
  quiet();
  Handle fcpl = creation_list(path);
  return Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.id(), H5P_DEFAULT), "H5Fcreate", path);
}

namespace {

// The core driver's file access list: memory grows by 4 MiB at a time, no backing store.
Handle memory_access(const std::string& path) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", path);
  check_status(H5Pset_fapl_core(fapl.id(), size_t{4} << 20, false), "H5Pset_fapl_core", path);
  return fapl;
}

} // namespace

Handle create_memory_file(const std::string& path) {
  quiet();
  Handle fcpl = creation_list(path);
  Handle fapl = memory_access(path);
  return Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.id(), fapl.id()), "H5Fcreate", path);
}

Handle open_memory_file(const std::string& path) {
  quiet();
  Handle fapl = memory_access(path);
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.id()), "H5Fopen", path);
}

void save_memory_file(Handle& file, const std::string& path) {
  quiet();
  check_status(H5Fflush(file.id(), H5F_SCOPE_GLOBAL), "H5Fflush", path);
  const ssize_t size = H5Fget_file_image(file.id(), nullptr, 0);
  check_status(size < 0 ? -1 : 0, "H5Fget_file_image", path);
  std::vector<char> image(static_cast<size_t>(size));
  check_status(H5Fget_file_image(file.id(), image.data(), image.size()) < 0 ? -1 : 0,
               "H5Fget_file_image", path);
  file.close();
  write_whole_file(path, image.data(), image.size());
}

bool is_hdf5_file(const std::string& path) {
  quiet();
  const htri_t hdf5 = H5Fis_hdf5(path.c_str());
  check_status(hdf5, "H5Fis_hdf5", path);
  return hdf5 > 0;
}

namespace {

// Refuses a file whose external links lead to something that is not a regular file (a FIFO
// would block the first reader that follows the link, forever). The links are visited, not
// followed; a target is looked for where HDF5 looks: as written when absolute, else beside the
// linking file and in the working directory.
struct LinkCheck {
  std::string directory, problem;
};

herr_t check_link(hid_t loc, const char* name, const H5L_info_t* info, void* data) {
  auto* check = static_cast<LinkCheck*>(data);
  if (info->type != H5L_TYPE_EXTERNAL) return 0;
  std::optional<ExternalLink> link;
  try {
    link = external_link(loc, name);
  } catch (const Error&) {
    return 0; // unreadable links are the validator's to report
  }
  const std::string& target = link->file;
  std::vector<std::string> candidates{target};
  if (!target.empty() && target.front() != '/') candidates.push_back(check->directory + target);
  for (const std::string& candidate : candidates) {
    const std::string kind = not_regular(candidate);
    if (kind.empty()) continue;
    check->problem = "the external link /" + std::string(name) + " leads to '" + candidate +
                     "', which is " + kind + ", not a regular file";
    return 1; // stop the visit
  }
  return 0;
}

} // namespace

Handle open_file_read(const std::string& path) {
  quiet();
  if (const std::string kind = not_regular(path); !kind.empty())
    throw Error(path + ": is " + kind + ", not a regular file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen", path);
  const size_t slash = path.find_last_of('/');
  LinkCheck check{slash == std::string::npos ? "" : path.substr(0, slash + 1), ""};
  check_status(H5Lvisit(file.id(), H5_INDEX_NAME, H5_ITER_NATIVE, check_link, &check), "H5Lvisit",
               path);
  if (!check.problem.empty()) throw Error(check.problem);
  return file;
}

Handle open_file_write(const std::string& path) {
  quiet();
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen", path);
}

bool parallel_library() {
#ifdef H5_HAVE_PARALLEL
  return true;
#else
  return false;
#endif
}

Handle open_file_parallel(const std::string& path, MPI_Comm comm) {
  quiet();
#ifdef H5_HAVE_PARALLEL
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", path);
  check_status(H5Pset_fapl_mpio(fapl.id(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio", path);
  // Metadata read by one rank and broadcast, and written collectively: without these every
  // rank reads and writes the same metadata, which at thousands of ranks is the bottleneck.
  check_status(H5Pset_all_coll_metadata_ops(fapl.id(), true), "H5Pset_all_coll_metadata_ops", path);
  check_status(H5Pset_coll_metadata_write(fapl.id(), true), "H5Pset_coll_metadata_write", path);
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.id()), "H5Fopen", path);
#else
  (void)comm;
  throw Error(
      path +
      ": this HDF5 library is serial (no MPI-IO); the single-file layout needs parallel HDF5");
#endif
}

void create_hard_link(hid_t loc, const std::string& target, const std::string& name) {
  quiet();
  check_status(H5Lcreate_hard(loc, target.c_str(), loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
               "H5Lcreate_hard", object_path(loc, name));
}

void create_external_link(hid_t loc, const std::string& name, const std::string& file,
                          const std::string& object) {
  quiet();
  check_status(
      H5Lcreate_external(file.c_str(), object.c_str(), loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
      "H5Lcreate_external", object_path(loc, name));
}

std::optional<ExternalLink> external_link(hid_t loc, const std::string& name) {
  quiet();
  const std::string path = object_path(loc, name);
  H5L_info_t info;
  check_status(H5Lget_info(loc, name.c_str(), &info, H5P_DEFAULT), "H5Lget_info", path);
  if (info.type != H5L_TYPE_EXTERNAL) return std::nullopt;
  std::vector<char> value(info.u.val_size);
  check_status(H5Lget_val(loc, name.c_str(), value.data(), value.size(), H5P_DEFAULT), "H5Lget_val",
               path);
  const char* file = nullptr;
  const char* object = nullptr;
  check_status(H5Lunpack_elink_val(value.data(), value.size(), nullptr, &file, &object),
               "H5Lunpack_elink_val", path);
  return ExternalLink{file, object};
}

} // namespace ridgeline::h5
