// The CUDA backend: two streams (compute; comm/p2p at the highest priority), a CUDA-event clock,
// cuBLASLt GEMMs with cached heuristics, the kernels of kernels_cuda.cu, attention_cuda.cu and
// roofs_cuda.cu, and CUDA-graph capture/replay of whole lanes.
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "core/ranges.hpp"
#include "models/attention_cudnn.hpp"
#include "models/cuda/common.cuh"
#include "models/cuda_backend.hpp"
#include "models/tuning_env.hpp"

namespace ridgeline {
namespace cuda {
namespace {

static_assert(SkinnyGemm::kMaxRows == kSkinnyMaxRows && SkinnyGemm::kGemvRows == kSkinnyGemvRows,
              "tuning_env() checks RIDGELINE_SKINNY_ROWS against the kernel's own limits");

constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

/// The cuBLASLt workspace each GEMM may use: 32 MiB, or CUBLASLT_WORKSPACE_SIZE KiB (the
/// variable and unit PyTorch reads), so a workspace limit is a stack setting both tools share
/// and the fingerprint records (/stack/env). 0 allows no workspace (no split-K reductions).
size_t workspace_bytes() {
  static const size_t bytes = [] {
    const char* text = std::getenv("CUBLASLT_WORKSPACE_SIZE");
    if (text == nullptr || *text == '\0') return kDefaultWorkspaceBytes;
    char* end = nullptr;
    errno = 0;
    const unsigned long long kib = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || kib > (size_t{1} << 30))
      throw UsageError(std::string("CUBLASLT_WORKSPACE_SIZE=") + text +
                       ": expected a size in KiB, 0 to 1073741824");
    return static_cast<size_t>(kib) * 1024;
  }();
  return bytes;
}
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

/// Owns a cublasLtHandle_t.
class CublasLtHandle {
public:
  CublasLtHandle() { RIDGELINE_CHECK(cublasLtCreate(&m_handle)); }
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  ~CublasLtHandle() { RIDGELINE_CHECK_NOTHROW(cublasLtDestroy(m_handle)); }
  cublasLtHandle_t get() const { return m_handle; }

private:
  cublasLtHandle_t m_handle = nullptr;
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

/// One cuBLASLt matmul in column-major terms: D[m, n] = alpha * op(A)[m, k] * op(B)[k, n]
/// (+ D when accumulating).
struct MatmulShape {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  cudaDataType_t ab_type = CUDA_R_16BF;
  cudaDataType_t c_type = CUDA_R_16BF;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t align_a = 256, align_b = 256, align_c = 256; ///< bytes: heuristics must respect them
  int64_t sms = 0;                                     ///< SM count target (0 = the device's)
  bool search = false;     ///< time the heuristic's candidates at first use and keep the fastest
  bool accumulate = false; ///< beta = 1: the product is added to what D holds

  std::array<int64_t, 20> key() const {
    return {trans_a, trans_b, m,       n,     k,        lda,       ldb,
            ldc,     ab_type, c_type,  batch, stride_a, stride_b,  stride_c,
            align_a, align_b, align_c, sms,   search,   accumulate};
  }
};

/// Candidates asked of the heuristic when searching (it may offer fewer, split-K among them).
constexpr int kSearchCandidates = 16;

/// A matmul description, its layouts and the algorithm the heuristic chose, built once per shape;
/// when searching, every candidate the heuristic offered, one of which choose() makes current.
class MatmulPlan {
public:
  MatmulPlan(cublasLtHandle_t handle, const MatmulShape& s) {
    RIDGELINE_CHECK(cublasLtMatmulDescCreate(&m_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    RIDGELINE_CHECK(
        cublasLtMatmulDescSetAttribute(m_desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    RIDGELINE_CHECK(
        cublasLtMatmulDescSetAttribute(m_desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    m_a =
        layout(s.ab_type, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda, s.batch, s.stride_a);
    m_b =
        layout(s.ab_type, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb, s.batch, s.stride_b);
    m_c = layout(s.c_type, s.m, s.n, s.ldc, s.batch, s.stride_c);
    if (s.sms > 0) {
      // The heuristic then picks tiles and a grid for fewer SMs, leaving the rest to a
      // concurrent NCCL kernel instead of occupying every SM until the GEMM ends.
      const int32_t sms = static_cast<int32_t>(s.sms);
      RIDGELINE_CHECK(cublasLtMatmulDescSetAttribute(m_desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                                     &sms, sizeof(sms)));
    }

    cublasLtMatmulPreference_t pref = nullptr;
    RIDGELINE_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = workspace_bytes();
    const uint32_t align[3] = {static_cast<uint32_t>(s.align_a), static_cast<uint32_t>(s.align_b),
                               static_cast<uint32_t>(s.align_c)};
    std::vector<cublasLtMatmulHeuristicResult_t> results(s.search ? kSearchCandidates : 1);
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[0], sizeof(uint32_t));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[1], sizeof(uint32_t));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align[2], sizeof(uint32_t));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[2], sizeof(uint32_t));
    if (status == CUBLAS_STATUS_SUCCESS)
      status =
          cublasLtMatmulAlgoGetHeuristic(handle, m_desc, m_a, m_b, m_c, m_c, pref,
                                         static_cast<int>(results.size()), results.data(), &found);
    RIDGELINE_CHECK_NOTHROW(cublasLtMatmulPreferenceDestroy(pref));
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      destroy();
      RIDGELINE_CHECK(status);
      throw Error("cuBLASLt found no algorithm for m=" + std::to_string(s.m) +
                  " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                  " lda=" + std::to_string(s.lda) + " ldb=" + std::to_string(s.ldb) +
                  " ldc=" + std::to_string(s.ldc));
    }
    for (int i = 0; i < found; ++i)
      if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
        m_candidates.push_back(results[static_cast<size_t>(i)]);
    if (m_candidates.empty()) m_candidates.push_back(results[0]);
    choose(0);
  }
  /// The heuristic's candidates, its first choice first.
  size_t candidates() const { return m_candidates.size(); }
  void choose(size_t i) {
    m_algo = m_candidates[i].algo;
    m_workspace = m_candidates[i].workspaceSize;
    m_skinny = false;
  }
  /// The project's skinny kernel instead of any cuBLASLt candidate (the search found it faster).
  void choose_skinny() { m_skinny = true; }
  bool skinny() const { return m_skinny; }
  size_t workspace_of(size_t i) const { return m_candidates[i].workspaceSize; }
  /// Candidate `i` once; false when cuBLASLt refuses it (nothing was launched then).
  bool try_run(size_t i, cublasLtHandle_t handle, const void* a, const void* b, void* c,
               void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(handle, m_desc, &alpha, a, m_a, b, m_b, &beta, c, m_c, c, m_c,
                          &m_candidates[i].algo, workspace, m_candidates[i].workspaceSize,
                          stream) == CUBLAS_STATUS_SUCCESS;
  }
  /// Candidate `i` in words: cuBLASLt's algorithm id, tile id, split-K factor and reduction.
  std::string describe(size_t i) const {
    const cublasLtMatmulAlgo_t& algo = m_candidates[i].algo;
    auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t which) {
      int32_t v = -1;
      size_t written = 0;
      if (cublasLtMatmulAlgoConfigGetAttribute(&algo, which, &v, sizeof(v), &written) !=
          CUBLAS_STATUS_SUCCESS)
        return std::string("?");
      return std::to_string(v);
    };
    return "algo " + attr(CUBLASLT_ALGO_CONFIG_ID) + " tile " + attr(CUBLASLT_ALGO_CONFIG_TILE_ID) +
           " split-k " + attr(CUBLASLT_ALGO_CONFIG_SPLITK_NUM) + " reduction " +
           attr(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  }
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() { destroy(); }

  /// D = alpha * op(A) * op(B) + beta * C, with C and D in the same layout (C may be D).
  void run(cublasLtHandle_t handle, float alpha, float beta, const void* a, const void* b,
           const void* c, void* d, void* workspace, cudaStream_t stream) const {
    RIDGELINE_CHECK(cublasLtMatmul(handle, m_desc, &alpha, a, m_a, b, m_b, &beta, c, m_c, d, m_c,
                                   &m_algo, workspace, m_workspace, stream));
  }

private:
  static cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                       int64_t batch, int64_t stride) {
    cublasLtMatrixLayout_t l = nullptr;
    RIDGELINE_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows),
                                               static_cast<uint64_t>(cols), ld));
    if (batch > 1) {
      const int32_t count = static_cast<int32_t>(batch);
      RIDGELINE_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                       &count, sizeof(count)));
      RIDGELINE_CHECK(cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    return l;
  }
  void destroy() noexcept {
    if (m_c != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(m_c));
    if (m_b != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(m_b));
    if (m_a != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(m_a));
    if (m_desc != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatmulDescDestroy(m_desc));
    m_a = m_b = m_c = nullptr;
    m_desc = nullptr;
  }

  cublasLtMatmulDesc_t m_desc = nullptr;
  cublasLtMatrixLayout_t m_a = nullptr, m_b = nullptr, m_c = nullptr;
  cublasLtMatmulAlgo_t m_algo{};
  size_t m_workspace = 0;
  bool m_skinny = false;
  std::vector<cublasLtMatmulHeuristicResult_t> m_candidates;
};

/// Largest power of two (up to 256) dividing the address: what cuBLASLt may assume.
int64_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int64_t align = 256;
  while (align > 2 && a % static_cast<uintptr_t>(align) != 0)
    align /= 2;
  return align;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
  case DType::bf16:
    return CUDA_R_16BF;
  case DType::f16:
    return CUDA_R_16F;
  case DType::f32:
    return CUDA_R_32F;
  case DType::i32:
    return CUDA_R_32I;
  }
  throw Error("unknown dtype");
}

/// A row-major operand of a (batched) product: rows x cols elements of `type`, rows `ld` apart,
/// batch entries `stride` elements apart.
struct Operand {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
  cudaDataType_t type = CUDA_R_16BF;
};

Operand operand(const Tensor& t) {
  Operand o;
  o.data = t.data;
  o.rows = t.rows;
  o.cols = t.cols;
  o.ld = t.ld;
  o.type = cuda_type(t.dtype);
  return o;
}

void free_device(void* p) {
  if (p != nullptr) RIDGELINE_CHECK_NOTHROW(cudaFree(p));
}

class CudaBackend final : public Backend {
public:
  CudaBackend(int device, DType dtype, bool comm_priority)
      : m_device(device), m_dtype(dtype), m_compute(set_device(device, 0)),
        m_comm(comm_priority ? greatest_priority() : 0),
        m_p2p(comm_priority ? greatest_priority() : 0), m_clock(lane_streams()) {
    for (auto& e : m_join)
      e = std::make_unique<Event>(false);
    for (auto& e : m_fences)
      e = std::make_unique<Event>(false);
    RIDGELINE_CHECK(cudaDeviceGetAttribute(&m_sm_count, cudaDevAttrMultiProcessorCount, device));
    int major = 0;
    RIDGELINE_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    // Programmatic dependent launches (sm90), for an A/B of the overlap they buy: RIDGELINE_PDL=0
    // none, =gemm the skinny GEMM alone (it starts while the kernel before it ends), unset (or 1)
    // also the kernels of a forward step (see set_launch_chain()).
    const TuningEnv knobs = tuning_env();
    m_pdl = major < 9 || knobs.pdl == TuningEnv::Pdl::off
                ? Pdl::off
                : (knobs.pdl == TuningEnv::Pdl::gemm ? Pdl::gemm : Pdl::chain);
    // The most rows --gemm-algo skinny gives the project's kernel: its CUDA-core form's
    // (kGemvRows), or RIDGELINE_SKINNY_ROWS (1 to kMaxRows, for an A/B). The tensor-core form for
    // 5-16 rows lost to cuBLASLt's first choice at every preset layer at 16 rows, alone and
    // inside the decode step (results/h200x1-decode-skinny16-2026-11-25); search still times it.
    m_skinny_rows = knobs.skinny_rows;
    // Decode's small ops folded into the skinny GEMM before them (fuses_epilogue()), for an A/B
    // of what each buys: RIDGELINE_EPILOGUES=0 runs every one as its own kernel; a list of
    // norm, rotary, act and residual (comma-separated) folds only those; unset folds rotary and
    // act. The residual add and the RMS norm in front of QKV are not folded unless asked: the
    // residual's read of the stream at the end of every CTA made decode steps 0.5-3.4 us longer
    // on an H200 (results/h200x1-decode-epilogues-2026-11-25), and the norm's squares summed
    // beside the products made llama3-8b's step 1.8-9.7 us and llama3-70b's 6.8-21.7 us longer
    // on an H100 (results/h100x4-2026-11-26).
    m_fold_norm = knobs.fold_norm;
    m_fold_rotary = knobs.fold_rotary;
    m_fold_act = knobs.fold_act;
    m_fold_residual = knobs.fold_residual;
  }

  const char* name() const override { return "cuda"; }
  DType dtype() const override { return m_dtype; }
  ridgeline::Stream stream(Lane lane) override { return static_cast<ridgeline::Stream>(raw(lane)); }
  Clock& clock() override { return m_clock; }

  void join(Lane waiter, Lane signal) override {
    cudaStream_t w = raw(waiter), s = raw(signal);
    if (w == s) return;
    cudaEvent_t e = m_join[static_cast<size_t>(signal)]->get();
    RIDGELINE_CHECK(cudaEventRecord(e, s));
    RIDGELINE_CHECK(cudaStreamWaitEvent(w, e, 0));
  }

  size_t fence(Lane lane) override {
    const size_t id = m_next_fence++ % kFences;
    RIDGELINE_CHECK(cudaEventRecord(m_fences[id]->get(), raw(lane)));
    return id;
  }

  void wait_fence(Lane waiter, size_t fence) override {
    const Event& e = fence < kFences ? *m_fences[fence] : *m_held.at(fence - kFences);
    RIDGELINE_CHECK(cudaStreamWaitEvent(raw(waiter), e.get(), 0));
  }

  size_t hold_fence(Lane lane) override {
    if (m_free_held.empty()) {
      m_held.push_back(std::make_unique<Event>(false));
      m_free_held.push_back(m_held.size() - 1);
    }
    const size_t i = m_free_held.back();
    m_free_held.pop_back();
    RIDGELINE_CHECK(cudaEventRecord(m_held[i]->get(), raw(lane)));
    return kFences + i;
  }

  void release_fence(size_t fence) override {
    if (fence >= kFences && fence - kFences < m_held.size()) m_free_held.push_back(fence - kFences);
  }

  void synchronize() override {
    RIDGELINE_CHECK(cudaStreamSynchronize(m_compute.get()));
    RIDGELINE_CHECK(cudaStreamSynchronize(m_comm.get()));
    RIDGELINE_CHECK(cudaStreamSynchronize(m_p2p.get()));
  }

  Buffer allocate(int64_t rows, int64_t cols) override {
    return allocate_bytes(static_cast<size_t>(
        checked_mul(checked_mul(rows, cols, "allocation elements"),
                    static_cast<int64_t>(dtype_size(m_dtype)), "allocation bytes")));
  }

  Buffer allocate_bytes(size_t bytes) override {
    void* p = nullptr;
    if (bytes > 0) RIDGELINE_CHECK(cudaMalloc(&p, bytes));
    return Buffer(p, bytes, free_device);
  }

  void upload(void* dst, const void* host_src, size_t bytes) override {
    // The lanes are non-blocking streams: a plain cudaMemcpy would not wait for them. Nor may
    // the host return early: cudaMemcpy from pageable memory may return once the data are
    // staged, before they land, and a collective on another stream then reads stale bytes.
    synchronize();
    RIDGELINE_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, m_compute.get()));
    RIDGELINE_CHECK(cudaStreamSynchronize(m_compute.get()));
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    synchronize();
    RIDGELINE_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
  }

  void fill_random(Tensor t, const GenKey& key, int64_t row0, int64_t col0) override {
    require_dtype(t);
    cuda::fill_random(t, key, row0, col0, m_compute.get());
  }
  void fill_value(Tensor t, float value) override {
    require_dtype(t);
    cuda::fill_value(t, value, m_compute.get());
  }

  void copy(const Tensor& src, Tensor dst, Lane lane) override {
    RIDGELINE_REQUIRE(src.rows == dst.rows && src.cols == dst.cols && src.dtype == dst.dtype,
                      "copy: tensor shapes or dtypes differ");
    if (src.rows == 0 || src.cols == 0) return;
    // Inside a forward step a copy is a kernel in the chain (a memory copy would end it): the
    // decode step's new keys and values into the cache.
    const cuda::Launch where = chained(lane);
    if (where.programmatic && (src.dtype == DType::bf16 || src.dtype == DType::f16)) {
      cuda::map(cuda::MapOp::copy, src, src, dst, where);
      return;
    }
    const size_t es = dtype_size(src.dtype);
    RIDGELINE_CHECK(
        cudaMemcpy2DAsync(dst.data, static_cast<size_t>(dst.ld) * es, src.data,
                          static_cast<size_t>(src.ld) * es, static_cast<size_t>(src.cols) * es,
                          static_cast<size_t>(src.rows), cudaMemcpyDeviceToDevice, raw(lane)));
  }

  void memory_pass(MemoryPass kind, const Buffer& src, const Buffer& dst, size_t bytes,
                   Lane lane) override {
    RIDGELINE_REQUIRE(bytes % 16 == 0, "memory_pass: bytes must be a multiple of 16");
    // The kernels access uint4 words: a misaligned address would fault on the device.
    RIDGELINE_REQUIRE(kind == MemoryPass::write ||
                          (bytes <= src.bytes() && alignment_of(src.data()) >= 16),
                      "memory_pass: source shorter than bytes or not 16-byte aligned");
    RIDGELINE_REQUIRE(kind == MemoryPass::read ||
                          (bytes <= dst.bytes() && alignment_of(dst.data()) >= 16),
                      "memory_pass: destination shorter than bytes or not 16-byte aligned");
    cuda::memory_pass(kind, src.data(), dst.data(), bytes, static_cast<uint4*>(m_sink.data()),
                      raw(lane));
  }

  void empty_kernels(int count, Lane lane) override { cuda::empty_kernels(count, raw(lane)); }

  std::vector<float> to_host(const Tensor& t) override {
    const size_t es = dtype_size(t.dtype);
    const size_t n = static_cast<size_t>(t.rows * t.cols);
    std::vector<float> out(n);
    if (n == 0) return out;
    // Every lane may have produced `t`: wait for all of them before reading.
    synchronize();
    std::vector<unsigned char> raw_bytes(n * es);
    RIDGELINE_CHECK(cudaMemcpy2D(raw_bytes.data(), static_cast<size_t>(t.cols) * es, t.data,
                                 static_cast<size_t>(t.ld) * es, static_cast<size_t>(t.cols) * es,
                                 static_cast<size_t>(t.rows), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      uint16_t h = 0;
      switch (t.dtype) {
      case DType::bf16:
        std::memcpy(&h, raw_bytes.data() + 2 * i, 2);
        out[i] = bf16_bits_to_float(h);
        break;
      case DType::f16:
        std::memcpy(&h, raw_bytes.data() + 2 * i, 2);
        out[i] = __half2float(__ushort_as_half(h));
        break;
      case DType::f32:
        std::memcpy(&out[i], raw_bytes.data() + 4 * i, 4);
        break;
      case DType::i32: {
        int32_t v = 0;
        std::memcpy(&v, raw_bytes.data() + 4 * i, 4);
        out[i] = static_cast<float>(v);
        break;
      }
      }
    }
    return out;
  }

  void gemm(const Tensor& a, Trans ta, const Tensor& b, Trans tb, Tensor c, bool accumulate,
            Lane lane) override {
    const int64_t m = ta == Trans::yes ? a.cols : a.rows, k = ta == Trans::yes ? a.rows : a.cols;
    const int64_t kb = tb == Trans::yes ? b.cols : b.rows, n = tb == Trans::yes ? b.rows : b.cols;
    RIDGELINE_REQUIRE(k == kb && c.rows == m && c.cols == n,
                      "gemm shapes do not match: c[m,n] = op(a)[m,k] * op(b)[k,n]");
    require_dtype(a);
    require_dtype(b);
    require_dtype(c);
    if (m == 0 || n == 0) return;
    if (k == 0) {
      if (!accumulate) fill_value(c, 0.0f);
      return;
    }
    matmul(operand(a), ta, operand(b), tb, operand(c), accumulate, 1, lane, searches(m));
  }

  void gemm_add(const Tensor& a, const Tensor& w, const Tensor& addend, Tensor c) override {
    RIDGELINE_REQUIRE(a.cols == w.cols && c.rows == a.rows && c.cols == w.rows &&
                          addend.rows == c.rows && addend.cols == c.cols,
                      "gemm_add: shapes do not match c[m,n] = a[m,k] * w[n,k]^T + addend[m,n]");
    require_dtype(addend);
    // cuBLASLt's C takes D's layout; the project's skinny kernel has no addend.
    if (addend.ld != c.ld || m_gemm_algo == GemmAlgo::skinny || c.rows == 0 || c.cols == 0 ||
        a.cols == 0) {
      Backend::gemm_add(a, w, addend, c);
      return;
    }
    require_dtype(a);
    require_dtype(w);
    require_dtype(c);
    matmul(operand(a), Trans::no, operand(w), Trans::yes, operand(c), false, 1, Lane::compute,
           searches(a.rows), addend.data);
  }

  /// Whether a GEMM of `rows` rows is given to search_algorithm() (--gemm-algo search, decode's
  /// few rows).
  bool searches(int64_t rows) const {
    return m_gemm_algo == GemmAlgo::search && rows <= kSearchMaxRows;
  }

  void set_gemm_sm_limit(int sms) override { m_gemm_sms = std::max(0, sms); }
  void set_launch_chain(bool on) override { m_chain = on; }
  void set_gemm_algo(GemmAlgo algo) override { m_gemm_algo = algo; }
  std::vector<std::string> gemm_choices() const override { return m_gemm_choices; }

  /// Rows up to which fuses_epilogue() holds: the kernel takes epilogues up to
  /// SkinnyGemm::kGemvRows (4), but at 3 and 4 rows its paired kernel needs more registers than
  /// the plain one, which cost an SM one of its three CTAs (llama3-8b's step at 4 rows took 195.8
  /// against 181.1 us on an H200, with every epilogue folded).
  static constexpr int64_t kEpilogueRows = 2;

  /// Whether a GEMM of `rows` rows can fold anything into its kernel.
  bool folds_at(int64_t rows) const {
    return m_gemm_algo == GemmAlgo::skinny && m_gemm_sms == 0 && rows >= 1 &&
           rows <= kEpilogueRows && (m_dtype == DType::bf16 || m_dtype == DType::f16);
  }

  bool fuses_epilogue(int64_t rows, GemmEpilogue::Kind kind) const override {
    using Kind = GemmEpilogue::Kind;
    const bool fold = kind == Kind::rotary_append ? m_fold_rotary
                      : kind == Kind::residual    ? m_fold_residual
                                                  : m_fold_act;
    return fold && folds_at(rows);
  }

  bool fuses_rms_norm(int64_t rows) const override {
    static_assert(kEpilogueRows <= cuda::SkinnyGemm::kNormRows, "the kernel takes the norm there");
    return m_fold_norm && folds_at(rows);
  }

  void gemm_epilogue(const Tensor& a, const Tensor& w, Tensor c, const GemmEpilogue& e) override {
    using Kind = GemmEpilogue::Kind;
    RIDGELINE_REQUIRE(a.cols == w.cols && c.rows == a.rows && c.cols == w.rows,
                      "gemm_epilogue: shapes do not match c[m,n] = a[m,k] * w[n,k]^T");
    require_dtype(a);
    require_dtype(w);
    require_dtype(c);
    const bool fold = fuses_epilogue(a.rows, e.kind) && w.rows > 0;
    if (e.norm_gamma.data != nullptr && !(fold && fuses_rms_norm(a.rows))) {
      // The norm as its own kernel, then the GEMM with what is left.
      rms_norm(a, e.norm_gamma, e.norm_out, e.norm_eps);
      GemmEpilogue rest = e;
      rest.norm_gamma = Tensor{};
      gemm_epilogue(e.norm_out, w, c, rest);
      return;
    }
    cuda::SkinnyGemm p;
    if (fold) {
      p.dtype = m_dtype;
      p.a = a.data;
      p.lda = a.ld;
      p.w = w.data;
      p.ldw = w.ld;
      p.m = a.rows;
      p.n = w.rows;
      p.k = a.cols;
      cuda::GemvEpilogue& g = p.epilogue;
      if (e.norm_gamma.data != nullptr) {
        require_dtype(e.norm_gamma);
        RIDGELINE_REQUIRE(e.norm_gamma.rows == 1 && e.norm_gamma.cols == a.cols,
                          "gemm_epilogue: the norm's gamma must be [1, k]");
        g.norm_gamma = e.norm_gamma.data;
        g.norm_eps = e.norm_eps;
      }
      const Tensor& out = e.kind == Kind::rotary_append ? c : e.out;
      require_dtype(out);
      p.c = out.data;
      p.ldc = out.ld;
      switch (e.kind) {
      case Kind::gelu:
        g.kind = cuda::GemvEpilogue::Kind::gelu;
        require_same(c, out);
        break;
      case Kind::swiglu:
        g.kind = cuda::GemvEpilogue::Kind::swiglu;
        RIDGELINE_REQUIRE(out.rows == c.rows && 2 * out.cols == c.cols,
                          "gemm_epilogue: swiglu output must be [m, n / 2]");
        break;
      case Kind::residual:
        g.kind = cuda::GemvEpilogue::Kind::residual;
        require_same(c, out);
        break;
      case Kind::rotary_append:
        require_dtype(e.cache);
        RIDGELINE_REQUIRE(e.cache.rows >= c.rows * e.cache_seq_rows &&
                              e.cache.cols >= c.cols - e.cache_col0,
                          "gemm_epilogue: the cache is smaller than the rows it appends to");
        g.kind = cuda::GemvEpilogue::Kind::rotary_append;
        g.head_dim = e.head_dim;
        g.rotated_heads = e.rotated_heads;
        g.pos = e.pos;
        g.log2_theta = std::log2(static_cast<double>(e.theta));
        g.cache = e.cache.data;
        g.cache_ld = e.cache.ld;
        g.cache_seq_rows = e.cache_seq_rows;
        g.cache_col0 = e.cache_col0;
        break;
      }
    }
    if (!p.fits()) { // not fused here, or a layout the kernel does not take
      Backend::gemm_epilogue(a, w, c, e);
      return;
    }
    const std::string choice = gemm_words(p.m, p.n, p.k) + ": " + p.describe(m_sm_count);
    if (m_fused_shapes.insert(choice).second) m_gemm_choices.push_back(choice);
    cuda::skinny_gemm(p, m_sm_count, skinny_launch(Lane::compute));
  }

  void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                  float eps) override {
    require_norm(x, gamma, y);
    require_dtype(beta);
    RIDGELINE_REQUIRE(beta.elements() >= x.cols, "layer_norm: beta shorter than a row");
    cuda::norm(x, gamma, &beta, y, eps, chained(Lane::compute));
  }

  void rms_norm(const Tensor& x, const Tensor& gamma, Tensor y, float eps) override {
    require_norm(x, gamma, y);
    cuda::norm(x, gamma, nullptr, y, eps, chained(Lane::compute));
  }

  void add_norm(const Tensor& x, const Tensor& r, Tensor sum, const Tensor& gamma,
                const Tensor& beta, Tensor y, float eps) override {
    fused_add_norm("add_norm", x, r, nullptr, sum, gamma, beta, y, eps);
  }

  void add_partials_norm(const Tensor& x, const Tensor& p, const Tensor& q, Tensor sum,
                         const Tensor& gamma, const Tensor& beta, Tensor y, float eps) override {
    fused_add_norm("add_partials_norm", x, p, &q, sum, gamma, beta, y, eps);
  }

  // sum = x + r (+ q, added to r first), y = its norm, in one kernel: add_norm() and
  // add_partials_norm(), whose checks name `op`.
  void fused_add_norm(const char* op, const Tensor& x, const Tensor& r, const Tensor* q, Tensor sum,
                      const Tensor& gamma, const Tensor& beta, Tensor y, float eps) {
    require_norm(x, gamma, y);
    require_same(x, r);
    if (q != nullptr) require_same(x, *q);
    require_same(x, sum);
    if (beta.data != nullptr) {
      require_dtype(beta);
      RIDGELINE_REQUIRE(beta.elements() >= x.cols, std::string(op) + ": beta shorter than a row");
    }
    cuda::norm(x, gamma, beta.data != nullptr ? &beta : nullptr, y, eps, chained(Lane::compute), &r,
               &sum, q);
  }

  void add_partials(const Tensor& x, const Tensor& p, const Tensor& q, Tensor y) override {
    require_same(x, y);
    require_same(p, y);
    require_same(q, y);
    cuda::add_partials(x, p, q, y, chained(Lane::compute));
  }

  void gelu(const Tensor& x, Tensor y) override {
    require_same(x, y);
    cuda::map(cuda::MapOp::gelu, x, x, y, chained(Lane::compute));
  }

  void swiglu(const Tensor& gate_up, Tensor y) override {
    RIDGELINE_REQUIRE(gate_up.rows == y.rows && gate_up.cols == 2 * y.cols,
                      "swiglu: input must be [m, 2f] for an [m, f] output");
    require_dtype(gate_up);
    require_dtype(y);
    cuda::map(cuda::MapOp::swiglu, gate_up.cols_slice(0, y.cols),
              gate_up.cols_slice(y.cols, y.cols), y, chained(Lane::compute));
  }

  void add(const Tensor& a, const Tensor& b, Tensor y, Lane lane) override {
    require_same(a, y);
    require_same(b, y);
    cuda::map(cuda::MapOp::add, a, b, y, chained(lane));
  }

  void rotary(Tensor x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
              float theta) override {
    RIDGELINE_REQUIRE(heads * head_dim <= x.cols && head_dim % 2 == 0 && seq_len > 0,
                      "rotary: bad head layout");
    require_dtype(x);
    cuda::rotary(x, heads, head_dim, seq_len, pos0, theta, false, chained(Lane::compute));
  }

  void attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                 Tensor out, AttentionImpl impl) override {
    require_attention(s, q, k, v, out);
    if (impl == AttentionImpl::cudnn)
      cudnn().forward(s, q, k, v, out);
    else if (impl == AttentionImpl::fused)
      cuda::attention_fused(
          s, q, k, v, out, m_sm_count,
          [this](size_t bytes) { return scratch(m_decode_scratch, bytes); },
          chained(Lane::compute));
    else
      attention_naive(s, q, k, v, out, nullptr);
  }

  void attention_train(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       Tensor out, void* lse, AttentionImpl impl) override {
    RIDGELINE_REQUIRE(lse != nullptr, "attention_train: no log-sum-exp buffer");
    require_attention(s, q, k, v, out);
    float* stats = static_cast<float*>(lse);
    if (impl == AttentionImpl::cudnn)
      cudnn().forward(s, q, k, v, out, stats); // cuDNN's stats: the same natural log-sum-exp
    else if (impl == AttentionImpl::fused)
      cuda::attention_fused(
          s, q, k, v, out, m_sm_count,
          [this](size_t bytes) { return scratch(m_decode_scratch, bytes); }, m_compute.get(),
          stats);
    else
      attention_naive(s, q, k, v, out, stats);
  }

  void attention_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& out, const Tensor& dout, const void* lse,
                          Tensor dq, Tensor dk, Tensor dv, AttentionImpl impl) override {
    RIDGELINE_REQUIRE(lse != nullptr, "attention_backward: no log-sum-exp buffer");
    RIDGELINE_REQUIRE(s.seq == s.context && s.context == s.capacity,
                      "attention_backward: prefill shapes only");
    require_attention(s, q, k, v, out);
    RIDGELINE_REQUIRE(dout.rows == out.rows && dq.rows == q.rows && dk.rows == k.rows &&
                          dv.rows == v.rows && dout.cols >= s.heads * s.head_dim &&
                          dq.cols >= s.heads * s.head_dim && dk.cols >= s.kv_heads * s.head_dim &&
                          dv.cols >= s.kv_heads * s.head_dim,
                      "attention_backward: gradient shapes");
    require_dtype(dout);
    require_dtype(dq);
    require_dtype(dk);
    require_dtype(dv);
    const float* stats = static_cast<const float*>(lse);
    if (impl == AttentionImpl::cudnn)
      cudnn().backward(s, q, k, v, out, dout, stats, dq, dk, dv);
    else if (impl == AttentionImpl::fused)
      cuda::attention_fused_backward(
          s, q, k, v, out, dout, stats, dq, dk, dv,
          [this](size_t bytes) { return scratch(m_train_scratch, bytes); }, m_compute.get());
    else
      attention_naive_backward(s, q, k, v, out, dout, stats, dq, dk, dv);
  }

  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                           Tensor dgamma, Tensor dbeta, float eps, bool accumulate) override {
    require_norm_backward(x, gamma, dy, dx, dgamma);
    require_dtype(dbeta);
    RIDGELINE_REQUIRE(dbeta.elements() >= x.cols && (dbeta.rows == 1 || dbeta.ld == dbeta.cols),
                      "layer_norm_backward: dbeta must hold one contiguous row of x's width");
    cuda::norm_backward(
        x, gamma, dy, dx, dgamma, &dbeta, eps, accumulate,
        [this](size_t bytes) { return scratch(m_train_scratch, bytes); }, m_compute.get());
  }

  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                         Tensor dgamma, float eps, bool accumulate) override {
    require_norm_backward(x, gamma, dy, dx, dgamma);
    cuda::norm_backward(
        x, gamma, dy, dx, dgamma, nullptr, eps, accumulate,
        [this](size_t bytes) { return scratch(m_train_scratch, bytes); }, m_compute.get());
  }

  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) override {
    require_same(x, dy);
    require_same(x, dx);
    cuda::map(cuda::MapOp::gelu_backward, x, dy, dx, m_compute.get());
  }

  void swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor d_gate_up) override {
    RIDGELINE_REQUIRE(gate_up.rows == dy.rows && gate_up.cols == 2 * dy.cols,
                      "swiglu_backward: input must be [m, 2f] for an [m, f] gradient");
    require_same(gate_up, d_gate_up);
    require_dtype(dy);
    cuda::swiglu_backward(gate_up, dy, d_gate_up, m_compute.get());
  }

  void rotary_backward(Tensor dx, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
                       float theta) override {
    RIDGELINE_REQUIRE(heads * head_dim <= dx.cols && head_dim % 2 == 0 && seq_len > 0,
                      "rotary: bad head layout");
    require_dtype(dx);
    cuda::rotary(dx, heads, head_dim, seq_len, pos0, theta, true, m_compute.get());
  }

  void axpy(float alpha, const Tensor& x, Tensor y) override {
    require_same(x, y);
    cuda::map(cuda::MapOp::axpy, x, y, y, m_compute.get(), alpha);
  }

  std::vector<std::string> attention_plans() const override {
    return m_cudnn ? m_cudnn->plans() : std::vector<std::string>{};
  }

  bool supports_graphs() const override { return true; }

  void capture_begin(Lane lane) override {
    RIDGELINE_REQUIRE(!m_capturing, "capture_begin: a capture is already open");
    // Relaxed: NCCL and the scratch growth above may make calls that global mode forbids.
    RIDGELINE_CHECK(cudaStreamBeginCapture(raw(lane), cudaStreamCaptureModeRelaxed));
    m_capturing = true;
  }

  int capture_end(Lane lane) override {
    RIDGELINE_REQUIRE(m_capturing, "capture_end without capture_begin");
    m_capturing = false;
    cudaGraph_t graph = nullptr;
    RIDGELINE_CHECK(cudaStreamEndCapture(raw(lane), &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    RIDGELINE_CHECK_NOTHROW(cudaGraphDestroy(graph));
    RIDGELINE_CHECK(status);
    m_graphs.emplace_back(exec);
    return static_cast<int>(m_graphs.size()) - 1;
  }

  void replay(int graph_id, Lane lane) override {
    RIDGELINE_REQUIRE(graph_id >= 0 && graph_id < static_cast<int>(m_graphs.size()),
                      "replay: unknown graph id");
    RIDGELINE_CHECK(cudaGraphLaunch(m_graphs[static_cast<size_t>(graph_id)].get(), raw(lane)));
  }

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

  void require_dtype(const Tensor& t) const {
    if (t.dtype != m_dtype)
      throw Error(std::string("cuda backend holds ") + dtype_name(m_dtype) + " tensors, got " +
                  dtype_name(t.dtype));
  }
  void require_same(const Tensor& a, const Tensor& b) const {
    RIDGELINE_REQUIRE(a.rows == b.rows && a.cols == b.cols, "tensor shapes differ");
    require_dtype(a);
    require_dtype(b);
  }
  void require_norm(const Tensor& x, const Tensor& gamma, const Tensor& y) const {
    require_same(x, y);
    require_dtype(gamma);
    RIDGELINE_REQUIRE(gamma.elements() >= x.cols && (gamma.rows == 1 || gamma.ld == gamma.cols),
                      "norm: gamma must hold one contiguous row of x's width");
  }

  void require_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                             const Tensor& dx, const Tensor& dgamma) const {
    require_norm(x, gamma, dx);
    require_same(x, dy);
    require_dtype(dgamma);
    RIDGELINE_REQUIRE(dgamma.elements() >= x.cols && (dgamma.rows == 1 || dgamma.ld == dgamma.cols),
                      "norm backward: dgamma must hold one contiguous row of x's width");
  }
  void require_attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& out) const {
    RIDGELINE_REQUIRE(s.kv_heads > 0 && s.heads % s.kv_heads == 0,
                      "attention: heads must be a multiple of kv_heads");
    RIDGELINE_REQUIRE(q.rows == s.batch * s.seq && out.rows == q.rows, "attention: q rows");
    RIDGELINE_REQUIRE(k.rows == s.batch * s.capacity && v.rows == k.rows, "attention: kv rows");
    RIDGELINE_REQUIRE(s.context <= s.capacity && s.seq <= s.context && s.seq >= 1,
                      "attention: context");
    RIDGELINE_REQUIRE(q.cols >= s.heads * s.head_dim && out.cols >= s.heads * s.head_dim &&
                          k.cols >= s.kv_heads * s.head_dim && v.cols >= s.kv_heads * s.head_dim,
                      "attention: head columns");
    require_dtype(q);
    require_dtype(k);
    require_dtype(v);
    require_dtype(out);
  }
  // Created on first use: only --attention cudnn loads libcudnn.
  CudnnAttention& cudnn() {
    if (!m_cudnn) m_cudnn = std::make_unique<CudnnAttention>(m_compute.get());
    return *m_cudnn;
  }

  static float bf16_bits_to_float(uint16_t v) {
    const uint32_t bits = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }

  /// Grows `buffer` to `bytes`; a buffer replaced during a capture stays alive, since the graph
  /// being recorded may already refer to it.
  void* scratch(DeviceBuffer& buffer, size_t bytes) {
    if (buffer.bytes() < bytes) {
      if (m_capturing)
        m_retired.push_back(std::move(buffer));
      else
        buffer = DeviceBuffer(); // cudaFree waits for the kernels still using it
      buffer = DeviceBuffer(bytes);
    }
    return buffer.data();
  }

  // c = op(a) * op(b) (+ c when accumulating) for row-major operands, `batch` products at the
  // operands' strides. Row-major c[m, n] is column-major c^T[n, m] = op(b)^T op(a)^T, and a
  // row-major operand read column-major is its transpose: cuBLASLt's A is b and its B is a,
  // each transposed exactly when the row-major operand is.
  // With `addend` (c's layout): c = op(a) * op(b) + addend, the sum in the GEMM's epilogue.
  void matmul(const Operand& a, Trans ta, const Operand& b, Trans tb, const Operand& c,
              bool accumulate, int64_t batch, Lane lane, bool search,
              const void* addend = nullptr) {
    RIDGELINE_REQUIRE(a.type == b.type, "matmul: operands of different types");
    const bool at = ta == Trans::yes, bt = tb == Trans::yes;
    MatmulShape s;
    s.trans_a = bt;
    s.trans_b = at;
    s.m = bt ? b.rows : b.cols;
    s.n = at ? a.cols : a.rows;
    s.k = at ? a.rows : a.cols;
    s.lda = b.ld;
    s.ldb = a.ld;
    s.ldc = c.ld;
    s.ab_type = a.type;
    s.c_type = c.type;
    s.batch = batch;
    s.stride_a = b.stride;
    s.stride_b = a.stride;
    s.stride_c = c.stride;
    s.align_a = alignment_of(b.data);
    s.align_b = alignment_of(a.data);
    s.align_c =
        addend ? std::min(alignment_of(c.data), alignment_of(addend)) : alignment_of(c.data);
    s.sms = m_gemm_sms;
    s.search = search;
    s.accumulate = accumulate || addend != nullptr;
    run_matmul(s, 1.0f, b.data, a.data, const_cast<void*>(c.data), lane, addend);
  }

  // D = alpha * a * b (+ c_in, or + D when s.accumulate and no c_in).
  void run_matmul(const MatmulShape& s, float alpha, const void* a, const void* b, void* c,
                  Lane lane, const void* c_in = nullptr) {
    const cuda::SkinnyGemm skinny = skinny_gemm_of(s, alpha, a, b, c);
    if (m_gemm_algo == GemmAlgo::skinny && skinny.m <= m_skinny_rows && skinny.fits()) {
      if (m_skinny_shapes.insert(s.key()).second)
        m_gemm_choices.emplace_back(shape_words(s) + ": " + skinny.describe(m_sm_count));
      cuda::skinny_gemm(skinny, m_sm_count, skinny_launch(lane));
      return;
    }
    auto it = m_plans.find(s.key());
    if (it == m_plans.end()) {
      it = m_plans.emplace(s.key(), std::make_unique<MatmulPlan>(m_lt.get(), s)).first;
      if (s.search) search_algorithm(*it->second, s, a, b, skinny, lane);
    }
    if (it->second->skinny() && skinny.fits()) {
      cuda::skinny_gemm(skinny, m_sm_count, skinny_launch(lane));
      return;
    }
    DeviceBuffer& ws = m_workspace[lane_slot(lane)];
    if (ws.bytes() == 0 && workspace_bytes() > 0) ws = DeviceBuffer(workspace_bytes());
    it->second->run(m_lt.get(), alpha, s.accumulate ? 1.0f : 0.0f, a, b, c_in ? c_in : c, c,
                    ws.bytes() ? ws.data() : nullptr, raw(lane));
  }

  // Times each candidate of a new searched plan, and the project's skinny kernel where it takes
  // the shape, on a stream of its own writing a scratch output (so that neither the lane's work
  // nor an open capture sees it), and keeps the fastest; records the choice for the run file. At
  // first use only: the one host synchronisation of a shape.
  void search_algorithm(MatmulPlan& plan, const MatmulShape& s, const void* a, const void* b,
                        cuda::SkinnyGemm skinny, Lane lane) {
    if (!m_capturing) RIDGELINE_CHECK(cudaStreamSynchronize(raw(lane)));
    if (!m_search_stream) m_search_stream = std::make_unique<Stream>(0);
    if (m_search_ws.bytes() == 0 && workspace_bytes() > 0)
      m_search_ws = DeviceBuffer(workspace_bytes());
    void* const ws = m_search_ws.bytes() ? m_search_ws.data() : nullptr;
    const size_t c_bytes =
        static_cast<size_t>(s.ldc * s.n) * (s.c_type == CUDA_R_32F ? 4 : 2) + 256;
    void* c = scratch(m_search_c, c_bytes);
    const cudaStream_t st = m_search_stream->get();
    std::vector<double> us(plan.candidates(), -1.0);
    for (size_t i = 0; i < plan.candidates(); ++i)
      if (plan.workspace_of(i) <= workspace_bytes())
        us[i] = time_cold([&] { return plan.try_run(i, m_lt.get(), a, b, c, ws, st); }, st);
    size_t best = 0;
    for (size_t i = 0; i < us.size(); ++i)
      if (us[i] >= 0 && (us[best] < 0 || us[i] < us[best])) best = i;
    plan.choose(best);
    double skinny_us = -1.0;
    if (skinny.fits()) {
      skinny.c = c;
      skinny_us = time_cold(
          [&] {
            cuda::skinny_gemm(skinny, m_sm_count, st);
            return true;
          },
          st);
      if (us[best] < 0 || skinny_us < us[best]) plan.choose_skinny();
    }
    char line[480];
    if (plan.skinny())
      std::snprintf(line, sizeof(line),
                    "%s: %s, %.2f us (cuBLASLt's best: %s, %.2f us, heuristic's first: %.2f us, "
                    "%zu candidates)",
                    shape_words(s).c_str(), skinny.describe(m_sm_count).c_str(), skinny_us,
                    plan.describe(best).c_str(), us[best], us[0], plan.candidates());
    else {
      char skinny_time[48] = ""; // where the skinny kernel was timed too
      if (skinny_us >= 0)
        std::snprintf(skinny_time, sizeof(skinny_time), ", skinny kernel: %.2f us", skinny_us);
      std::snprintf(line, sizeof(line),
                    "%s: %s, %.2f us (heuristic's first: %.2f us, %zu candidates%s)",
                    shape_words(s).c_str(), plan.describe(best).c_str(), us[best], us[0],
                    plan.candidates(), skinny_time);
    }
    m_gemm_choices.emplace_back(line);
  }

  // The median time in microseconds of `launch` (which returns false when it launched nothing:
  // then -1) over a few runs after two warm-ups, each run after a read of twice the L2 cache
  // outside its timed interval: a decode step reads each weight once, from HBM, and a GEMM
  // timed back to back would find much of a small weight matrix still in L2. A read, not a
  // write: dirty lines left in L2 would be written back during the timed run, which a decode
  // step's GEMMs (after other GEMMs' reads) do not pay.
  template <typename Launch> double time_cold(Launch&& launch, cudaStream_t st) {
    constexpr int kWarmup = 2, kReps = 9;
    for (int r = 0; r < kWarmup; ++r)
      if (!launch()) return -1.0;
    if (m_l2_flush.bytes() == 0) {
      int l2 = 0;
      RIDGELINE_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, m_device));
      m_l2_flush = DeviceBuffer(2 * static_cast<size_t>(std::max(l2, 1 << 20)));
      RIDGELINE_CHECK(cudaMemsetAsync(m_l2_flush.data(), 0, m_l2_flush.bytes(), st));
    }
    std::vector<Event> starts, stops;
    for (int r = 0; r < kReps; ++r) {
      starts.emplace_back(true);
      stops.emplace_back(true);
      cuda::memory_pass(MemoryPass::read, m_l2_flush.data(), nullptr, m_l2_flush.bytes(),
                        static_cast<uint4*>(m_sink.data()), st);
      RIDGELINE_CHECK(cudaEventRecord(starts.back().get(), st));
      launch();
      RIDGELINE_CHECK(cudaEventRecord(stops.back().get(), st));
    }
    RIDGELINE_CHECK(cudaEventSynchronize(stops.back().get()));
    std::vector<double> us;
    for (int r = 0; r < kReps; ++r) {
      float ms = 0;
      RIDGELINE_CHECK(cudaEventElapsedTime(&ms, starts[r].get(), stops[r].get()));
      us.push_back(static_cast<double>(ms) * 1e3);
    }
    std::nth_element(us.begin(), us.begin() + kReps / 2, us.end());
    return us[kReps / 2];
  }

  /// "m=.. n=.. k=.. dtype" in the row-major terms of gemm() (m: the activation rows).
  static std::string shape_words(const MatmulShape& s) {
    return words_of(s.n, s.m, s.k, s.ab_type == CUDA_R_16BF);
  }
  std::string gemm_words(int64_t m, int64_t n, int64_t k) const {
    return words_of(m, n, k, m_dtype == DType::bf16);
  }
  static std::string words_of(int64_t m, int64_t n, int64_t k, bool bf16) {
    char text[96];
    std::snprintf(text, sizeof(text), "m=%lld n=%lld k=%lld %s", static_cast<long long>(m),
                  static_cast<long long>(n), static_cast<long long>(k), bf16 ? "bf16" : "fp16");
    return text;
  }

  /// The skinny kernel's view of a cuBLASLt matmul: row-major c = a * w^T is column-major
  /// D = op(A) B with A the weights, transposed, and B the activations. Its fits() is false for
  /// every other matmul (a transposed activation, a batch, alpha or an accumulation, types that
  /// differ, an SM limit it could not honour).
  cuda::SkinnyGemm skinny_gemm_of(const MatmulShape& s, float alpha, const void* a, const void* b,
                                  void* c) const {
    cuda::SkinnyGemm p;
    if (!s.trans_a || s.trans_b || s.batch != 1 || s.accumulate || alpha != 1.0f ||
        s.ab_type != s.c_type || (s.ab_type != CUDA_R_16BF && s.ab_type != CUDA_R_16F) || s.sms > 0)
      return p; // m = 0: fits() is false
    p.dtype = s.ab_type == CUDA_R_16BF ? DType::bf16 : DType::f16;
    p.a = b;
    p.lda = s.ldb;
    p.w = a;
    p.ldw = s.lda;
    p.c = c;
    p.ldc = s.ldc;
    p.m = s.n;
    p.n = s.m;
    p.k = s.k;
    return p;
  }

  /// One head's columns of a rows-of-heads tensor, seen as row-major [per_seq, d] blocks (one
  /// per sequence) `per_seq` rows apart.
  static Operand head_block(const Tensor& t, int64_t head, int64_t d, int64_t per_seq) {
    Operand o = operand(t);
    o.data = static_cast<const char*>(t.data) + static_cast<size_t>(head * d) * dtype_size(t.dtype);
    o.rows = per_seq;
    o.cols = d;
    o.stride = per_seq * t.ld;
    return o;
  }
  /// `batch` row-major [rows, cols] blocks stored back to back in scratch memory.
  static Operand dense(const void* data, int64_t rows, int64_t cols, cudaDataType_t type) {
    Operand o;
    o.data = data;
    o.rows = rows;
    o.cols = cols;
    o.ld = cols;
    o.stride = rows * cols;
    o.type = type;
    return o;
  }

  // Materialised attention, one head at a time over every sequence of the batch: S = Q K^T
  // (fp32, cuBLASLt batched over sequences), a masked softmax to P (and the log-sum-exp when
  // `lse` is given), then O = P V.
  void attention_naive(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, float* lse) {
    const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
    const size_t cells = static_cast<size_t>(s.batch * s.seq * s.context);
    float* scores = static_cast<float*>(scratch(m_scores, cells * sizeof(float)));
    void* probs = scratch(m_probs, cells * dtype_size(m_dtype));
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Operand s_op = dense(scores, s.seq, s.context, CUDA_R_32F);
    const Operand p_op = dense(probs, s.seq, s.context, cuda_type(m_dtype));
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / group;
      // The keys of a sequence: its first `context` cache rows.
      Operand kh = head_block(k, kvh, d, s.capacity);
      Operand vh = head_block(v, kvh, d, s.capacity);
      kh.rows = vh.rows = s.context;
      const Operand qh = head_block(q, h, d, s.seq);
      const Operand oh = head_block(out, h, d, s.seq);
      matmul(qh, Trans::no, kh, Trans::yes, s_op, false, s.batch, Lane::compute, false);
      cuda::causal_softmax(scores, probs, m_dtype, s.batch * s.seq, s.seq, s.context, s.causal,
                           scale, lse ? lse + h * s.seq : nullptr, s.heads * s.seq,
                           m_compute.get());
      matmul(p_op, Trans::no, vh, Trans::no, oh, false, s.batch, Lane::compute, false);
    }
  }

  // The naive backward, one query head at a time over every sequence, each product a batched
  // cuBLASLt GEMM: S = Q K^T (fp32), P = exp(scale S - lse), dV (+)= P^T dO, dP = dO V^T (fp32),
  // dS = P (dP - delta) scale in place over P, dQ = dS K, dK (+)= dS^T Q; a group's heads add
  // into their KV head's dK and dV.
  void attention_naive_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                const Tensor& v, const Tensor& out, const Tensor& dout,
                                const float* lse, const Tensor& dq, const Tensor& dk,
                                const Tensor& dv) {
    const int64_t d = s.head_dim, group = s.heads / s.kv_heads, n = s.seq;
    const size_t cells = static_cast<size_t>(s.batch * n * n);
    float* scores = static_cast<float*>(scratch(m_scores, cells * sizeof(float)));
    void* probs = scratch(m_probs, cells * dtype_size(m_dtype));
    float* delta = static_cast<float*>(
        scratch(m_delta, static_cast<size_t>(s.batch * s.heads * n) * sizeof(float)));
    cuda::attention_delta(s, out, dout, delta, m_compute.get());
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Operand s_op = dense(scores, n, n, CUDA_R_32F);
    const Operand p_op = dense(probs, n, n, cuda_type(m_dtype));
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / group;
      const bool first = h % group == 0;
      const Operand qh = head_block(q, h, d, n);
      const Operand kh = head_block(k, kvh, d, n);
      const Operand vh = head_block(v, kvh, d, n);
      const Operand doh = head_block(dout, h, d, n);
      const Operand dqh = head_block(dq, h, d, n);
      const Operand dkh = head_block(dk, kvh, d, n);
      const Operand dvh = head_block(dv, kvh, d, n);
      matmul(qh, Trans::no, kh, Trans::yes, s_op, false, s.batch, Lane::compute, false);
      cuda::probs_from_lse(scores, probs, m_dtype, s.batch * n, n, n, s.causal, scale, lse + h * n,
                           s.heads * n, m_compute.get());
      matmul(p_op, Trans::yes, doh, Trans::no, dvh, !first, s.batch, Lane::compute, false);
      matmul(doh, Trans::no, vh, Trans::yes, s_op, false, s.batch, Lane::compute, false);
      cuda::softmax_grad(probs, scores, m_dtype, s.batch * n, n, n, scale, delta + h * n,
                         s.heads * n, m_compute.get());
      matmul(p_op, Trans::no, kh, Trans::no, dqh, false, s.batch, Lane::compute, false);
      matmul(p_op, Trans::yes, qh, Trans::no, dkh, !first, s.batch, Lane::compute, false);
    }
  }

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
  DeviceBuffer m_train_scratch; ///< norm partial sums; attention backward's delta and fp32 dQ
  DeviceBuffer m_delta;         ///< the naive attention backward's rowsum(dO * O)
  std::unique_ptr<CudnnAttention> m_cudnn;
  std::vector<DeviceBuffer> m_retired;
  std::vector<GraphExec> m_graphs;
  bool m_capturing = false;
  int m_sm_count = 0;
  DeviceBuffer m_sink{sizeof(uint4)}; ///< where the read pass may store (see roofs_cuda.cu)
};

} // namespace
} // namespace cuda

int cuda_device_count() {
  int count = 0;
  // No driver or no device is not an error here: the answer is simply zero.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void use_cuda_device(int device) {
  RIDGELINE_CHECK(cudaSetDevice(device));
}

std::unique_ptr<Backend> make_cuda_backend(int device, DType dtype, bool comm_priority) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    throw UsageError(std::string("the cuda backend stores bf16 or fp16, not ") + dtype_name(dtype));
  const int count = cuda_device_count();
  if (device < 0 || device >= count)
    throw UsageError("CUDA device " + std::to_string(device) + " does not exist (" +
                     std::to_string(count) + " visible)");
  // Nsight Systems then shows ridgeline's op, iteration, point and size ranges (NVTX); with no
  // tool attached they cost next to nothing, and the host backend never turns them on.
  ranges::enable_nvtx();
  return std::make_unique<cuda::CudaBackend>(device, dtype, comm_priority);
}

} // namespace ridgeline
