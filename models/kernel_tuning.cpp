// Strict parsing of the CUDA backend's kernel switches (kernel_tuning.hpp).
#include "models/kernel_tuning.hpp"

#include <cstdlib>
#include <set>
#include <string>

#include "core/error.hpp"

namespace ridgeline {
namespace {

struct Namer {
  bool from_env;
  [[noreturn]] void refuse(const char* option, const char* variable, const std::string& value,
                           const std::string& expected) const {
    throw UsageError(from_env ? std::string(variable) + "='" + value + "': expected " + expected
                              : std::string(option) + " '" + value + "': expected " + expected);
  }
};

KernelTuning::Pdl parse_pdl(const std::string& v, const Namer& n) {
  if (v.empty() || v == "1") return KernelTuning::Pdl::chain;
  if (v == "0") return KernelTuning::Pdl::off;
  if (v == "gemm") return KernelTuning::Pdl::gemm;
  n.refuse("--pdl", "RIDGELINE_PDL", v,
           "0 (none), gemm (the skinny GEMM alone) or 1 (the default)");
}

int64_t parse_skinny_rows(const std::string& v, const Namer& n) {
  if (v.empty()) return kSkinnyGemvRows;
  const std::string expected = "an integer from 1 to " + std::to_string(kSkinnyMaxRows);
  if (v.size() > 2 || v.find_first_not_of("0123456789") != std::string::npos)
    n.refuse("--skinny-rows", "RIDGELINE_SKINNY_ROWS", v, expected);
  const int64_t rows = std::stoll(v);
  if (rows < 1 || rows > kSkinnyMaxRows)
    n.refuse("--skinny-rows", "RIDGELINE_SKINNY_ROWS", v, expected);
  return rows;
}

void parse_epilogues(const std::string& v, const Namer& n, KernelTuning& t) {
  if (v.empty()) return;
  const std::string expected = "0 or a comma list of norm, rotary, act and residual";
  t.fold_norm = t.fold_rotary = t.fold_act = t.fold_residual = false;
  if (v == "0") return;
  std::set<std::string> seen;
  size_t start = 0;
  while (true) {
    const size_t comma = v.find(',', start);
    const std::string item = v.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!seen.insert(item).second)
      n.refuse("--epilogues", "RIDGELINE_EPILOGUES", v, expected + ", each once");
    if (item == "norm")
      t.fold_norm = true;
    else if (item == "rotary")
      t.fold_rotary = true;
    else if (item == "act")
      t.fold_act = true;
    else if (item == "residual")
      t.fold_residual = true;
    else
      n.refuse("--epilogues", "RIDGELINE_EPILOGUES", v, expected);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

std::string env_text(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

} // namespace

KernelTuning parse_kernel_tuning(const KernelTuningText& text, bool from_env) {
  const Namer n{from_env};
  KernelTuning t;
  t.pdl = parse_pdl(text.pdl, n);
  t.skinny_rows = parse_skinny_rows(text.skinny_rows, n);
  parse_epilogues(text.epilogues, n, t);
  return t;
}

KernelTuningText kernel_tuning_env() {
  return {env_text("RIDGELINE_PDL"), env_text("RIDGELINE_SKINNY_ROWS"),
          env_text("RIDGELINE_EPILOGUES")};
}

KernelTuning tuning_env() {
  return parse_kernel_tuning(kernel_tuning_env(), true);
}

KernelTuningText kernel_tuning_text(const KernelTuning& t) {
  KernelTuningText out;
  out.pdl = t.pdl == KernelTuning::Pdl::off ? "0" : t.pdl == KernelTuning::Pdl::gemm ? "gemm" : "1";
  out.skinny_rows = std::to_string(t.skinny_rows);
  for (const auto& [on, name] : {std::pair<bool, const char*>{t.fold_norm, "norm"},
                                 {t.fold_rotary, "rotary"},
                                 {t.fold_act, "act"},
                                 {t.fold_residual, "residual"}})
    if (on) out.epilogues += (out.epilogues.empty() ? "" : ",") + std::string(name);
  if (out.epilogues.empty()) out.epilogues = "0";
  return out;
}

} // namespace ridgeline
