// cuDNN's fused attention through the cuDNN frontend's graph API (see attention_cudnn.hpp). The
// frontend's shim resolves every cuDNN call through a handle this file opens with dlopen, so the
// binary starts without libcudnn and only --attention cudnn needs it.
#include "models/attention_cudnn.hpp"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/cuda_check.hpp"
#include "core/error.hpp"

// The frontend's shim looks cuDNN's symbols up in this handle (NV_CUDNN_FRONTEND_USE_DYNAMIC_
// LOADING); it is set once, by load_cudnn().
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend

namespace ridgeline {
namespace {

namespace fe = cudnn_frontend;

std::mutex g_load_mutex;
std::string g_load_error;
int64_t g_version = 0;

std::string version_string(int64_t v) {
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

int64_t load_cudnn() {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (g_version > 0) return g_version;
  if (!g_load_error.empty()) throw UsageError(g_load_error);
  const std::string name = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    g_load_error = "--attention cudnn: cannot load " + name + " (" + (why ? why : "not found") +
                   "); install cuDNN 9 (pip install nvidia-cudnn-cu13) and put its lib folder on "
                   "LD_LIBRARY_PATH (python3 -c 'import nvidia.cudnn, os; print(os.path.join("
                   "list(nvidia.cudnn.__path__)[0], \"lib\"))')";
    throw UsageError(g_load_error);
  }
  fe::cudnn_dlhandle = handle;
  const int64_t v = static_cast<int64_t>(fe::detail::get_backend_version());
  if (v / 10000 != CUDNN_MAJOR) {
    g_load_error = "--attention cudnn: the loaded cuDNN is " + version_string(v) +
                   " but this ridgeline was built against cuDNN " + cudnn_build_version() +
                   " (the major versions must match)";
    throw UsageError(g_load_error);
  }
  g_version = v;
  return v;
}

void check_fe(fe::error_t e, const char* what) {
  if (e.is_bad()) throw Error(std::string("cuDNN ") + what + ": " + e.get_message());
}

fe::DataType_t fe_type(DType t) {
  if (t == DType::bf16) return fe::DataType_t::BFLOAT16;
  if (t == DType::f16) return fe::DataType_t::HALF;
  throw UsageError(std::string("--attention cudnn supports bf16 and fp16, not ") + dtype_name(t));
}

// [batch, heads, rows, head_dim] view of a rows-of-heads tensor: `per_seq` rows per sequence.
std::vector<int64_t> dims(int64_t b, int64_t h, int64_t rows, int64_t d) {
  return {b, h, rows, d};
}
std::vector<int64_t> strides(const Tensor& t, int64_t per_seq, int64_t d) {
  return {per_seq * t.ld, d, t.ld, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name,
                                                    int64_t uid, std::vector<int64_t> dim,
                                                    std::vector<int64_t> stride) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::move(dim))
                      .set_stride(std::move(stride)));
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

// Causal with as many keys as queries is the usual top-left mask; with more keys (a later part
// of a split prefill) the diagonal sits bottom-right; one query (decode) sees every key.
template <class Attrs> void set_mask(Attrs& a, const AttentionShape& s) {
  if (!s.causal || s.seq == 1) return;
  a.set_diagonal_alignment(s.seq == s.context ? fe::DiagonalAlignment_t::TOP_LEFT
                                              : fe::DiagonalAlignment_t::BOTTOM_RIGHT);
  a.set_diagonal_band_right_bound(0);
}

std::string shape_key(const char* kind, const AttentionShape& s, DType t, const Tensor& q,
                      const Tensor& k, const Tensor& v, const Tensor& o, bool stats,
                      int64_t extra_ld = 0) {
  char key[256];
  std::snprintf(key, sizeof(key),
                "%s b=%lld h=%lld kv=%lld s=%lld ctx=%lld cap=%lld d=%lld %s %s%s ld=%lld,%lld,"
                "%lld,%lld,%lld",
                kind, static_cast<long long>(s.batch), static_cast<long long>(s.heads),
                static_cast<long long>(s.kv_heads), static_cast<long long>(s.seq),
                static_cast<long long>(s.context), static_cast<long long>(s.capacity),
                static_cast<long long>(s.head_dim), dtype_name(t), s.causal ? "causal" : "full",
                stats ? " stats" : "", static_cast<long long>(q.ld), static_cast<long long>(k.ld),
                static_cast<long long>(v.ld), static_cast<long long>(o.ld),
                static_cast<long long>(extra_ld));
  return key;
}

} // namespace

bool cudnn_compiled() {
  return true;
}

std::string cudnn_build_version() {
  return std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." +
         std::to_string(CUDNN_PATCHLEVEL);
}

int64_t cudnn_runtime_version() {
  return load_cudnn();
}

std::string cudnn_loaded_version() {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  return g_version > 0 ? version_string(g_version) : "";
}

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  struct Built {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace = 0;
  };
  std::map<std::string, Built> graphs;
  std::vector<std::string> plans;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;

  /// The graph built for `key`, or nullptr before its first use.
  Built* find(const std::string& key) {
    auto it = graphs.find(key);
    return it == graphs.end() ? nullptr : &it->second;
  }
  /// An empty graph of io type `t`, computing and keeping intermediates in fp32.
  static std::shared_ptr<fe::graph::Graph> new_graph(DType t) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe_type(t))
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
  }

  // Builds (first use of `key`) with the frontend's heuristics, falling back to its list of
  // every engine when the heuristic's choices cannot run the graph.
  Built& build(const std::string& key, std::shared_ptr<fe::graph::Graph> g) {
    check_fe(g->validate(), ("validating " + key).c_str());
    check_fe(g->build_operation_graph(handle), ("building " + key).c_str());
    check_fe(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
             ("planning " + key).c_str());
    fe::error_t support = g->check_support(handle);
    if (support.is_bad())
      throw UsageError("--attention cudnn: cuDNN " + cudnn_loaded_version() +
                       " has no engine for " + key + ": " + support.get_message());
    check_fe(g->build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE),
             ("compiling " + key).c_str());
    Built b;
    b.graph = std::move(g);
    check_fe(b.graph->get_workspace_size(b.workspace), "workspace size");
    std::string plan;
    check_fe(b.graph->get_plan_name(plan), "plan name");
    plans.push_back(key + ": " + plan);
    return graphs.emplace(key, std::move(b)).first->second;
  }

  // Grows the workspace. A replaced one stays allocated until the end: work already queued,
  // or a CUDA graph being captured, may still refer to it (and neither may be waited on here).
  void* workspace_for(int64_t bytes) {
    if (bytes > workspace_bytes) {
      if (workspace != nullptr) retired.push_back(workspace);
      RIDGELINE_CHECK(cudaMalloc(&workspace, static_cast<size_t>(bytes)));
      workspace_bytes = bytes;
    }
    return workspace;
  }
  std::vector<void*> retired;
};

CudnnAttention::CudnnAttention(void* stream) : m_impl(std::make_unique<Impl>()) {
  load_cudnn();
  m_impl->stream = static_cast<cudaStream_t>(stream);
  const cudnnStatus_t st = fe::detail::create_handle(&m_impl->handle);
  if (st != CUDNN_STATUS_SUCCESS)
    throw Error(std::string("cudnnCreate: ") + fe::detail::get_error_string(st));
  const cudnnStatus_t ss = fe::detail::set_stream(m_impl->handle, m_impl->stream);
  if (ss != CUDNN_STATUS_SUCCESS)
    throw Error(std::string("cudnnSetStream: ") + fe::detail::get_error_string(ss));
}

CudnnAttention::~CudnnAttention() {
  m_impl->graphs.clear();
  m_impl->retired.push_back(m_impl->workspace);
  for (void* p : m_impl->retired)
    if (p != nullptr) RIDGELINE_CHECK_NOTHROW(cudaFree(p));
  if (m_impl->handle != nullptr) fe::detail::destroy_handle(m_impl->handle);
}

std::vector<std::string> CudnnAttention::plans() const {
  return m_impl->plans;
}

void CudnnAttention::forward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                             const Tensor& v, Tensor out, void* stats) {
  const DType t = q.dtype;
  const std::string key = shape_key("fwd", s, t, q, k, v, out, stats != nullptr);
  Impl::Built* built = m_impl->find(key);
  if (built == nullptr) {
    auto g = Impl::new_graph(t);
    const int64_t d = s.head_dim;
    auto tq = input(*g, "q", kQ, dims(s.batch, s.heads, s.seq, d), strides(q, s.seq, d));
    auto tk =
        input(*g, "k", kK, dims(s.batch, s.kv_heads, s.context, d), strides(k, s.capacity, d));
    auto tv =
        input(*g, "v", kV, dims(s.batch, s.kv_heads, s.context, d), strides(v, s.capacity, d));
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("sdpa")
                    .set_generate_stats(stats != nullptr)
                    .set_attn_scale(1.0f / std::sqrt(static_cast<float>(d)));
    set_mask(opts, s);
    auto [to, tstats] = g->sdpa(tq, tk, tv, opts);
    to->set_output(true)
        .set_uid(kO)
        .set_dim(dims(s.batch, s.heads, s.seq, d))
        .set_stride(strides(out, s.seq, d));
    if (stats != nullptr)
      tstats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
    built = &m_impl->build(key, std::move(g));
  }
  std::unordered_map<int64_t, void*> pack = {
      {kQ, q.data}, {kK, k.data}, {kV, v.data}, {kO, out.data}};
  if (stats != nullptr) pack.emplace(kStats, stats);
  check_fe(built->graph->execute(m_impl->handle, pack, m_impl->workspace_for(built->workspace)),
           "sdpa forward");
}

void CudnnAttention::backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const void* stats, Tensor dq, Tensor dk, Tensor dv) {
  RIDGELINE_REQUIRE(stats != nullptr, "cudnn attention backward needs the forward's stats");
  RIDGELINE_REQUIRE(dout.ld == out.ld && dq.ld == q.ld && dk.ld == k.ld && dv.ld == v.ld,
                    "cudnn attention backward: gradients take their operand's layout");
  const DType t = q.dtype;
  const std::string key = shape_key("bwd", s, t, q, k, v, out, true, dout.ld);
  Impl::Built* built = m_impl->find(key);
  if (built == nullptr) {
    auto g = Impl::new_graph(t);
    const int64_t d = s.head_dim;
    const auto qdim = dims(s.batch, s.heads, s.seq, d);
    const auto kvdim = dims(s.batch, s.kv_heads, s.context, d);
    auto tq = input(*g, "q", kQ, qdim, strides(q, s.seq, d));
    auto tk = input(*g, "k", kK, kvdim, strides(k, s.capacity, d));
    auto tv = input(*g, "v", kV, kvdim, strides(v, s.capacity, d));
    auto to = input(*g, "o", kO, qdim, strides(out, s.seq, d));
    auto tdo = input(*g, "do", kdO, qdim, strides(dout, s.seq, d));
    auto tstats = g->tensor(fe::graph::Tensor_attributes()
                                .set_name("stats")
                                .set_uid(kStats)
                                .set_dim({s.batch, s.heads, s.seq, 1})
                                .set_stride({s.heads * s.seq, s.seq, 1, 1})
                                .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("sdpa_backward")
                    .set_attn_scale(1.0f / std::sqrt(static_cast<float>(d)));
    set_mask(opts, s);
    auto [tdq, tdk, tdv] = g->sdpa_backward(tq, tk, tv, to, tdo, tstats, opts);
    tdq->set_output(true).set_uid(kdQ).set_dim(qdim).set_stride(strides(dq, s.seq, d));
    tdk->set_output(true).set_uid(kdK).set_dim(kvdim).set_stride(strides(dk, s.capacity, d));
    tdv->set_output(true).set_uid(kdV).set_dim(kvdim).set_stride(strides(dv, s.capacity, d));
    built = &m_impl->build(key, std::move(g));
  }
  std::unordered_map<int64_t, void*> pack = {
      {kQ, q.data},   {kK, k.data},     {kV, v.data},
      {kO, out.data}, {kdO, dout.data}, {kStats, const_cast<void*>(stats)},
      {kdQ, dq.data}, {kdK, dk.data},   {kdV, dv.data}};
  check_fe(built->graph->execute(m_impl->handle, pack, m_impl->workspace_for(built->workspace)),
           "sdpa backward");
}

} // namespace ridgeline
