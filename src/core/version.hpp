// Library version codes of the form major * 10000 + minor * 100 + patch (NCCL, cuBLASLt) as text.
#pragma once

#include <string>

namespace ridgeline {

inline std::string dotted_version(long code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

} // namespace ridgeline
