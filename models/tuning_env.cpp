// Strict parsing of the CUDA backend's environment switches (tuning_env.hpp).
#include "models/tuning_env.hpp"

#include <cstdlib>
#include <set>
#include <string>

#include "core/error.hpp"

namespace ridgeline {
namespace {

[[noreturn]] void refuse(const char* name, const std::string& value, const std::string& expected) {
  throw UsageError(std::string(name) + "='" + value + "': expected " + expected);
}

} // namespace

TuningEnv tuning_env() {
  TuningEnv t;
  if (const char* env = std::getenv("RIDGELINE_PDL")) {
    const std::string v = env;
    if (v == "0")
      t.pdl = TuningEnv::Pdl::off;
    else if (v == "gemm")
      t.pdl = TuningEnv::Pdl::gemm;
    else if (v != "1")
      refuse("RIDGELINE_PDL", v, "0 (none), gemm (the skinny GEMM alone) or 1 (the default)");
  }
  if (const char* env = std::getenv("RIDGELINE_SKINNY_ROWS")) {
    const std::string v = env;
    const std::string expected = "an integer from 1 to " + std::to_string(kSkinnyMaxRows);
    if (v.empty() || v.size() > 2 || v.find_first_not_of("0123456789") != std::string::npos)
      refuse("RIDGELINE_SKINNY_ROWS", v, expected);
    t.skinny_rows = std::stoll(v);
    if (t.skinny_rows < 1 || t.skinny_rows > kSkinnyMaxRows)
      refuse("RIDGELINE_SKINNY_ROWS", v, expected);
  }
  if (const char* env = std::getenv("RIDGELINE_EPILOGUES")) {
    const std::string v = env;
    const std::string expected = "0 or a comma list of norm, rotary, act and residual";
    t.fold_norm = t.fold_rotary = t.fold_act = t.fold_residual = false;
    if (v != "0") {
      std::set<std::string> seen;
      size_t start = 0;
      while (true) {
        const size_t comma = v.find(',', start);
        const std::string item =
            v.substr(start, comma == std::string::npos ? comma : comma - start);
        if (!seen.insert(item).second) refuse("RIDGELINE_EPILOGUES", v, expected + ", each once");
        if (item == "norm")
          t.fold_norm = true;
        else if (item == "rotary")
          t.fold_rotary = true;
        else if (item == "act")
          t.fold_act = true;
        else if (item == "residual")
          t.fold_residual = true;
        else
          refuse("RIDGELINE_EPILOGUES", v, expected);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
  }
  return t;
}

} // namespace ridgeline
