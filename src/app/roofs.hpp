// The machine's roofs, measured: what `ridgeline roofs` measures in full, and the short version
// `run` and `sweep` measure themselves when no roofs file is given.
#pragma once

#include <string>
#include <vector>

#include "app/config.hpp"
#include "app/job.hpp"
#include "app/point_spec.hpp"
#include "app/run_data.hpp"
#include "core/watchdog.hpp"
#include "models/roofs.hpp"

namespace ridgeline {

/// What to measure.
struct RoofsPlan {
  struct Shape {
    std::string label;
    int64_t m, n, k;
  };
  std::vector<DType> dtypes;       ///< GEMM element types
  std::vector<int64_t> gemm_sizes; ///< square GEMMs n x n x n
  std::vector<Shape> gemm_shapes;  ///< further shapes (a layer's own)
  int gemm_reps = 10;
  int64_t memory_min_bytes = 0, memory_max_bytes = 0; ///< traffic per pass
  int64_t memory_step = 4;                            ///< factor between sizes
  int memory_reps = 5;
  int launches = 1000;
  int launch_reps = 5;
  std::vector<std::string> collectives; ///< interconnect roofs at every group size 2, 4, ...
  size_t interconnect_max_bytes = 0;
  int interconnect_iters = 10;
  int sample_ms = 20;
  double timeout_s = kDefaultTimeoutSeconds;
  std::string source; ///< recorded as /roofs source
  /// Each GPU's own figures kept (Roofs::gpus): the `roofs` command's; a run's roofs keep none.
  bool per_gpu = false;

  /// The defaults: full (`ridgeline roofs`) or quick (inside `run` and `sweep`).
  static RoofsPlan defaults(bool cuda, bool quick);
  /// Every option as /config attributes.
  Attrs attrs() const;
};

/// Measures the roofs on every rank (collective); rates are the best over ranks, clocks the
/// mean over ranks' GPUs.
Roofs measure_roofs(JobContext& job, const RoofsPlan& plan, Watchdog& watchdog);

/// The GEMM shapes of one layer of a point on one rank (labelled by op), for the roofs.
std::vector<RoofsPlan::Shape> layer_gemm_shapes(const PointSpec& point);

/// The roofs a `run` or `sweep` uses: "none" (no attribution), a file written by `roofs` (whose
/// backend must be the job's), or "" (measure the quick plan for the GEMM types and shapes
/// given, and say so on rank 0). Collective.
Roofs obtain_roofs(JobContext& job, const std::string& option, const std::vector<DType>& dtypes,
                   const std::vector<RoofsPlan::Shape>& shapes, double timeout_s);

/// Prints the roofs as tables (every measured row).
void print_roofs(std::ostream& out, const Roofs& roofs);
/// Prints the roofs attribution uses, a few lines: GEMM peak per dtype, memory bandwidth at the
/// largest size and the best at any size, the launch floor, each interconnect envelope.
void print_roofs_summary(std::ostream& out, const Roofs& roofs);

} // namespace ridgeline
