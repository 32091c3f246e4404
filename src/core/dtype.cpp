// Names of element types.
#include "dtype.hpp"

#include "error.hpp"

namespace ridgeline {

const char* dtype_name(DType t) {
  switch (t) {
  case DType::f32:
    return "fp32";
  case DType::bf16:
    return "bf16";
  case DType::f16:
    return "fp16";
  case DType::i32:
    return "int32";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float" || name == "f32") return DType::f32;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "fp16" || name == "half" || name == "f16") return DType::f16;
  if (name == "int32" || name == "int" || name == "i32") return DType::i32;
  throw UsageError("unknown data type '" + name + "' (expected fp32, bf16, fp16 or int32)");
}

std::string dtype_choices(const std::vector<DType>& accepted) {
  std::string text;
  for (size_t i = 0; i < accepted.size(); ++i)
    text += std::string(i == 0                     ? ""
                        : i + 1 == accepted.size() ? " or "
                                                   : ", ") +
            dtype_name(accepted[i]);
  return text;
}

DType parse_dtype_of(const std::string& name, const std::vector<DType>& accepted) {
  for (DType t : accepted)
    if (name == dtype_name(t)) return t;
  throw UsageError("unknown data type '" + name + "' (expected " + dtype_choices(accepted) + ")");
}

} // namespace ridgeline
