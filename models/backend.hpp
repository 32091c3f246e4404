// The compute backend interface: tensors, allocation, kernels and lanes. The host backend
// (OpenBLAS, fp32) and the CUDA backend (cuBLASLt, bf16/fp16) implement it; the layer
// schedules in parallel/ are written once against it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"
#include "models/generator.hpp"
#include "models/kernel_tuning.hpp"

namespace ridgeline {

/// Shape of one attention call. Prefill: q has batch*seq rows and attends causally to the
/// seq keys of its own sequence. Decode: q has batch rows (one new token each) and attends to
/// the first `context` rows of its sequence's cache block (cache rows are [batch, capacity]).
struct AttentionShape {
  int64_t batch = 1;
  int64_t seq = 1;      ///< query tokens per sequence
  int64_t context = 1;  ///< key/value tokens visible per sequence (decode: includes the new one)
  int64_t capacity = 1; ///< rows per sequence in the KV tensors (prefill: seq)
  int64_t heads = 1;    ///< query heads on this rank
  int64_t kv_heads = 1; ///< key/value heads on this rank (GQA: heads % kv_heads == 0)
  int64_t head_dim = 1;
  /// Causal mask, bottom-right aligned: query i sees keys j <= context - seq + i. Off: every
  /// query sees every key (tests and benchmarks; the layer is always causal).
  bool causal = true;
};

/// Whether a GEMM operand is used as stored or transposed.
enum class Trans { no, yes };

/// How the CUDA backend chooses a GEMM's kernel. heuristic: cuBLASLt's first choice. search: for
/// GEMMs of at most 256 rows (decode's), the fastest of every candidate cuBLASLt offers (split-K
/// among them) and, where it applies (at most 16 rows, c = a * w^T), the project's skinny
/// kernel, timed at the first call of each shape and cached. skinny: the project's CUDA-core
/// skinny kernel wherever it applies (at most 4 rows), cuBLASLt's first choice elsewhere.
enum class GemmAlgo { heuristic, search, skinny };

/// How grouped_gemm() runs its groups (an MoE layer's experts). loop: one GEMM after another on
/// the lane's stream. streams: the groups spread over a few streams that run at once, each GEMM
/// cuBLASLt's (CUDA). cublas: cuBLAS's grouped batched GEMM, every group in one call (CUDA).
/// The host backend always loops.
enum class GroupedGemm { loop, streams, cublas };

/// "loop", "streams", "cublas".
inline const char* grouped_gemm_name(GroupedGemm g) {
  return g == GroupedGemm::streams ? "streams" : g == GroupedGemm::cublas ? "cublas" : "loop";
}

/// Attention implementation: fused (the project's kernel: online softmax, no s x s matrix),
/// naive (materialised scores) or cudnn (cuDNN's fused SDPA; CUDA backend with cuDNN only).
enum class AttentionImpl { fused, naive, cudnn };

/// "fused", "naive", "cudnn".
inline const char* attention_name(AttentionImpl a) {
  return a == AttentionImpl::naive ? "naive" : a == AttentionImpl::cudnn ? "cudnn" : "fused";
}
/// The names above; throws UsageError otherwise.
inline AttentionImpl parse_attention(const std::string& name) {
  if (name == "fused") return AttentionImpl::fused;
  if (name == "naive") return AttentionImpl::naive;
  if (name == "cudnn") return AttentionImpl::cudnn;
  throw UsageError("unknown attention implementation '" + name + "' (fused, naive, cudnn)");
}

/// A compute backend. Kernels are enqueued on the compute lane unless a lane is given, and are
/// asynchronous on GPUs; every method is called by one rank on its own device.
/// An op that follows a forward GEMM c = a * w^T and may run inside its kernel
/// (Backend::gemm_epilogue()).
struct GemmEpilogue {
  enum class Kind {
    gelu,          ///< out = gelu(c)
    swiglu,        ///< out = silu(c's first half of columns) * c's second half
    residual,      ///< out += c (out: the residual stream)
    rotary_append, ///< rotary on c, then c's key and value columns into the cache
  };
  Kind kind = Kind::gelu;
  Tensor out; ///< gelu, swiglu and residual
  /// rotary_append: the first `rotated_heads` heads of c (head_dim columns each) rotate at
  /// position `pos` (Backend::rotary(), seq_len 1) with base `theta`; then c's columns from
  /// `cache_col0` on go to `cache` rows pos, pos + cache_seq_rows, ... (row i of c is sequence
  /// i, whose slots start at row i * cache_seq_rows of `cache`).
  int64_t head_dim = 0, rotated_heads = 0, pos = 0;
  float theta = 0.0f;
  Tensor cache;
  int64_t cache_seq_rows = 0, cache_col0 = 0;
  /// The RMS norm before the GEMM, when `norm_gamma` is set: the GEMM multiplies
  /// rms_norm(a, norm_gamma, norm_eps) instead of a. Folded into the GEMM's kernel where
  /// fuses_rms_norm(a.rows) (a's rows are normalized inside it, nothing is written); otherwise
  /// Backend::rms_norm() writes the norm to `norm_out` first and the GEMM reads that.
  Tensor norm_gamma, norm_out;
  float norm_eps = 0.0f;
};

class Backend : public Device {
public:
  /// Element type of activations and weights.
  virtual DType dtype() const = 0;
  /// Makes `waiter` wait for everything issued so far on `signal` (device-side; no host sync).
  virtual void join(Lane waiter, Lane signal) = 0;
  /// Marks everything issued so far on `lane` (an event on GPUs); wait_fence() makes another
  /// lane wait for exactly that point, not for later work. The host runs synchronously: no-ops.
  /// A fence must be waited on before 64 newer fences are made.
  virtual size_t fence(Lane lane) { return 0; }
  virtual void wait_fence(Lane waiter, size_t fence) {}
  /// A fence like fence() from a pool that fence() does not reuse: it stays valid, however many
  /// fences come after it, until release_fence() (for a wait an action or more later, such as a
  /// pipeline receive). wait_fence() takes both kinds.
  virtual size_t hold_fence(Lane lane) { return 0; }
  virtual void release_fence(size_t fence) {}

  /// Allocates rows x cols elements of dtype() (contents undefined).
  virtual Buffer allocate(int64_t rows, int64_t cols) = 0;
  /// t(r, c) = generate(key, row0 + r, col0 + c).
  virtual void fill_random(Tensor t, const GenKey& key, int64_t row0, int64_t col0) = 0;
  virtual void fill_value(Tensor t, float value) = 0;
  /// dst = src (same shape; either may be strided).
  virtual void copy(const Tensor& src, Tensor dst, Lane lane = Lane::compute) = 0;
  /// Device -> host copy as fp32 (synchronises).
  virtual std::vector<float> to_host(const Tensor& t) = 0;

  /// The memory-roof kernels over the first `bytes` bytes of the buffers (a multiple of 16):
  /// read sums every element of `src` into a small sink, write stores a constant into `dst`,
  /// copy writes `src` into `dst`. Vectorised (16-byte accesses on GPUs); asynchronous on GPUs.
  enum class MemoryPass { read, write, copy };
  virtual void memory_pass(MemoryPass kind, const Buffer& src, const Buffer& dst, size_t bytes,
                           Lane lane = Lane::compute) = 0;
  /// Launches `count` empty kernels back to back on `lane` (the launch floor; on the host an
  /// empty call through the same dispatch the kernels take).
  virtual void empty_kernels(int count, Lane lane = Lane::compute) = 0;

  /// SMs that later gemm() calls ask the library to use (0 = every SM), so that a collective
  /// running beside them finds free SMs. The host backend ignores it.
  virtual void set_gemm_sm_limit(int sms) {}
  /// How later gemm() calls choose their kernel (see GemmAlgo). The host backend ignores it.
  virtual void set_gemm_algo(GemmAlgo algo) {}
  /// How grouped_gemm() runs its groups; backends without a choice ignore it.
  virtual void set_grouped_gemm(GroupedGemm how) {}
  /// The kernel switches of later launches (see KernelTuning). The host backend ignores them.
  virtual void set_kernel_tuning(const KernelTuning& tuning) {}
  /// While on, the ops issued are a forward step, which writes no weights: a GPU may then start
  /// each kernel while the one before it ends (the skinny GEMM loads its weights before it waits
  /// for its input). The host backend ignores it.
  virtual void set_launch_chain(bool on) {}
  /// The shapes searched or given to the skinny kernel and what each kept, one line each.
  virtual std::vector<std::string> gemm_choices() const { return {}; }
  /// c = op(a) * op(b), fp32 accumulation, where op(x) is x or x^T: op(a) is [m, k], op(b) is
  /// [k, n], c is [m, n]. With `accumulate` the product is added to what c holds (gradients
  /// summed over microbatches). cuBLASLt layouts on GPUs, OpenBLAS trans arguments on the host.
  virtual void gemm(const Tensor& a, Trans ta, const Tensor& b, Trans tb, Tensor c, bool accumulate,
                    Lane lane) = 0;
  /// c[m, n] = a[m, k] * w[n, k]^T (the layers' forward GEMM).
  void gemm(const Tensor& a, const Tensor& w, Tensor c, Lane lane = Lane::compute) {
    gemm(a, Trans::no, w, Trans::yes, c, false, lane);
  }
  /// The forward GEMM of each group (an expert's rows): rows [offsets[g], offsets[g + 1]) of c
  /// are the same rows of a times w[g]^T; groups without rows are skipped. offsets holds
  /// w.size() + 1 entries from 0 to a.rows. One gemm() per group unless a backend runs them
  /// together (see GroupedGemm).
  virtual void grouped_gemm(const Tensor& a, const std::vector<Tensor>& w,
                            const std::vector<int64_t>& offsets, Tensor c,
                            Lane lane = Lane::compute);
  /// c[m, n] = a[m, k] * w[n, k]^T + addend[m, n] (addend may not be c), rounded once where
  /// the backend sums inside the GEMM (cuBLASLt's C input on GPUs); otherwise the addend copied
  /// into c and the product accumulated onto it.
  virtual void gemm_add(const Tensor& a, const Tensor& w, const Tensor& addend, Tensor c);
  /// Whether gemm_epilogue() runs an op of `kind` inside the GEMM's own kernel for `rows`
  /// activation rows (the CUDA backend under GemmAlgo::skinny at a decode step's few rows). The
  /// host backend, and every other case, runs the GEMM and the op in turn.
  virtual bool fuses_epilogue(int64_t rows, GemmEpilogue::Kind kind) const { return false; }
  /// Whether gemm_epilogue() also folds the RMS norm of its input (GemmEpilogue::norm_gamma)
  /// into the kernel for `rows` rows when it folds the epilogue.
  virtual bool fuses_rms_norm(int64_t rows) const { return false; }
  /// The forward GEMM c = a * w^T (c as gemm() takes it) and then `e`, the op after it: one
  /// kernel where fuses_epilogue(a.rows, e.kind), else gemm() and the op's own call. Fused, c is
  /// written only by rotary_append (gelu, swiglu and residual store their result alone), and every
  /// sum is rounded to the element type once, where the op stores it.
  virtual void gemm_epilogue(const Tensor& a, const Tensor& w, Tensor c, const GemmEpilogue& e);
  virtual void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                          float eps) = 0;
  virtual void rms_norm(const Tensor& x, const Tensor& gamma, Tensor y, float eps) = 0;
  /// The residual add fused with the norm after it: sum = x + r (the residual stream; may be
  /// x), then y = norm(sum): layer norm with `beta`, RMS norm when beta.data is null. The
  /// result equals add() then layer_norm() / rms_norm().
  virtual void add_norm(const Tensor& x, const Tensor& r, Tensor sum, const Tensor& gamma,
                        const Tensor& beta, Tensor y, float eps) = 0;
  /// add_norm() with the residual branch given as two partial sums p and q (a reduce-scatter's
  /// own piece and the piece a peer sent): sum = x + round(p + q), then y = norm(sum). The
  /// result equals add(p, q, p) then add_norm(x, p, ...), with p left unchanged.
  virtual void add_partials_norm(const Tensor& x, const Tensor& p, const Tensor& q, Tensor sum,
                                 const Tensor& gamma, const Tensor& beta, Tensor y, float eps) = 0;
  /// y = x + round(p + q): add(p, q, p) then add(x, p, y) in one pass, p left unchanged.
  virtual void add_partials(const Tensor& x, const Tensor& p, const Tensor& q, Tensor y) = 0;
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
  /// rotary() with each row at its own position: row r at positions[r] (positions.size() ==
  /// x.rows), as a mixed step's rows of sequences at different contexts are. The default is one
  /// rotary() per run of rows whose positions go up by one; the CUDA backend runs every row in
  /// one launch.
  virtual void rotary_rows(Tensor x, int64_t heads, int64_t head_dim,
                           const std::vector<int64_t>& positions, float theta);
  /// out[batch*seq, heads*head_dim] = softmax(q k^T / sqrt(d) + causal mask) v.
  virtual void attention(const AttentionShape& shape, const Tensor& q, const Tensor& k,
                         const Tensor& v, Tensor out, AttentionImpl impl) = 0;
  /// Decode attention of sequences of different contexts in one call: sequence i's query is
  /// row i of q (and its output row i of out), its keys and values rows [i * capacity, i *
  /// capacity + contexts[i]) of k and v (contexts include the new token, 1 <= contexts[i] <=
  /// capacity). `shape` gives batch (== contexts.size()), capacity, heads, kv_heads and head_dim;
  /// its seq must be 1 and its context is not read. The default is one attention() per run of
  /// consecutive equal contexts; the CUDA backend's fused implementation runs every sequence in
  /// one launch (and a combine of the context splits).
  virtual void attention_decode_ragged(const AttentionShape& shape,
                                       const std::vector<int64_t>& contexts, const Tensor& q,
                                       const Tensor& k, const Tensor& v, Tensor out,
                                       AttentionImpl impl);

  // Backward kernels (the train phase). Each takes what its forward read (recomputing the rest)
  // and the gradient of its output. Parameter gradients ([1, cols]) are sums over rows, added
  // to what they hold when `accumulate` (microbatches), written otherwise.

  /// dx, dgamma, dbeta of layer_norm(x, gamma, beta) from dy.
  virtual void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                   Tensor dx, Tensor dgamma, Tensor dbeta, float eps,
                                   bool accumulate) = 0;
  /// dx, dgamma of rms_norm(x, gamma) from dy.
  virtual void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                                 Tensor dgamma, float eps, bool accumulate) = 0;
  /// dx = dy * gelu'(x) (the tanh approximation's derivative).
  virtual void gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) = 0;
  /// d_gate_up [m, 2f] of swiglu(gate_up) from dy [m, f].
  virtual void swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor d_gate_up) = 0;
  /// The gradient through rotary() (same arguments): the inverse rotation, in place.
  virtual void rotary_backward(Tensor dx, int64_t heads, int64_t head_dim, int64_t seq_len,
                               int64_t pos0, float theta) = 0;
  /// attention() that also writes what the backward needs: the softmax log-sum-exp of every
  /// query row (natural log, of the scaled scores), fp32 [batch, heads, seq] at `lse`.
  virtual void attention_train(const AttentionShape& shape, const Tensor& q, const Tensor& k,
                               const Tensor& v, Tensor out, void* lse, AttentionImpl impl) = 0;
  /// dq, dk, dv (layouts of q, k, v; grouped heads' dk and dv summed) from the forward's
  /// inputs, output, log-sum-exp and the output gradient. Fused and cudnn never form the
  /// [seq, context] matrix; naive does, through batched GEMMs. Prefill shapes
  /// (seq == context == capacity).
  virtual void attention_backward(const AttentionShape& shape, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& out, const Tensor& dout,
                                  const void* lse, Tensor dq, Tensor dk, Tensor dv,
                                  AttentionImpl impl) = 0;
  /// y += alpha * x (the plain SGD update).
  virtual void axpy(float alpha, const Tensor& x, Tensor y) = 0;
  /// out row r = x row index[r], for every row of out (index.size() == out.rows): the gather of
  /// an MoE dispatch. One copy() per row unless a backend gathers in one kernel.
  virtual void gather_rows(const Tensor& x, const std::vector<int64_t>& index, Tensor out);
  /// The router's choice for each row of `logits` [tokens, experts]: expert[t k + j] the j-th of
  /// the k columns of highest score (the logit, or with `sigmoid` its sigmoid; ties to the lower
  /// column) and weight[t k + j] its combine weight (the softmax over the k chosen logits, or
  /// the k sigmoids over their sum): route_top_k's rule (models/moe_routing.hpp). Reads the
  /// logits back and routes on the host unless a backend routes on the device (then only the
  /// choice comes back). Waits for the device.
  virtual void route_top_k(const Tensor& logits, int64_t top_k, bool sigmoid,
                           std::vector<int32_t>& expert, std::vector<float>& weight);
  /// out row index[r] = rows row r, for every row of rows (distinct indices): a mixed step's
  /// decode tokens' keys and values into their sequences' cache rows. One copy() per row unless
  /// a backend copies every row in one kernel.
  virtual void scatter_rows(const Tensor& rows, const std::vector<int64_t>& index, Tensor out);
  /// y row index[r] += weight[r] * rows row r, for every row of rows, the rows of one destination
  /// added in r's order: the weighted combine of an MoE layer. One axpy() per row unless a
  /// backend adds every destination's rows in one kernel (then rounded once per destination).
  virtual void scatter_add_rows(const Tensor& rows, const std::vector<int64_t>& index,
                                const std::vector<float>& weight, Tensor y);

  /// What the attention libraries chose so far, one line per built plan (cuDNN: shape, engine
  /// and knobs); empty where nothing was chosen at run time.
  virtual std::vector<std::string> attention_plans() const { return {}; }
};

/// Creates the host backend (OpenBLAS, fp32).
std::unique_ptr<Backend> make_host_backend();

} // namespace ridgeline
