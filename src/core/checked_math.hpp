// Size arithmetic that cannot wrap: a product of sizes (elements, bytes) that does not fit 64
// bits is an error, never a small number that a buffer is then allocated with and written past.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace ridgeline {

/// a * b for sizes (a, b >= 0); throws UsageError naming `what` when the product does not fit
/// int64_t.
inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product))
    throw UsageError(std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) +
                     (a < 0 || b < 0 ? " is not a size" : " does not fit 64 bits"));
  return product;
}

} // namespace ridgeline
