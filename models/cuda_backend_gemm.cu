// The CUDA backend's GEMMs: cuBLASLt matmuls with a plan per shape (the heuristic's choice, or
// with --gemm-algo search the fastest of its candidates and the skinny kernel, timed once), and
// the skinny GEMM with decode's small ops folded into it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "models/cuda_backend_impl.cuh"

namespace ridgeline {
namespace cuda {

void CudaBackend::gemm(const Tensor& a, Trans ta, const Tensor& b, Trans tb, Tensor c,
                       bool accumulate, Lane lane) {
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

void CudaBackend::gemm_add(const Tensor& a, const Tensor& w, const Tensor& addend, Tensor c) {
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

bool CudaBackend::searches(int64_t rows) const {
  return m_gemm_algo == GemmAlgo::search && rows <= kSearchMaxRows;
}

bool CudaBackend::folds_at(int64_t rows) const {
  return m_gemm_algo == GemmAlgo::skinny && m_gemm_sms == 0 && rows >= 1 && rows <= kEpilogueRows &&
         (m_dtype == DType::bf16 || m_dtype == DType::f16);
}

bool CudaBackend::fuses_epilogue(int64_t rows, GemmEpilogue::Kind kind) const {
  using Kind = GemmEpilogue::Kind;
  const bool fold = kind == Kind::rotary_append ? m_fold_rotary
                    : kind == Kind::residual    ? m_fold_residual
                                                : m_fold_act;
  return fold && folds_at(rows);
}

bool CudaBackend::fuses_rms_norm(int64_t rows) const {
  static_assert(kEpilogueRows <= cuda::SkinnyGemm::kNormRows, "the kernel takes the norm there");
  return m_fold_norm && folds_at(rows);
}

void CudaBackend::gemm_epilogue(const Tensor& a, const Tensor& w, Tensor c, const GemmEpilogue& e) {
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

MatmulShape CudaBackend::matmul_shape(const Operand& a, Trans ta, const Operand& b, Trans tb,
                                      const Operand& c, bool accumulate, int64_t batch, bool search,
                                      const void* addend) const {
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
  s.align_c = addend ? std::min(alignment_of(c.data), alignment_of(addend)) : alignment_of(c.data);
  s.sms = m_gemm_sms;
  s.search = search;
  s.accumulate = accumulate || addend != nullptr;
  return s;
}

void CudaBackend::matmul(const Operand& a, Trans ta, const Operand& b, Trans tb, const Operand& c,
                         bool accumulate, int64_t batch, Lane lane, bool search,
                         const void* addend) {
  const MatmulShape s = matmul_shape(a, ta, b, tb, c, accumulate, batch, search, addend);
  run_matmul(s, 1.0f, b.data, a.data, const_cast<void*>(c.data), lane, addend);
}

MatmulPlan& CudaBackend::plan_of(const MatmulShape& s, bool* created) {
  auto it = m_plans.find(s.key());
  if (created != nullptr) *created = it == m_plans.end();
  if (it == m_plans.end())
    it = m_plans.emplace(s.key(), std::make_unique<MatmulPlan>(m_lt.get(), s)).first;
  return *it->second;
}

void CudaBackend::run_matmul(const MatmulShape& s, float alpha, const void* a, const void* b,
                             void* c, Lane lane, const void* c_in) {
  const cuda::SkinnyGemm skinny = skinny_gemm_of(s, alpha, a, b, c);
  if (m_gemm_algo == GemmAlgo::skinny && skinny.m <= m_skinny_rows && skinny.fits()) {
    if (m_skinny_shapes.insert(s.key()).second)
      m_gemm_choices.emplace_back(shape_words(s) + ": " + skinny.describe(m_sm_count));
    cuda::skinny_gemm(skinny, m_sm_count, skinny_launch(lane));
    return;
  }
  bool created = false;
  MatmulPlan& plan = plan_of(s, &created);
  if (created && s.search) search_algorithm(plan, s, a, b, skinny, lane);
  if (plan.skinny() && skinny.fits()) {
    cuda::skinny_gemm(skinny, m_sm_count, skinny_launch(lane));
    return;
  }
  DeviceBuffer& ws = m_workspace[lane_slot(lane)];
  if (ws.bytes() == 0 && workspace_bytes() > 0) ws = DeviceBuffer(workspace_bytes());
  plan.run(m_lt.get(), alpha, s.accumulate ? 1.0f : 0.0f, a, b, c_in ? c_in : c, c,
           ws.bytes() ? ws.data() : nullptr, raw(lane));
}

void CudaBackend::search_algorithm(MatmulPlan& plan, const MatmulShape& s, const void* a,
                                   const void* b, cuda::SkinnyGemm skinny, Lane lane) {
  if (!m_capturing) RIDGELINE_CHECK(cudaStreamSynchronize(raw(lane)));
  if (!m_search_stream) m_search_stream = std::make_unique<Stream>(0);
  if (m_search_ws.bytes() == 0 && workspace_bytes() > 0)
    m_search_ws = DeviceBuffer(workspace_bytes());
  void* const ws = m_search_ws.bytes() ? m_search_ws.data() : nullptr;
  const size_t c_bytes = static_cast<size_t>(s.ldc * s.n) * (s.c_type == CUDA_R_32F ? 4 : 2) + 256;
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

template <typename Launch> double CudaBackend::time_cold(Launch&& launch, cudaStream_t st) {
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

std::string CudaBackend::shape_words(const MatmulShape& s) {
  return words_of(s.n, s.m, s.k, s.ab_type == CUDA_R_16BF);
}

std::string CudaBackend::gemm_words(int64_t m, int64_t n, int64_t k) const {
  return words_of(m, n, k, m_dtype == DType::bf16);
}

std::string CudaBackend::words_of(int64_t m, int64_t n, int64_t k, bool bf16) {
  char text[96];
  std::snprintf(text, sizeof(text), "m=%lld n=%lld k=%lld %s", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), bf16 ? "bf16" : "fp16");
  return text;
}

cuda::SkinnyGemm CudaBackend::skinny_gemm_of(const MatmulShape& s, float alpha, const void* a,
                                             const void* b, void* c) const {
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

} // namespace cuda
} // namespace ridgeline
