// The CUDA backend's kernel switches (--pdl, --skinny-rows, --epilogues), whose defaults come
// from the environment (RIDGELINE_PDL, RIDGELINE_SKINNY_ROWS, RIDGELINE_EPILOGUES). Parsed
// strictly: a value a switch does not take is an error that names the option or variable,
// never a silent default, so that an A/B measures what it says.
#pragma once

#include <cstdint>
#include <string>

namespace ridgeline {

/// The most rows the project's skinny GEMM kernel takes, and the most its CUDA-core form takes.
inline constexpr int64_t kSkinnyMaxRows = 16;
inline constexpr int64_t kSkinnyGemvRows = 4;

struct KernelTuning {
  /// Programmatic dependent launches: none (0), the skinny GEMM alone (gemm), or also the
  /// kernels of a forward step (1, the default).
  enum class Pdl { off, gemm, chain } pdl = Pdl::chain;
  /// The most rows --gemm-algo skinny gives the project's kernel (1 to kSkinnyMaxRows).
  int64_t skinny_rows = kSkinnyGemvRows;
  /// The epilogues folded into the skinny GEMM before them (0 for none, or a comma list of
  /// norm, rotary, act and residual).
  bool fold_norm = false, fold_rotary = true, fold_act = true, fold_residual = false;
};

/// The switches' texts, as the options take them (empty: the default).
struct KernelTuningText {
  std::string pdl;         ///< 0 | gemm | 1
  std::string skinny_rows; ///< 1 .. kSkinnyMaxRows
  std::string epilogues;   ///< 0 | comma list of norm, rotary, act, residual
};

/// Parses `text`; throws UsageError naming the option (--pdl 'x': expected ...) or, where
/// `from_env`, the variable (RIDGELINE_PDL='x': expected ...) at the first value a switch does
/// not take.
KernelTuning parse_kernel_tuning(const KernelTuningText& text, bool from_env = false);

/// The texts of this process's RIDGELINE_PDL, RIDGELINE_SKINNY_ROWS and RIDGELINE_EPILOGUES
/// (empty where unset).
KernelTuningText kernel_tuning_env();

/// The environment's switches (parse_kernel_tuning(kernel_tuning_env(), true)).
KernelTuning tuning_env();

/// The canonical texts of `t` (what a file records): pdl 0 | gemm | 1, the rows, the folded
/// epilogues in the order norm, rotary, act, residual or 0.
KernelTuningText kernel_tuning_text(const KernelTuning& t);

} // namespace ridgeline
