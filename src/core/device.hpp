// The runtime layer every library builds on: execution queues, tensor views, owned device or
// host allocations, and the Device interface (queues, clock, memory, graphs) that a compute
// backend extends with kernels and that the collectives use for their buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/checked_math.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"

namespace ridgeline {

/// Opaque execution queue handed to a Communicator: a cudaStream_t on GPUs, a lane tag on the host.
using Stream = void*;

/// Non-owning row-major 2-D view: element (r, c) is at data + (r * ld + c) * dtype_size.
struct Tensor {
  void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0; ///< row stride in elements (>= cols)
  DType dtype = DType::f32;

  /// Columns [col0, col0 + n) of every row.
  Tensor cols_slice(int64_t col0, int64_t n) const;
  /// Rows [row0, row0 + n).
  Tensor rows_slice(int64_t row0, int64_t n) const;
  /// Every `step`-th row starting at row0 (e.g. one position of a KV cache across sequences).
  Tensor strided_rows(int64_t row0, int64_t n, int64_t step) const;
  int64_t elements() const { return checked_mul(rows, cols, "tensor elements"); }
  size_t bytes() const {
    return static_cast<size_t>(
        checked_mul(elements(), static_cast<int64_t>(dtype_size(dtype)), "tensor bytes"));
  }
};

/// Owning, move-only allocation made by a backend (host memory or device memory).
class Buffer {
public:
  using Deleter = void (*)(void*);
  Buffer() = default;
  Buffer(void* data, size_t bytes, Deleter deleter) : m_data(data, deleter), m_bytes(bytes) {}
  void* data() const { return m_data.get(); }
  size_t bytes() const { return m_bytes; }
  /// Whole buffer as a rows x cols tensor of `dtype` (ld = cols).
  Tensor view(int64_t rows, int64_t cols, DType dtype) const;

private:
  std::unique_ptr<void, Deleter> m_data{nullptr, nullptr};
  size_t m_bytes = 0;
};

/// One rank's device (a GPU, or the host): its lanes' queues, the clock whose stamps land on
/// them, raw memory and, where supported, captured graphs. Every method is called by one rank
/// on its own device.
class Device {
public:
  virtual ~Device() = default;
  /// "host" or "cuda".
  virtual const char* name() const = 0;
  /// The queue of a lane, for Communicator calls.
  virtual Stream stream(Lane lane) = 0;
  /// The time source whose stamps land on these lanes.
  virtual Clock& clock() = 0;
  /// Blocks the host until every lane is idle.
  virtual void synchronize() = 0;
  /// Raw allocation of `bytes` in the device's memory (collective buffers of any type).
  virtual Buffer allocate_bytes(size_t bytes) = 0;
  /// Raw copies between host memory and the device's memory (synchronous).
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;

  /// Whether capture_begin()/capture_end()/replay() work (CUDA graphs; cuda backend only).
  virtual bool supports_graphs() const { return false; }
  /// Starts recording everything issued on `lane` (and on lanes joined to it) into a graph
  /// instead of running it. Lanes joined in must be joined back before capture_end().
  virtual void capture_begin(Lane lane) { throw UsageError("CUDA graphs need the cuda backend"); }
  /// Ends the capture started on `lane` and instantiates it; returns the graph's id. Graphs
  /// live as long as the backend: destroy the backend before any NCCL communicator whose
  /// collectives were captured (NCCL waits for the graphs that hold it).
  virtual int capture_end(Lane lane) { throw UsageError("CUDA graphs need the cuda backend"); }
  /// Launches graph `graph_id` on `lane` (asynchronous).
  virtual void replay(int graph_id, Lane lane) {
    throw UsageError("CUDA graphs need the cuda backend");
  }
};

} // namespace ridgeline
