// The machine's measured roofs (the /roofs group of a file): dense GEMM rate per dtype, memory
// bandwidth by working-set size, the launch floor, and the interconnect per collective, group
// size, scope and transport. Plain data with the lookups attribution needs; `ridgeline roofs` (and
// the short measurement of `run`/`sweep`) fill it, the run file stores and reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace ridgeline {

/// One timed GEMM shape: c[m, n] = a[m, k] * w[n, k]^T.
struct GemmRoof {
  std::string dtype; ///< "bf16", "fp16", "fp32"
  std::string label; ///< "square" or the layer op whose shape it is (e.g. "fc1_gemm")
  int64_t m = 0, n = 0, k = 0;
  int64_t reps = 0;
  double best_ns = 0;       ///< fastest call
  double p50_ns = 0;        ///< median call
  double tflops = 0;        ///< 2 m n k / best_ns
  double sm_clock_mhz = -1; ///< NVML mean while it ran (-1: not sampled)
};

/// One timed pass of the project's memory kernels over `bytes` of traffic.
struct MemoryRoof {
  std::string kind;  ///< "read", "write" or "copy"
  int64_t bytes = 0; ///< bytes moved per pass (copy: read + write)
  int64_t reps = 0;
  double best_ns = 0;
  double p50_ns = 0;
  double gbps = 0; ///< bytes / best_ns
  double sm_clock_mhz = -1;
};

/// The cost of launching an empty kernel.
struct LaunchRoof {
  std::string kind; ///< "eager" (back-to-back launches from the host) or "graph_node" (replay)
  int64_t launches = 0;
  double ns_per_launch = 0; ///< best over the repetitions
  double sm_clock_mhz = -1;
};

/// Where the ranks of a communicator group sit: all on one node (intra), one on each of several
/// nodes (inter), or on several nodes with several on some (hier: a node's links and the
/// network both carry the collective).
enum class Scope : int { intra = 0, inter = 1, hier = 2 };
inline constexpr Scope kScopes[] = {Scope::intra, Scope::inter, Scope::hier};
const char* scope_name(Scope s);
/// The scope named `name` ("intra", "inter", "hier"); false for any other text.
bool parse_scope(const std::string& name, Scope& out);
/// Of two groups' scopes, the one that crosses more: hier over inter over intra (the group
/// whose collective is slowest sets the pace of the others).
Scope wider_scope(Scope a, Scope b);

/// One collective's interconnect roof for one group size, scope and transport.
struct InterconnectRoof {
  std::string collective; ///< collective registry name: all_reduce, all_gather, ...
  int64_t group_size = 0;
  std::string dtype;
  std::string transport; ///< auto, nvlink, host, net (NCCL) or mpi (host backend)
  double alpha_us = 0;   ///< least-squares fit of the medians (as `collectives` reports)
  double beta_gbps = 0;
  /// The lower envelope used for attribution: floor_alpha_us + bus_bytes / (floor_beta_gbps *
  /// 1e3) stays at or below every measured minimum time (see envelope_fit()).
  double floor_alpha_us = 0;
  double floor_beta_gbps = 0;
  int64_t fit_min_bytes = 0, fit_max_bytes = 0;
  /// Where each measured group's ranks sat (files without the column: intra).
  Scope scope = Scope::intra;
  int64_t group_nodes = 1; ///< the nodes each measured group spans
};

/// One GPU's (host backend: one rank's) own figures from the probes every rank ran at once: the
/// `roofs` command's view of each device of an allocation, before the best over ranks.
struct GpuRoof {
  int64_t rank = 0;
  std::string node;
  int64_t device = -1;      ///< CUDA device index (-1 on the host backend)
  double gemm_tflops = 0;   ///< the best GEMM rate of the first measured dtype
  double read_gbps = 0;     ///< memory read bandwidth at the largest measured size
  double launch_ns = 0;     ///< eager launch floor
  std::string outlier = ""; ///< why it stands out ("" when it does not): mark_gpu_outliers()
  /// Its node's link: the bus bandwidth of the group of every rank of its node (all nodes at
  /// once) in the first measured collective at the largest size; 0 with one rank on the node.
  double node_busbw_gbps = 0;
  /// Its link to other nodes: the best bandwidth it reached in a sendrecv with the same-placed
  /// rank of another node, the nodes paired round by round (every pair once, the pairs of a
  /// round at once); 0 on a single node, or where no other node has a rank at its place.
  double inter_node_gbps = 0;
};

/// What one GPU of a model is expected to reach, from a hardware description (its data-sheet
/// peaks times the derating measured on a results page, and its measured launch floor).
struct GpuReference {
  std::string name;
  double gemm_tflops = 0; ///< 0: not compared
  double read_gbps = 0;
  double launch_ns = 0;
};

/// Marks each GPU whose GEMM rate or read bandwidth is more than `pct` % below, or whose launch
/// floor is more than `pct` % above, the allocation's median (over every GPU, with at least 3)
/// or the reference (when given and its figure is non-zero), and each GPU of a node whose node
/// link is more than `pct` % below the median of the nodes (one figure a node, with at least 3
/// nodes): `outlier` names each figure, its value and what it was held against. Returns how many
/// GPUs stand out. Pure.
int mark_gpu_outliers(std::vector<GpuRoof>& gpus, const GpuReference* reference, double pct);

/// Every roof of one machine (one rank's device; ranks of one node share the figures of rank 0,
/// interconnect rows cover every group size and scope measured).
struct Roofs {
  std::string backend; ///< "host" or "cuda"
  std::string source;  ///< how the roofs were obtained (command, quick/full, or the file read)
  std::vector<GemmRoof> gemm;
  std::vector<MemoryRoof> memory;
  std::vector<LaunchRoof> launch;
  std::vector<InterconnectRoof> interconnect;
  /// Each GPU's own figures (the `roofs` command, rank 0; not read back for attribution).
  std::vector<GpuRoof> gpus;

  bool empty() const {
    return gemm.empty() && memory.empty() && launch.empty() && interconnect.empty();
  }
  /// Highest GEMM rate of `dtype` over every measured shape in TFLOP/s (0 if none).
  double peak_tflops(DType dtype) const;
  /// Memory bandwidth in GB/s for a working set of `footprint_bytes`: the best read, write or
  /// copy bandwidth measured at any size >= footprint / 2 (caches make small sets faster, and
  /// an op's operands are often still cached), the largest copy's figure beyond the measured
  /// range; 0 if nothing was measured.
  double memory_gbps(double footprint_bytes) const;
  /// Copy bandwidth at the largest measured size: the HBM (host: DRAM) roof in GB/s.
  double hbm_gbps() const;
  /// Device-side floor of one kernel: graph_node where measured, else eager; 0 if neither.
  double launch_floor_ns() const;
  /// The roof of `collective` over `group_size` ranks of `scope` on `transport` ("auto" and
  /// "nvlink" stand for each other; any transport matches when the roofs have only one);
  /// nullptr if absent: a roof of another scope never stands in.
  const InterconnectRoof* interconnect_for(const std::string& collective, int64_t group_size,
                                           const std::string& transport,
                                           Scope scope = Scope::intra) const;
};

} // namespace ridgeline
