// The measurements behind the compute, memory and launch roofs of one device: back-to-back
// calls of a GEMM shape, of the memory kernels, and of empty kernels, each timed call by call
// on the backend's clock. Each probe synchronises at its end, so a caller can bracket it with
// host time stamps (NVML windows).
#pragma once

#include <string>

#include "models/backend.hpp"
#include "models/roofs.hpp"

namespace ridgeline {

/// `reps` timed calls (after 2 untimed) of c[m, n] = a[m, k] w[n, k]^T on random operands of
/// the backend's dtype.
GemmRoof probe_gemm(Backend& backend, const std::string& label, int64_t m, int64_t n, int64_t k,
                    int reps);

/// `reps` timed passes (after 1 untimed) of the `kind` kernel over `bytes` of traffic (copy:
/// bytes / 2 read and bytes / 2 written) using `src` and `dst`, each at least that large.
MemoryRoof probe_memory(Backend& backend, Backend::MemoryPass kind, int64_t bytes,
                        const Buffer& src, const Buffer& dst, int reps);

/// Empty kernels: `launches` back to back from the host (eager) or replayed from one captured
/// graph (graph_node, where the backend supports graphs); best of `reps` per-launch times.
LaunchRoof probe_launch(Backend& backend, bool graph, int launches, int reps);

} // namespace ridgeline
