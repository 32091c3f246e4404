#include "models/op_registry.hpp"

#include "core/error.hpp"

namespace ridgeline {

int op_index(const std::string& name) {
  for (int i = 0; i < layer_op::op_count; ++i)
    if (name == kOpRows[i].name) return i;
  return -1;
}

const OpRow& op_row(const std::string& name) {
  const int i = op_index(name);
  RIDGELINE_REQUIRE(i >= 0,
                    "no op named '" + name + "' in the op registry (models/op_registry.hpp)");
  return kOpRows[i];
}

} // namespace ridgeline
