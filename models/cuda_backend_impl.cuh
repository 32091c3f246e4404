// The CUDA backend's class and the RAII handles it holds, shared by its translation units:
// cuda_backend.cu (lanes, memory, the element-wise and norm ops, graphs), cuda_backend_gemm.cu
// (cuBLASLt matmuls, the skinny GEMM and its folded epilogues), cuda_backend_grouped.cu (the
// grouped GEMM of MoE experts) and cuda_backend_attention.cu (fused, cuDNN and naive
// attention). The kernels it launches are those of cuda/.
#pragma once

#include <cublas_v2.h>

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "models/attention_cudnn.hpp"
#include "models/backend.hpp"
#include "models/cuda/common.cuh"
#include "models/cuda_matmul.hpp"
#include "models/kernel_tuning.hpp"

namespace ridgeline {
namespace cuda {

/// --gemm-algo search times the candidates of GEMMs of at most this many rows (decode's).
constexpr int64_t kSearchMaxRows = 256;

/// Owns a cudaStream_t.
class Stream {
public:
  explicit Stream(int priority) {
    RIDGELINE_CHECK(cudaStreamCreateWithPriority(&m_stream, cudaStreamNonBlocking, priority));
  }
  Stream(Stream&& other) noexcept : m_stream(other.m_stream) { other.m_stream = nullptr; }
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (m_stream != nullptr) RIDGELINE_CHECK_NOTHROW(cudaStreamDestroy(m_stream));
  }
  cudaStream_t get() const { return m_stream; }

private:
  cudaStream_t m_stream = nullptr;
};

/// Owns a cudaEvent_t (timing events for the clock, sync-only events for joins).
class Event {
public:
  explicit Event(bool timing) {
    RIDGELINE_CHECK(
        cudaEventCreateWithFlags(&m_event, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  Event(Event&& other) noexcept : m_event(other.m_event) { other.m_event = nullptr; }
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (m_event != nullptr) RIDGELINE_CHECK_NOTHROW(cudaEventDestroy(m_event));
  }
  cudaEvent_t get() const { return m_event; }

private:
  cudaEvent_t m_event = nullptr;
};

/// Owns a cublasHandle_t (cuBLAS's grouped GEMM; every other GEMM is cuBLASLt's).
class CublasHandle {
public:
  CublasHandle() { RIDGELINE_CHECK(cublasCreate(&m_handle)); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() { RIDGELINE_CHECK_NOTHROW(cublasDestroy(m_handle)); }
  cublasHandle_t get() const { return m_handle; }

private:
  cublasHandle_t m_handle = nullptr;
};

/// Owns an instantiated CUDA graph.
class GraphExec {
public:
  explicit GraphExec(cudaGraphExec_t exec) : m_exec(exec) {}
  GraphExec(GraphExec&& other) noexcept : m_exec(other.m_exec) { other.m_exec = nullptr; }
  GraphExec& operator=(GraphExec&&) = delete;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (m_exec != nullptr) RIDGELINE_CHECK_NOTHROW(cudaGraphExecDestroy(m_exec));
  }
  cudaGraphExec_t get() const { return m_exec; }

private:
  cudaGraphExec_t m_exec = nullptr;
};

/// Clock on CUDA events: a pool created up front and reused, so that timed loops create none.
class CudaClock final : public Clock {
public:
  explicit CudaClock(std::array<cudaStream_t, kLaneCount> lanes) : m_lanes(lanes), m_epoch(true) {
    grow(256);
  }

  void start_epoch() override {
    RIDGELINE_CHECK(cudaEventRecord(m_epoch.get(), m_lanes[0]));
    RIDGELINE_CHECK(cudaEventSynchronize(m_epoch.get()));
    m_next = 0;
  }

  size_t stamp(Lane lane) override {
    if (m_next == m_pool.size()) grow(m_pool.size()); // doubles: only in the first iterations
    RIDGELINE_CHECK(cudaEventRecord(m_pool[m_next].get(), m_lanes[static_cast<int>(lane)]));
    return m_next++;
  }

  std::vector<int64_t> collect() override {
    std::vector<int64_t> out(m_next);
    for (size_t i = 0; i < m_next; ++i) {
      RIDGELINE_CHECK(cudaEventSynchronize(m_pool[i].get()));
      float ms = 0.0f;
      RIDGELINE_CHECK(cudaEventElapsedTime(&ms, m_epoch.get(), m_pool[i].get()));
      out[i] = std::llround(static_cast<double>(ms) * 1.0e6);
    }
    m_next = 0;
    return out;
  }

  const char* name() const override { return "cuda_event"; }

private:
  void grow(size_t n) {
    m_pool.reserve(m_pool.size() + n);
    for (size_t i = 0; i < n; ++i)
      m_pool.emplace_back(true);
  }

  std::array<cudaStream_t, kLaneCount> m_lanes;
  Event m_epoch;
  std::vector<Event> m_pool;
  size_t m_next = 0;
};

class CudaBackend final : public Backend {
public:
  CudaBackend(int device, DType dtype, bool comm_priority);

  const char* name() const override { return "cuda"; }
  DType dtype() const override { return m_dtype; }
  ridgeline::Stream stream(Lane lane) override { return static_cast<ridgeline::Stream>(raw(lane)); }
  Clock& clock() override { return m_clock; }

  void join(Lane waiter, Lane signal) override;

  size_t fence(Lane lane) override;

  void wait_fence(Lane waiter, size_t fence) override;

  size_t hold_fence(Lane lane) override;

  void release_fence(size_t fence) override;

  void synchronize() override;

  Buffer allocate(int64_t rows, int64_t cols) override;

  Buffer allocate_bytes(size_t bytes) override;

  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;

  void fill_random(Tensor t, const GenKey& key, int64_t row0, int64_t col0) override;
  void fill_value(Tensor t, float value) override;

  void copy(const Tensor& src, Tensor dst, Lane lane) override;

  void memory_pass(MemoryPass kind, const Buffer& src, const Buffer& dst, size_t bytes,
                   Lane lane) override;

  void empty_kernels(int count, Lane lane) override { cuda::empty_kernels(count, raw(lane)); }

  std::vector<float> to_host(const Tensor& t) override;

  void gemm(const Tensor& a, Trans ta, const Tensor& b, Trans tb, Tensor c, bool accumulate,
            Lane lane) override;

  void gemm_add(const Tensor& a, const Tensor& w, const Tensor& addend, Tensor c) override;

  /// Whether a GEMM of `rows` rows is given to search_algorithm() (--gemm-algo search, decode's
  /// few rows).
  bool searches(int64_t rows) const;

  void set_gemm_sm_limit(int sms) override { m_gemm_sms = std::max(0, sms); }
  void set_launch_chain(bool on) override { m_chain = on; }
  void set_gemm_algo(GemmAlgo algo) override { m_gemm_algo = algo; }
  void set_grouped_gemm(GroupedGemm how) override { m_grouped = how; }

  void grouped_gemm(const Tensor& a, const std::vector<Tensor>& w,
                    const std::vector<int64_t>& offsets, Tensor c, Lane lane) override;
  void set_kernel_tuning(const KernelTuning& tuning) override;
  std::vector<std::string> gemm_choices() const override { return m_gemm_choices; }

  /// Rows up to which fuses_epilogue() holds: the kernel takes epilogues up to
  /// SkinnyGemm::kGemvRows (4), but at 3 and 4 rows its paired kernel needs more registers than
  /// the plain one, which costs an SM one of its three CTAs (docs/FINDINGS.md).
  static constexpr int64_t kEpilogueRows = 2;

  /// Whether a GEMM of `rows` rows can fold anything into its kernel.
  bool folds_at(int64_t rows) const;

  bool fuses_epilogue(int64_t rows, GemmEpilogue::Kind kind) const override;

  bool fuses_rms_norm(int64_t rows) const override;

  void gemm_epilogue(const Tensor& a, const Tensor& w, Tensor c, const GemmEpilogue& e) override;

  void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                  float eps) override;

  void rms_norm(const Tensor& x, const Tensor& gamma, Tensor y, float eps) override;

  void add_norm(const Tensor& x, const Tensor& r, Tensor sum, const Tensor& gamma,
                const Tensor& beta, Tensor y, float eps) override;

  void add_partials_norm(const Tensor& x, const Tensor& p, const Tensor& q, Tensor sum,
                         const Tensor& gamma, const Tensor& beta, Tensor y, float eps) override;

  // sum = x + r (+ q, added to r first), y = its norm, in one kernel: add_norm() and
  // add_partials_norm(), whose checks name `op`.
  void fused_add_norm(const char* op, const Tensor& x, const Tensor& r, const Tensor* q, Tensor sum,
                      const Tensor& gamma, const Tensor& beta, Tensor y, float eps);

  void add_partials(const Tensor& x, const Tensor& p, const Tensor& q, Tensor y) override;

  void gelu(const Tensor& x, Tensor y) override;

  void swiglu(const Tensor& gate_up, Tensor y) override;

  void add(const Tensor& a, const Tensor& b, Tensor y, Lane lane) override;

  void rotary(Tensor x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
              float theta) override;

  void attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                 Tensor out, AttentionImpl impl) override;

  /// Fused: every sequence in one launch of the decode kernel (and its combine), the uniform
  /// launch when every context is equal; naive and cudnn: Backend's one attention() per run of
  /// equal contexts. Not inside a capture: the launch uploads its work list from host memory.
  void attention_decode_ragged(const AttentionShape& s, const std::vector<int64_t>& contexts,
                               const Tensor& q, const Tensor& k, const Tensor& v, Tensor out,
                               AttentionImpl impl) override;

  void attention_train(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       Tensor out, void* lse, AttentionImpl impl) override;

  void attention_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& out, const Tensor& dout, const void* lse,
                          Tensor dq, Tensor dk, Tensor dv, AttentionImpl impl) override;

  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                           Tensor dgamma, Tensor dbeta, float eps, bool accumulate) override;

  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                         Tensor dgamma, float eps, bool accumulate) override;

  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) override;

  void swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor d_gate_up) override;

  void rotary_backward(Tensor dx, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
                       float theta) override;

  void axpy(float alpha, const Tensor& x, Tensor y) override;
  void gather_rows(const Tensor& x, const std::vector<int64_t>& index, Tensor out) override;
  /// One kernel; not inside a graph capture (the index is uploaded from host memory).
  void scatter_rows(const Tensor& rows, const std::vector<int64_t>& index, Tensor out) override;
  /// One launch of the rotary kernel over every row; not inside a graph capture (the positions
  /// are uploaded from host memory).
  void rotary_rows(Tensor x, int64_t heads, int64_t head_dim, const std::vector<int64_t>& positions,
                   float theta) override;
  void route_top_k(const Tensor& logits, int64_t top_k, bool sigmoid, std::vector<int32_t>& expert,
                   std::vector<float>& weight) override;
  void scatter_add_rows(const Tensor& rows, const std::vector<int64_t>& index,
                        const std::vector<float>& weight, Tensor y) override;

  std::vector<std::string> attention_plans() const override;

  bool supports_graphs() const override { return true; }

  void capture_begin(Lane lane) override;

  int capture_end(Lane lane) override;

  void replay(int graph_id, Lane lane) override;

private:
  // Sets the device before any member that allocates is constructed; returns the priority of the
  // compute stream (the default, lowest).
  static int set_device(int device, int priority) {
    RIDGELINE_CHECK(cudaSetDevice(device));
    return priority;
  }
  static int greatest_priority() {
    int least = 0, greatest = 0;
    RIDGELINE_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return greatest;
  }

  std::array<cudaStream_t, kLaneCount> lane_streams() const {
    return {m_compute.get(), m_comm.get(), m_p2p.get()};
  }
  cudaStream_t raw(Lane lane) const {
    return lane == Lane::compute ? m_compute.get()
           : lane == Lane::comm  ? m_comm.get()
                                 : m_p2p.get();
  }
  // cuBLASLt workspace per lane: compute, or comm (no GEMM runs on the p2p lane).
  static int lane_slot(Lane lane) { return lane == Lane::compute ? 0 : 1; }
  /// A forward kernel's launch on `lane`: a programmatic dependent one inside a forward step.
  cuda::Launch chained(Lane lane) const { return {raw(lane), m_pdl == Pdl::chain && m_chain}; }
  /// The skinny GEMM's launch on `lane`: a programmatic dependent one unless RIDGELINE_PDL=0.
  cuda::Launch skinny_launch(Lane lane) const { return {raw(lane), m_pdl != Pdl::off}; }

  void require_dtype(const Tensor& t) const;
  void require_same(const Tensor& a, const Tensor& b) const;
  void require_norm(const Tensor& x, const Tensor& gamma, const Tensor& y) const;

  void require_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                             const Tensor& dx, const Tensor& dgamma) const;
  void require_attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& out) const;
  // Created on first use: only --attention cudnn loads libcudnn.
  CudnnAttention& cudnn();

  static float bf16_bits_to_float(uint16_t v);

  /// Grows `buffer` to `bytes`; a buffer replaced during a capture stays alive, since the graph
  /// being recorded may already refer to it.
  void* scratch(DeviceBuffer& buffer, size_t bytes);

  /// A device copy of host bytes that only upload_held() writes, and the bytes it holds.
  struct HeldUpload {
    DeviceBuffer device;
    std::vector<unsigned char> bytes;
  };
  /// `bytes` host bytes in `held`'s device memory, copied on the compute lane (ahead of the
  /// kernels that read them; a copy from pageable memory returns once its bytes are staged)
  /// only where they are not what it already holds: a step's layers upload the same index
  /// lists, and each copy from pageable memory costs the host its staging. Not inside a capture.
  const void* upload_held(HeldUpload& held, const void* host, size_t bytes);

  // c = op(a) * op(b) (+ c when accumulating) for row-major operands, `batch` products at the
  // operands' strides. Row-major c[m, n] is column-major c^T[n, m] = op(b)^T op(a)^T, and a
  // row-major operand read column-major is its transpose: cuBLASLt's A is b and its B is a,
  // each transposed exactly when the row-major operand is.
  // With `addend` (c's layout): c = op(a) * op(b) + addend, the sum in the GEMM's epilogue.
  void matmul(const Operand& a, Trans ta, const Operand& b, Trans tb, const Operand& c,
              bool accumulate, int64_t batch, Lane lane, bool search, const void* addend = nullptr);

  // matmul()'s cuBLASLt shape.
  MatmulShape matmul_shape(const Operand& a, Trans ta, const Operand& b, Trans tb, const Operand& c,
                           bool accumulate, int64_t batch, bool search, const void* addend) const;

  // The plan of a shape, made (the heuristic's choice) at its first use; `created` says so.
  MatmulPlan& plan_of(const MatmulShape& s, bool* created = nullptr);

  // grouped_gemm() under GroupedGemm::streams and GroupedGemm::cublas (cuda_backend_grouped.cu).
  void grouped_on_streams(const Tensor& a, const std::vector<Tensor>& w,
                          const std::vector<int64_t>& offsets, Tensor c, Lane lane);
  void grouped_cublas(const Tensor& a, const std::vector<Tensor>& w,
                      const std::vector<int64_t>& offsets, Tensor c, Lane lane);

  // D = alpha * a * b (+ c_in, or + D when s.accumulate and no c_in).
  void run_matmul(const MatmulShape& s, float alpha, const void* a, const void* b, void* c,
                  Lane lane, const void* c_in = nullptr);

  // Times each candidate of a new searched plan, and the project's skinny kernel where it takes
  // the shape, on a stream of its own writing a scratch output (so that neither the lane's work
  // nor an open capture sees it), and keeps the fastest; records the choice for the run file. At
  // first use only: the one host synchronisation of a shape.
  void search_algorithm(MatmulPlan& plan, const MatmulShape& s, const void* a, const void* b,
                        cuda::SkinnyGemm skinny, Lane lane);

  // The median time in microseconds of `launch` (which returns false when it launched nothing:
  // then -1) over a few runs after two warm-ups, each run after a read of twice the L2 cache
  // outside its timed interval: a decode step reads each weight once, from HBM, and a GEMM
  // timed back to back would find much of a small weight matrix still in L2. A read, not a
  // write: dirty lines left in L2 would be written back during the timed run, which a decode
  // step's GEMMs (after other GEMMs' reads) do not pay.
  template <typename Launch> double time_cold(Launch&& launch, cudaStream_t st);

  /// "m=.. n=.. k=.. dtype" in the row-major terms of gemm() (m: the activation rows).
  static std::string shape_words(const MatmulShape& s);
  std::string gemm_words(int64_t m, int64_t n, int64_t k) const;
  static std::string words_of(int64_t m, int64_t n, int64_t k, bool bf16);

  /// The skinny kernel's view of a cuBLASLt matmul: row-major c = a * w^T is column-major
  /// D = op(A) B with A the weights, transposed, and B the activations. Its fits() is false for
  /// every other matmul (a transposed activation, a batch, alpha or an accumulation, types that
  /// differ, an SM limit it could not honour).
  cuda::SkinnyGemm skinny_gemm_of(const MatmulShape& s, float alpha, const void* a, const void* b,
                                  void* c) const;

  /// One head's columns of a rows-of-heads tensor, seen as row-major [per_seq, d] blocks (one
  /// per sequence) `per_seq` rows apart.
  static Operand head_block(const Tensor& t, int64_t head, int64_t d, int64_t per_seq);
  /// `batch` row-major [rows, cols] blocks stored back to back in scratch memory.
  static Operand dense(const void* data, int64_t rows, int64_t cols, cudaDataType_t type);

  // Materialised attention, one head at a time over every sequence of the batch: S = Q K^T
  // (fp32, cuBLASLt batched over sequences), a masked softmax to P (and the log-sum-exp when
  // `lse` is given), then O = P V.
  void attention_naive(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, float* lse);

  // The naive backward, one query head at a time over every sequence, each product a batched
  // cuBLASLt GEMM: S = Q K^T (fp32), P = exp(scale S - lse), dV (+)= P^T dO, dP = dO V^T (fp32),
  // dS = P (dP - delta) scale in place over P, dQ = dS K, dK (+)= dS^T Q; a group's heads add
  // into their KV head's dK and dV.
  void attention_naive_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                const Tensor& v, const Tensor& out, const Tensor& dout,
                                const float* lse, const Tensor& dq, const Tensor& dk,
                                const Tensor& dv);

  int m_device;
  DType m_dtype;
  Stream m_compute;
  Stream m_comm;
  // Pipeline transfers on their own stream: an exchange waiting for its peer holds neither the
  // TP collectives nor the data-parallel buckets queued on the comm stream.
  Stream m_p2p;
  CudaClock m_clock;
  std::unique_ptr<Event> m_join[kLaneCount];
  // Ring of sync-only events for fence(): a stream wait captures the event's state when it is
  // enqueued, so an event may be recorded again once its waits are enqueued.
  static constexpr size_t kFences = 64;
  std::array<std::unique_ptr<Event>, kFences> m_fences;
  size_t m_next_fence = 0;
  // Events of hold_fence() (ids from kFences on) and those free for the next one.
  std::vector<std::unique_ptr<Event>> m_held;
  std::vector<size_t> m_free_held;
  CublasLtHandle m_lt;
  DeviceBuffer m_workspace[2];
  std::map<std::array<int64_t, 20>, std::unique_ptr<MatmulPlan>> m_plans;
  GemmAlgo m_gemm_algo = GemmAlgo::heuristic;
  GroupedGemm m_grouped = GroupedGemm::streams;
  /// GroupedGemm::streams: the streams the groups spread over (each with its cuBLASLt
  /// workspace and the event that joins it back), made at first use.
  static constexpr size_t kGroupStreams = 4;
  std::vector<Stream> m_group_streams;
  std::vector<DeviceBuffer> m_group_ws;
  std::vector<Event> m_group_done;
  std::unique_ptr<Event> m_group_fork;
  /// GroupedGemm::cublas: the handle (made at first use) and the groups' pointer arrays.
  std::unique_ptr<CublasHandle> m_cublas;
  DeviceBuffer m_group_ptrs;
  /// Which epilogues fuses_epilogue() may fold (RIDGELINE_EPILOGUES).
  bool m_fold_norm = false, m_fold_rotary = false, m_fold_act = false, m_fold_residual = false;
  /// The most rows --gemm-algo skinny gives the project's kernel (RIDGELINE_SKINNY_ROWS).
  int64_t m_skinny_rows = kSkinnyGemvRows;
  std::set<std::array<int64_t, 20>> m_skinny_shapes; ///< shapes recorded under GemmAlgo::skinny
  std::set<std::string> m_fused_shapes; ///< gemm_epilogue() launches recorded in m_gemm_choices
  /// Which kernels are programmatic dependent launches (compute capability 9.0 and later): none,
  /// the skinny GEMM, or also the kernels of a forward step while set_launch_chain() holds.
  enum class Pdl { off, gemm, chain } m_pdl = Pdl::off;
  bool m_chain = false;                    ///< set_launch_chain(): a forward step is being issued
  std::vector<std::string> m_gemm_choices; ///< one line per searched shape, in search order
  std::unique_ptr<Stream> m_search_stream;
  DeviceBuffer m_search_ws, m_search_c, m_l2_flush;
  int m_gemm_sms = 0;
  DeviceBuffer m_scores;
  DeviceBuffer m_probs;
  DeviceBuffer m_decode_scratch;
  DeviceBuffer m_route;         ///< route_top_k's choice and weights
  HeldUpload m_ragged_work;     ///< attention_decode_ragged()'s work list
  DeviceBuffer m_train_scratch; ///< norm partial sums; attention backward's delta and fp32 dQ
  DeviceBuffer m_delta;         ///< the naive attention backward's rowsum(dO * O)
  HeldUpload m_gather_index;    ///< gather_rows' and scatter_rows' indices
  HeldUpload m_row_positions;   ///< rotary_rows' positions
  DeviceBuffer m_scatter_plan;  ///< scatter_add_rows' sources, destinations, offsets, weights
  std::unique_ptr<CudnnAttention> m_cudnn;
  std::vector<DeviceBuffer> m_retired;
  std::vector<GraphExec> m_graphs;
  bool m_capturing = false;
  int m_sm_count = 0;
  int m_major = 0;                    ///< compute capability
  DeviceBuffer m_sink{sizeof(uint4)}; ///< where the read pass may store (see cuda/memory_roofs.cu)
};

} // namespace cuda
} // namespace ridgeline
