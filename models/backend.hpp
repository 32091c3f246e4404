// The compute backend interface: tensors, allocation, kernels and lanes. The host backend
// (OpenBLAS, fp32) and the CUDA backend (cuBLASLt, bf16/fp16) implement it; the layer
// schedules in parallel/ are written once against it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"
#include "models/generator.hpp"

namespace ridgeline {

/// Opaque execution queue handed to a Communicator: a cudaStream_t on GPUs, a lane tag on the host.
using Stream = void*;

/// Non-owning row-major 2-D view: element (r, c) is at data + (r * ld + c) * dtype_size.
struct Tensor {
  void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;  ///< row stride in elements (>= cols)
  DType dtype = DType::f32;

  /// Columns [col0, col0 + n) of every row.
  Tensor cols_slice(int64_t col0, int64_t n) const;
  /// Rows [row0, row0 + n).
  Tensor rows_slice(int64_t row0, int64_t n) const;
  /// Every `step`-th row starting at row0 (e.g. one position of a KV cache across sequences).
  Tensor strided_rows(int64_t row0, int64_t n, int64_t step) const;
  int64_t elements() const { return rows * cols; }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
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

/// Shape of one attention call. Prefill: q has batch*seq rows and attends causally to the
/// seq keys of its own sequence. Decode: q has batch rows (one new token each) and attends to
/// the first `context` rows of its sequence's cache block (cache rows are [batch, capacity]).
struct AttentionShape {
  int64_t batch = 1;
  int64_t seq = 1;       ///< query tokens per sequence
  int64_t context = 1;   ///< key/value tokens visible per sequence (decode: includes the new one)
  int64_t capacity = 1;  ///< rows per sequence in the KV tensors (prefill: seq)
  int64_t heads = 1;     ///< query heads on this rank
  int64_t kv_heads = 1;  ///< key/value heads on this rank (GQA: heads % kv_heads == 0)
  int64_t head_dim = 1;
};

/// Attention implementation: fused (online softmax, no s x s matrix) or naive (materialised).
enum class AttentionImpl { fused, naive };

/// A compute backend. Kernels are enqueued on the compute lane unless a lane is given, and are
/// asynchronous on GPUs; every method is called by one rank on its own device.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "host" or "cuda".
  virtual const char* name() const = 0;
  /// Element type of activations and weights.
  virtual DType dtype() const = 0;
  /// The queue of a lane, for Communicator calls.
  virtual Stream stream(Lane lane) = 0;
  /// The time source whose stamps land on these lanes.
  virtual Clock& clock() = 0;
  /// Makes `waiter` wait for everything issued so far on `signal` (device-side; no host sync).
  virtual void join(Lane waiter, Lane signal) = 0;
  /// Marks everything issued so far on `lane` (an event on GPUs); wait_fence() makes another
  /// lane wait for exactly that point, not for later work. The host runs synchronously: no-ops.
  /// A fence must be waited on before 64 newer fences are made.
  virtual size_t fence(Lane lane) { return 0; }
  virtual void wait_fence(Lane waiter, size_t fence) {}
  /// Blocks the host until every lane is idle.
  virtual void synchronize() = 0;

  /// Allocates rows x cols elements of dtype() (contents undefined).
  virtual Buffer allocate(int64_t rows, int64_t cols) = 0;
  /// t(r, c) = generate(key, row0 + r, col0 + c).
  virtual void fill_random(Tensor t, const GenKey& key, int64_t row0, int64_t col0) = 0;
  virtual void fill_value(Tensor t, float value) = 0;
  /// dst = src (same shape; either may be strided).
  virtual void copy(const Tensor& src, Tensor dst, Lane lane = Lane::compute) = 0;
  /// Device -> host copy as fp32 (synchronises).
  virtual std::vector<float> to_host(const Tensor& t) = 0;
  /// Raw allocation of `bytes` in the backend's memory (collective buffers of any type).
  virtual Buffer allocate_bytes(size_t bytes) = 0;
  /// Raw copies between host memory and the backend's memory (synchronous).
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;

  /// SMs that later gemm() calls ask the library to use (0 = every SM), so that a collective
  /// running beside them finds free SMs. The host backend ignores it.
  virtual void set_gemm_sm_limit(int sms) {}
  /// c[m, n] = a[m, k] * w[n, k]^T (fp32 accumulation).
  virtual void gemm(const Tensor& a, const Tensor& w, Tensor c, Lane lane = Lane::compute) = 0;
  virtual void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                          float eps) = 0;
  virtual void rms_norm(const Tensor& x, const Tensor& gamma, Tensor y, float eps) = 0;
  /// y = gelu(x) (tanh approximation).
  virtual void gelu(const Tensor& x, Tensor y) = 0;
  /// y = silu(gate) * up with gate = columns [0, f) and up = columns [f, 2f) of gate_up.
  virtual void swiglu(const Tensor& gate_up, Tensor y) = 0;
  /// y = a + b.
  virtual void add(const Tensor& a, const Tensor& b, Tensor y, Lane lane = Lane::compute) = 0;
  /// Rotary embedding in place on `heads` heads of head_dim columns; row r of the tensor is
  /// sequence position pos0 + (r % seq_len) (rotate-half convention, base theta).
  virtual void rotary(Tensor x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
                      float theta) = 0;
  /// out[batch*seq, heads*head_dim] = softmax(q k^T / sqrt(d) + causal mask) v.
  virtual void attention(const AttentionShape& shape, const Tensor& q, const Tensor& k,
                         const Tensor& v, Tensor out, AttentionImpl impl) = 0;

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

/// Creates the host backend (OpenBLAS, fp32).
std::unique_ptr<Backend> make_host_backend();

}  // namespace ridgeline
