// The CUDA backend: two streams (compute; comm/p2p at the highest priority), a CUDA-event clock,
// the kernels of cuda/, and CUDA-graph capture/replay of whole lanes. Its GEMMs are in
// cuda_backend_gemm.cu, its attention in cuda_backend_attention.cu.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "core/ranges.hpp"
#include "models/cuda_backend.hpp"
#include "models/cuda_backend_impl.cuh"
#include "models/kernel_tuning.hpp"

namespace ridgeline {
namespace cuda {
namespace {

static_assert(SkinnyGemm::kMaxRows == kSkinnyMaxRows && SkinnyGemm::kGemvRows == kSkinnyGemvRows,
              "parse_kernel_tuning() checks --skinny-rows against the kernel's own limits");

constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

void free_device(void* p) {
  if (p != nullptr) RIDGELINE_CHECK_NOTHROW(cudaFree(p));
}

} // namespace

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

CudaBackend::CudaBackend(int device, DType dtype, bool comm_priority)
    : m_device(device), m_dtype(dtype), m_compute(set_device(device, 0)),
      m_comm(comm_priority ? greatest_priority() : 0),
      m_p2p(comm_priority ? greatest_priority() : 0), m_clock(lane_streams()) {
  for (auto& e : m_join)
    e = std::make_unique<Event>(false);
  for (auto& e : m_fences)
    e = std::make_unique<Event>(false);
  RIDGELINE_CHECK(cudaDeviceGetAttribute(&m_sm_count, cudaDevAttrMultiProcessorCount, device));
  RIDGELINE_CHECK(cudaDeviceGetAttribute(&m_major, cudaDevAttrComputeCapabilityMajor, device));
  // The environment's switches until a point sets its own (set_kernel_tuning()).
  set_kernel_tuning(tuning_env());
}

void CudaBackend::set_kernel_tuning(const KernelTuning& t) {
  // Programmatic dependent launches (sm90), for an A/B of the overlap they buy: 0 none, gemm
  // the skinny GEMM alone (it starts while the kernel before it ends), 1 also the kernels of a
  // forward step (see set_launch_chain()).
  m_pdl = m_major < 9 || t.pdl == KernelTuning::Pdl::off
              ? Pdl::off
              : (t.pdl == KernelTuning::Pdl::gemm ? Pdl::gemm : Pdl::chain);
  // The most rows --gemm-algo skinny gives the project's kernel: its CUDA-core form's
  // (kGemvRows) by default, up to kMaxRows for an A/B. The tensor-core form for 5-16 rows is
  // left to search, which times it: it lost to cuBLASLt's first choice (docs/FINDINGS.md).
  m_skinny_rows = t.skinny_rows;
  // Decode's small ops folded into the skinny GEMM before them (fuses_epilogue()), for an A/B
  // of what each buys: 0 runs every one as its own kernel; a list of norm, rotary, act and
  // residual folds only those; the default folds rotary and act. The residual add and the RMS
  // norm in front of QKV are not folded unless asked: the residual's read of the stream at the
  // end of every CTA, and the norm's squares summed beside the products, each made decode steps
  // longer (docs/FINDINGS.md).
  m_fold_norm = t.fold_norm;
  m_fold_rotary = t.fold_rotary;
  m_fold_act = t.fold_act;
  m_fold_residual = t.fold_residual;
}

void CudaBackend::join(Lane waiter, Lane signal) {
  cudaStream_t w = raw(waiter), s = raw(signal);
  if (w == s) return;
  cudaEvent_t e = m_join[static_cast<size_t>(signal)]->get();
  RIDGELINE_CHECK(cudaEventRecord(e, s));
  RIDGELINE_CHECK(cudaStreamWaitEvent(w, e, 0));
}

size_t CudaBackend::fence(Lane lane) {
  const size_t id = m_next_fence++ % kFences;
  RIDGELINE_CHECK(cudaEventRecord(m_fences[id]->get(), raw(lane)));
  return id;
}

void CudaBackend::wait_fence(Lane waiter, size_t fence) {
  const Event& e = fence < kFences ? *m_fences[fence] : *m_held.at(fence - kFences);
  RIDGELINE_CHECK(cudaStreamWaitEvent(raw(waiter), e.get(), 0));
}

size_t CudaBackend::hold_fence(Lane lane) {
  if (m_free_held.empty()) {
    m_held.push_back(std::make_unique<Event>(false));
    m_free_held.push_back(m_held.size() - 1);
  }
  const size_t i = m_free_held.back();
  m_free_held.pop_back();
  RIDGELINE_CHECK(cudaEventRecord(m_held[i]->get(), raw(lane)));
  return kFences + i;
}

void CudaBackend::release_fence(size_t fence) {
  if (fence >= kFences && fence - kFences < m_held.size()) m_free_held.push_back(fence - kFences);
}

void CudaBackend::synchronize() {
  RIDGELINE_CHECK(cudaStreamSynchronize(m_compute.get()));
  RIDGELINE_CHECK(cudaStreamSynchronize(m_comm.get()));
  RIDGELINE_CHECK(cudaStreamSynchronize(m_p2p.get()));
}

Buffer CudaBackend::allocate(int64_t rows, int64_t cols) {
  return allocate_bytes(static_cast<size_t>(
      checked_mul(checked_mul(rows, cols, "allocation elements"),
                  static_cast<int64_t>(dtype_size(m_dtype)), "allocation bytes")));
}

Buffer CudaBackend::allocate_bytes(size_t bytes) {
  void* p = nullptr;
  if (bytes > 0) RIDGELINE_CHECK(cudaMalloc(&p, bytes));
  return Buffer(p, bytes, free_device);
}

void CudaBackend::upload(void* dst, const void* host_src, size_t bytes) {
  // The lanes are non-blocking streams: a plain cudaMemcpy would not wait for them. Nor may
  // the host return early: cudaMemcpy from pageable memory may return once the data are
  // staged, before they land, and a collective on another stream then reads stale bytes.
  synchronize();
  RIDGELINE_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, m_compute.get()));
  RIDGELINE_CHECK(cudaStreamSynchronize(m_compute.get()));
}

void CudaBackend::download(void* host_dst, const void* src, size_t bytes) {
  synchronize();
  RIDGELINE_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

void CudaBackend::fill_random(Tensor t, const GenKey& key, int64_t row0, int64_t col0) {
  require_dtype(t);
  cuda::fill_random(t, key, row0, col0, m_compute.get());
}

void CudaBackend::fill_value(Tensor t, float value) {
  require_dtype(t);
  cuda::fill_value(t, value, m_compute.get());
}

void CudaBackend::copy(const Tensor& src, Tensor dst, Lane lane) {
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

void CudaBackend::memory_pass(MemoryPass kind, const Buffer& src, const Buffer& dst, size_t bytes,
                              Lane lane) {
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

std::vector<float> CudaBackend::to_host(const Tensor& t) {
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

void CudaBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                             float eps) {
  require_norm(x, gamma, y);
  require_dtype(beta);
  RIDGELINE_REQUIRE(beta.elements() >= x.cols, "layer_norm: beta shorter than a row");
  cuda::norm(x, gamma, &beta, y, eps, chained(Lane::compute));
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& gamma, Tensor y, float eps) {
  require_norm(x, gamma, y);
  cuda::norm(x, gamma, nullptr, y, eps, chained(Lane::compute));
}

void CudaBackend::add_norm(const Tensor& x, const Tensor& r, Tensor sum, const Tensor& gamma,
                           const Tensor& beta, Tensor y, float eps) {
  fused_add_norm("add_norm", x, r, nullptr, sum, gamma, beta, y, eps);
}

void CudaBackend::add_partials_norm(const Tensor& x, const Tensor& p, const Tensor& q, Tensor sum,
                                    const Tensor& gamma, const Tensor& beta, Tensor y, float eps) {
  fused_add_norm("add_partials_norm", x, p, &q, sum, gamma, beta, y, eps);
}

void CudaBackend::fused_add_norm(const char* op, const Tensor& x, const Tensor& r, const Tensor* q,
                                 Tensor sum, const Tensor& gamma, const Tensor& beta, Tensor y,
                                 float eps) {
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

void CudaBackend::add_partials(const Tensor& x, const Tensor& p, const Tensor& q, Tensor y) {
  require_same(x, y);
  require_same(p, y);
  require_same(q, y);
  cuda::add_partials(x, p, q, y, chained(Lane::compute));
}

void CudaBackend::gelu(const Tensor& x, Tensor y) {
  require_same(x, y);
  cuda::map(cuda::MapOp::gelu, x, x, y, chained(Lane::compute));
}

void CudaBackend::swiglu(const Tensor& gate_up, Tensor y) {
  RIDGELINE_REQUIRE(gate_up.rows == y.rows && gate_up.cols == 2 * y.cols,
                    "swiglu: input must be [m, 2f] for an [m, f] output");
  require_dtype(gate_up);
  require_dtype(y);
  cuda::map(cuda::MapOp::swiglu, gate_up.cols_slice(0, y.cols), gate_up.cols_slice(y.cols, y.cols),
            y, chained(Lane::compute));
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor y, Lane lane) {
  require_same(a, y);
  require_same(b, y);
  cuda::map(cuda::MapOp::add, a, b, y, chained(lane));
}

void CudaBackend::rotary(Tensor x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
                         float theta) {
  RIDGELINE_REQUIRE(heads * head_dim <= x.cols && head_dim % 2 == 0 && seq_len > 0,
                    "rotary: bad head layout");
  require_dtype(x);
  cuda::rotary(x, heads, head_dim, seq_len, pos0, theta, false, chained(Lane::compute));
}

void CudaBackend::layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                      Tensor dx, Tensor dgamma, Tensor dbeta, float eps,
                                      bool accumulate) {
  require_norm_backward(x, gamma, dy, dx, dgamma);
  require_dtype(dbeta);
  RIDGELINE_REQUIRE(dbeta.elements() >= x.cols && (dbeta.rows == 1 || dbeta.ld == dbeta.cols),
                    "layer_norm_backward: dbeta must hold one contiguous row of x's width");
  cuda::norm_backward(
      x, gamma, dy, dx, dgamma, &dbeta, eps, accumulate,
      [this](size_t bytes) { return scratch(m_train_scratch, bytes); }, m_compute.get());
}

void CudaBackend::rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                    Tensor dx, Tensor dgamma, float eps, bool accumulate) {
  require_norm_backward(x, gamma, dy, dx, dgamma);
  cuda::norm_backward(
      x, gamma, dy, dx, dgamma, nullptr, eps, accumulate,
      [this](size_t bytes) { return scratch(m_train_scratch, bytes); }, m_compute.get());
}

void CudaBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) {
  require_same(x, dy);
  require_same(x, dx);
  cuda::map(cuda::MapOp::gelu_backward, x, dy, dx, m_compute.get());
}

void CudaBackend::swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor d_gate_up) {
  RIDGELINE_REQUIRE(gate_up.rows == dy.rows && gate_up.cols == 2 * dy.cols,
                    "swiglu_backward: input must be [m, 2f] for an [m, f] gradient");
  require_same(gate_up, d_gate_up);
  require_dtype(dy);
  cuda::swiglu_backward(gate_up, dy, d_gate_up, m_compute.get());
}

void CudaBackend::rotary_backward(Tensor dx, int64_t heads, int64_t head_dim, int64_t seq_len,
                                  int64_t pos0, float theta) {
  RIDGELINE_REQUIRE(heads * head_dim <= dx.cols && head_dim % 2 == 0 && seq_len > 0,
                    "rotary: bad head layout");
  require_dtype(dx);
  cuda::rotary(dx, heads, head_dim, seq_len, pos0, theta, true, m_compute.get());
}

void CudaBackend::axpy(float alpha, const Tensor& x, Tensor y) {
  require_same(x, y);
  cuda::map(cuda::MapOp::axpy, x, y, y, m_compute.get(), alpha);
}

// The index arrays go to the device on the compute lane, ahead of the kernel that reads them (a
// copy from pageable memory returns once its bytes are staged: the vectors may then go).
void CudaBackend::gather_rows(const Tensor& x, const std::vector<int64_t>& index, Tensor out) {
  RIDGELINE_REQUIRE(static_cast<int64_t>(index.size()) == out.rows && x.cols == out.cols,
                    "gather_rows: one index per output row, rows of x's width");
  require_dtype(x), require_dtype(out);
  if (index.empty()) return;
  const void* d = upload_held(m_gather_index, index.data(), index.size() * sizeof(int64_t));
  cuda::gather_rows(x, static_cast<const int64_t*>(d), out, m_compute.get());
}

void CudaBackend::scatter_rows(const Tensor& rows, const std::vector<int64_t>& index, Tensor out) {
  RIDGELINE_REQUIRE(static_cast<int64_t>(index.size()) == rows.rows && rows.cols == out.cols,
                    "scatter_rows: one index per row, rows of out's width");
  RIDGELINE_REQUIRE(!m_capturing, "scatter_rows: not inside a graph capture");
  require_dtype(rows), require_dtype(out);
  for (int64_t i : index)
    RIDGELINE_REQUIRE(i >= 0 && i < out.rows, "scatter_rows: an index outside out's rows");
  if (index.empty()) return;
  const void* d = upload_held(m_gather_index, index.data(), index.size() * sizeof(int64_t));
  cuda::scatter_rows(rows, static_cast<const int64_t*>(d), out, m_compute.get());
}

void CudaBackend::rotary_rows(Tensor x, int64_t heads, int64_t head_dim,
                              const std::vector<int64_t>& positions, float theta) {
  RIDGELINE_REQUIRE(heads * head_dim <= x.cols && head_dim % 2 == 0, "rotary: bad head layout");
  RIDGELINE_REQUIRE(static_cast<int64_t>(positions.size()) == x.rows,
                    "rotary_rows: one position per row");
  RIDGELINE_REQUIRE(!m_capturing, "rotary_rows: not inside a graph capture");
  require_dtype(x);
  if (positions.empty()) return;
  const void* d =
      upload_held(m_row_positions, positions.data(), positions.size() * sizeof(int64_t));
  cuda::rotary(x, heads, head_dim, 1, 0, theta, false, Launch(m_compute.get()),
               static_cast<const int64_t*>(d));
}

// The choice on the device, one warp a token: only tokens x k experts and weights come back
// (the logits of 128 experts were 16 times as many bytes, and the host's choice over them took
// milliseconds a step).
void CudaBackend::route_top_k(const Tensor& logits, int64_t top_k, bool sigmoid,
                              std::vector<int32_t>& expert, std::vector<float>& weight) {
  RIDGELINE_REQUIRE(top_k >= 1 && top_k <= logits.cols, "route_top_k: top_k not in [1, experts]");
  require_dtype(logits);
  if (top_k > cuda::kMaxRouteTopK) {
    Backend::route_top_k(logits, top_k, sigmoid, expert, weight);
    return;
  }
  const size_t n = static_cast<size_t>(logits.rows * top_k);
  expert.resize(n);
  weight.resize(n);
  if (n == 0) return;
  void* d = scratch(m_route, n * (sizeof(int32_t) + sizeof(float)));
  int32_t* d_expert = static_cast<int32_t*>(d);
  float* d_weight = reinterpret_cast<float*>(d_expert + n);
  cuda::route_top_k(logits, static_cast<int>(top_k), sigmoid, d_expert, d_weight, m_compute.get());
  // Every lane may have produced the logits: as to_host(), wait for all of them.
  synchronize();
  RIDGELINE_CHECK(cudaMemcpy(expert.data(), d_expert, n * sizeof(int32_t), cudaMemcpyDeviceToHost));
  RIDGELINE_CHECK(cudaMemcpy(weight.data(), d_weight, n * sizeof(float), cudaMemcpyDeviceToHost));
}

void CudaBackend::scatter_add_rows(const Tensor& rows, const std::vector<int64_t>& index,
                                   const std::vector<float>& weight, Tensor y) {
  RIDGELINE_REQUIRE(static_cast<int64_t>(index.size()) == rows.rows &&
                        weight.size() == index.size() && rows.cols == y.cols,
                    "scatter_add_rows: one index and weight per row, rows of y's width");
  require_dtype(rows), require_dtype(y);
  if (index.empty()) return;
  // Rows grouped by destination, each group in the rows' order: one CTA per destination sums
  // its rows, so no two CTAs write one row. A counting sort over y's rows (a comparison sort of
  // an MoE combine's 32768 rows took milliseconds of the host's time every layer).
  const size_t n = index.size();
  std::vector<int64_t> start(static_cast<size_t>(y.rows) + 1, 0);
  for (int64_t i : index) {
    RIDGELINE_REQUIRE(i >= 0 && i < y.rows, "scatter_add_rows: an index outside y's rows");
    ++start[static_cast<size_t>(i) + 1];
  }
  std::vector<int64_t> dest, offsets;
  for (int64_t d = 0; d < y.rows; ++d) {
    const int64_t count = start[static_cast<size_t>(d) + 1];
    if (count > 0) {
      dest.push_back(d);
      offsets.push_back(start[static_cast<size_t>(d)]);
    }
    start[static_cast<size_t>(d) + 1] += start[static_cast<size_t>(d)];
  }
  offsets.push_back(static_cast<int64_t>(n));
  std::vector<int64_t> plan(n); // src[n], dest[g], offsets[g + 1], then the weights' bits
  std::vector<float> w(n);
  for (size_t r = 0; r < n; ++r) {
    const size_t j = static_cast<size_t>(start[static_cast<size_t>(index[r])]++);
    plan[j] = static_cast<int64_t>(r);
    w[j] = weight[r];
  }
  const size_t groups = dest.size();
  plan.insert(plan.end(), dest.begin(), dest.end());
  plan.insert(plan.end(), offsets.begin(), offsets.end());
  const size_t int_bytes = plan.size() * sizeof(int64_t), bytes = int_bytes + n * sizeof(float);
  std::vector<char> host(bytes);
  std::memcpy(host.data(), plan.data(), int_bytes);
  std::memcpy(host.data() + int_bytes, w.data(), n * sizeof(float));
  char* d = static_cast<char*>(scratch(m_scatter_plan, bytes));
  RIDGELINE_CHECK(cudaMemcpyAsync(d, host.data(), bytes, cudaMemcpyHostToDevice, m_compute.get()));
  const int64_t* src = reinterpret_cast<const int64_t*>(d);
  cuda::scatter_add_rows(rows, src, src + n, src + n + groups,
                         reinterpret_cast<const float*>(d + int_bytes),
                         static_cast<int64_t>(groups), y, m_compute.get());
}

void CudaBackend::capture_begin(Lane lane) {
  RIDGELINE_REQUIRE(!m_capturing, "capture_begin: a capture is already open");
  // Relaxed: NCCL and the scratch growth above may make calls that global mode forbids.
  RIDGELINE_CHECK(cudaStreamBeginCapture(raw(lane), cudaStreamCaptureModeRelaxed));
  m_capturing = true;
}

int CudaBackend::capture_end(Lane lane) {
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

void CudaBackend::replay(int graph_id, Lane lane) {
  RIDGELINE_REQUIRE(graph_id >= 0 && graph_id < static_cast<int>(m_graphs.size()),
                    "replay: unknown graph id");
  RIDGELINE_CHECK(cudaGraphLaunch(m_graphs[static_cast<size_t>(graph_id)].get(), raw(lane)));
}

void CudaBackend::require_dtype(const Tensor& t) const {
  if (t.dtype != m_dtype)
    throw Error(std::string("cuda backend holds ") + dtype_name(m_dtype) + " tensors, got " +
                dtype_name(t.dtype));
}

void CudaBackend::require_same(const Tensor& a, const Tensor& b) const {
  RIDGELINE_REQUIRE(a.rows == b.rows && a.cols == b.cols, "tensor shapes differ");
  require_dtype(a);
  require_dtype(b);
}

void CudaBackend::require_norm(const Tensor& x, const Tensor& gamma, const Tensor& y) const {
  require_same(x, y);
  require_dtype(gamma);
  RIDGELINE_REQUIRE(gamma.elements() >= x.cols && (gamma.rows == 1 || gamma.ld == gamma.cols),
                    "norm: gamma must hold one contiguous row of x's width");
}

void CudaBackend::require_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                        const Tensor& dx, const Tensor& dgamma) const {
  require_norm(x, gamma, dx);
  require_same(x, dy);
  require_dtype(dgamma);
  RIDGELINE_REQUIRE(dgamma.elements() >= x.cols && (dgamma.rows == 1 || dgamma.ld == dgamma.cols),
                    "norm backward: dgamma must hold one contiguous row of x's width");
}

float CudaBackend::bf16_bits_to_float(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const void* CudaBackend::upload_held(HeldUpload& held, const void* host, size_t bytes) {
  RIDGELINE_REQUIRE(!m_capturing, "an index upload inside a graph capture");
  const auto* from = static_cast<const unsigned char*>(host);
  if (held.device.bytes() >= bytes && held.bytes.size() == bytes &&
      std::equal(from, from + bytes, held.bytes.begin()))
    return held.device.data();
  held.bytes.clear(); // until the copy below is issued, the device holds nothing known
  void* d = scratch(held.device, bytes);
  RIDGELINE_CHECK(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, m_compute.get()));
  held.bytes.assign(from, from + bytes);
  return d;
}

void* CudaBackend::scratch(DeviceBuffer& buffer, size_t bytes) {
  if (buffer.bytes() < bytes) {
    if (m_capturing)
      m_retired.push_back(std::move(buffer));
    else
      buffer = DeviceBuffer(); // cudaFree waits for the kernels still using it
    buffer = DeviceBuffer(bytes);
  }
  return buffer.data();
}

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
