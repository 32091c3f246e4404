// Element types shared by kernels, collectives and the file schema.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ridgeline {

enum class DType : uint8_t { f32 = 0, bf16 = 1, f16 = 2, i32 = 3 };

/// Bytes per element.
constexpr size_t dtype_size(DType t) {
  return t == DType::f32 || t == DType::i32 ? 4 : 2;
}
/// "fp32", "bf16", "fp16", "int32".
const char* dtype_name(DType t);
/// Parses the names above (and "float", "half", "int"); throws UsageError otherwise.
DType parse_dtype(const std::string& name);
/// The names of `accepted` as an error lists them: "fp32, bf16 or fp16".
std::string dtype_choices(const std::vector<DType>& accepted);
/// One of `accepted`, spelt as dtype_name() spells it (what an option takes); throws UsageError
/// naming exactly the accepted names otherwise.
DType parse_dtype_of(const std::string& name, const std::vector<DType>& accepted);

} // namespace ridgeline
