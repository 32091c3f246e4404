// Attribute helpers for RunData.
#include "app/run_data.hpp"

#include <cstdio>

namespace ridgeline {

const AttrValue* find_attr(const Attrs& attrs, const std::string& key) {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

bool has_run_layout(const Attrs& root) {
  const AttrValue* command = find_attr(root, "command");
  if (command == nullptr) return true;
  const std::string* name = std::get_if<std::string>(command);
  return name == nullptr || (*name != "collectives" && *name != "roofs" && *name != "sweep");
}

std::string attr_to_string(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", *d);
    return buf;
  }
  return std::get<std::string>(v);
}

} // namespace ridgeline
