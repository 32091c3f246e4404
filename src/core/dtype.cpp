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

} // namespace ridgeline
