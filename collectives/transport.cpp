// The transport preset table and its application to the environment NCCL reads at init.
#include "collectives/transport.hpp"

#include <algorithm>
#include <cstdlib>

namespace ridgeline {

const std::vector<TransportPreset>& transport_presets() {
  // auto and nvlink leave NCCL's choice alone (nvlink is recorded and checked against the link
  // matrix); host forbids peer-to-peer so traffic goes through host memory; net also forbids
  // shared memory and selects the socket transport, as between nodes.
  static const std::vector<TransportPreset> presets = {
      {"auto", {}},
      {"nvlink", {}},
      {"host", {{"NCCL_P2P_DISABLE", "1"}}},
      {"net", {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "Socket"}}},
  };
  return presets;
}

const TransportPreset* find_transport(const std::string& name) {
  for (const TransportPreset& t : transport_presets())
    if (name == t.name) return &t;
  return nullptr;
}

std::string transport_names() {
  const std::vector<TransportPreset>& presets = transport_presets();
  std::string text;
  for (size_t i = 0; i < presets.size(); ++i) {
    if (i > 0) text += i + 1 == presets.size() ? " or " : ", ";
    text += presets[i].name;
  }
  return text;
}

std::vector<EnvSetting> apply_transport(const TransportPreset& preset,
                                        std::vector<std::string>& warnings) {
  std::vector<EnvSetting> applied;
  for (const EnvSetting& e : preset.env) {
    const char* before = std::getenv(e.name);
    if (before != nullptr && std::string(before) != e.value)
      warnings.push_back(std::string("--transport ") + preset.name + " sets " + e.name + "=" +
                         e.value + ", overriding " + e.name + "=" + before +
                         " from the environment");
    setenv(e.name, e.value, 1);
    applied.push_back(e);
  }
  // NVLink multicast stays off on the reference machines unless the user asks for it.
  if (std::getenv("NCCL_NVLS_ENABLE") == nullptr) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    applied.push_back({"NCCL_NVLS_ENABLE", "0"});
  }
  return applied;
}

void check_nvlink(int local_gpus, const std::vector<std::vector<std::string>>& links,
                  std::vector<std::string>& warnings) {
  if (links.empty()) {
    warnings.emplace_back("--transport nvlink: no GPU link matrix (NVML) to confirm NVLink");
    return;
  }
  const auto n = std::min(links.size(), static_cast<size_t>(local_gpus));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n && j < links[i].size(); ++j)
      if (links[i][j].rfind("NV", 0) != 0)
        warnings.push_back("--transport nvlink: GPUs " + std::to_string(i) + " and " +
                           std::to_string(j) + " are linked by " + links[i][j] + ", not NVLink");
}

} // namespace ridgeline
