// The CUDA backend's A/B switches read from the environment (RIDGELINE_PDL,
// RIDGELINE_SKINNY_ROWS, RIDGELINE_EPILOGUES), parsed strictly: a value a switch does not take is
// an error that names the variable, never a silent default, so that an A/B measures what it says.
#pragma once

#include <cstdint>

namespace ridgeline {

/// The most rows the project's skinny GEMM kernel takes, and the most its CUDA-core form takes.
inline constexpr int64_t kSkinnyMaxRows = 16;
inline constexpr int64_t kSkinnyGemvRows = 4;

struct TuningEnv {
  /// Programmatic dependent launches: none (RIDGELINE_PDL=0), the skinny GEMM alone (gemm), or
  /// also the kernels of a forward step (1, the default).
  enum class Pdl { off, gemm, chain } pdl = Pdl::chain;
  /// The most rows --gemm-algo skinny gives the project's kernel (RIDGELINE_SKINNY_ROWS, 1 to
  /// kSkinnyMaxRows).
  int64_t skinny_rows = kSkinnyGemvRows;
  /// The epilogues folded into the skinny GEMM before them (RIDGELINE_EPILOGUES: 0 for none, or
  /// a comma list of norm, rotary, act and residual).
  bool fold_norm = false, fold_rotary = true, fold_act = true, fold_residual = false;
};

/// The switches of this process's environment; throws UsageError ("RIDGELINE_X='v': ...") at
/// the first value a switch does not take.
TuningEnv tuning_env();

} // namespace ridgeline
