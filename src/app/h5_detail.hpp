// What the HDF5 layer's sources (h5.cpp, h5_files.cpp) share beyond h5.hpp. Internal to them.
#pragma once

#include <string>

#include <hdf5.h>

namespace ridgeline::h5::detail {

/// Creation order of links and attributes is tracked and indexed everywhere ridgeline writes, so
/// readers get attributes and children back in the order they were written.
inline constexpr unsigned kCreationOrder = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;

/// Switches off HDF5's printing of its error stack (ridgeline reports each failure once).
void quiet();
/// Tracks and indexes the creation order of attributes in the creation list `plist`.
void set_attr_order(hid_t plist, const std::string& path);

} // namespace ridgeline::h5::detail
