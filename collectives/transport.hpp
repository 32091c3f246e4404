// NCCL transport presets (auto, nvlink, host, net): the NCCL variables each sets before a
// communicator exists, and the NVLink check. `collectives`, `run` and `sweep` share them.
#pragma once

#include <string>
#include <vector>

namespace ridgeline {

/// One NCCL variable of a transport preset.
struct EnvSetting {
  const char* name;
  const char* value;
};

/// A transport preset: the NCCL variables it sets before the communicator exists.
struct TransportPreset {
  const char* name;
  std::vector<EnvSetting> env;
};

/// Every preset: auto, nvlink, host, net.
const std::vector<TransportPreset>& transport_presets();
/// The preset called `name`, or nullptr.
const TransportPreset* find_transport(const std::string& name);
/// The preset names for messages: "auto, nvlink, host or net".
std::string transport_names();

/// Sets the preset's NCCL variables in this process's environment, and NCCL_NVLS_ENABLE=0 unless
/// the environment already sets it; returns what was set. Appends a warning (for rank 0 to print)
/// for each variable of the user's environment it overrode with another value.
std::vector<EnvSetting> apply_transport(const TransportPreset& preset,
                                        std::vector<std::string>& warnings);

/// For the nvlink preset: appends a warning for each pair of the first `local_gpus` GPUs whose
/// entry in `links` (the link matrix, e.g. gpu_link_matrix(); "NV<n>" for NVLink) is not NVLink,
/// or one warning when `links` is empty (nothing to confirm NVLink with).
void check_nvlink(int local_gpus, const std::vector<std::vector<std::string>>& links,
                  std::vector<std::string>& warnings);

} // namespace ridgeline
