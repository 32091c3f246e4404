// Unit tests of models: generator, work model, and the host backend's kernels.
#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "models/backend.hpp"
#include "models/generator.hpp"
#include "models/layer_plan.hpp"
#include "models/model_spec.hpp"
#include "models/op_registry.hpp"
#include "models/work_model.hpp"

namespace ridgeline {
namespace {

TEST(Generator, DeterministicBoundedAndKeyed) {
  const GenKey k{7, tensor_id(3, 1), 1000, 0.5f};
  EXPECT_EQ(generate(k, 5, 6), generate(k, 5, 6));
  std::set<float> seen;
  for (int r = 0; r < 50; ++r)
    for (int c = 0; c < 50; ++c) {
      const float v = generate(k, r, c);
      EXPECT_GE(v, -0.5f);
      EXPECT_LT(v, 0.5f);
      seen.insert(v);
    }
  EXPECT_GT(seen.size(), 2400u); // essentially no repeats
  GenKey other = k;
  other.seed = 8;
  EXPECT_NE(generate(k, 1, 1), generate(other, 1, 1));
  other = k;
  other.tensor = tensor_id(3, 2);
  EXPECT_NE(generate(k, 1, 1), generate(other, 1, 1));
  // Mean near zero and variance near scale^2 / 3 for a uniform distribution.
  double sum = 0, sq = 0;
  for (int i = 0; i < 100000; ++i) {
    const double v = generate(k, i / 1000, i % 1000);
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / 1e5, 0.0, 0.01);
  EXPECT_NEAR(sq / 1e5, 0.25 / 3, 0.002);
}

TEST(Generator, ShardEqualsSliceOfFullTensor) {
  auto be = make_host_backend();
  const GenKey key{11, tensor_id(0, 4), 96, 1.0f};
  Buffer full_buf = be->allocate(8, 96);
  const Tensor full = full_buf.view(8, 96, DType::f32);
  be->fill_random(full, key, 0, 0);
  const std::vector<float> f = be->to_host(full);
  for (int rank = 0; rank < 4; ++rank) { // column shards of 24, as a row-parallel weight
    Buffer shard_buf = be->allocate(8, 24);
    const Tensor shard = shard_buf.view(8, 24, DType::f32);
    be->fill_random(shard, key, 0, rank * 24);
    const std::vector<float> s = be->to_host(shard);
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 24; ++c)
        ASSERT_EQ(s[r * 24 + c], f[r * 96 + rank * 24 + c]);
  }
}

ModelSpec gpt(int64_t h, int64_t heads, int64_t ffn) {
  ModelSpec m;
  m.hidden = h;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = ffn;
  m.layers = 1;
  return m;
}

TEST(WorkModel, GemmAndAttentionFlopsMatchHandCounts) {
  const ModelSpec m = gpt(8192, 64, 32768);
  LayerShape s;
  s.seq = 4096;
  s.batch = 1;
  s.tp = 4;
  s.dtype = DType::bf16;
  const auto ops = layer_ops(m, s, AttentionImpl::fused);
  const double t = 4096, h = 8192;
  // QKV: 2 * t * (3h / tp) * h; proj: 2 * t * h * (h / tp); fc1/fc2: 2 * t * (4h / tp) * h.
  EXPECT_DOUBLE_EQ(find_op(ops, op::qkv).cost.flops, 2 * t * (3 * h / 4) * h);
  EXPECT_DOUBLE_EQ(find_op(ops, op::proj).cost.flops, 2 * t * h * (h / 4));
  EXPECT_DOUBLE_EQ(find_op(ops, op::fc1).cost.flops, 2 * t * (4 * h / 4) * h);
  EXPECT_DOUBLE_EQ(find_op(ops, op::fc2).cost.flops, 2 * t * h * (4 * h / 4));
  // Causal attention: 4 * heads/tp * d * s(s+1)/2 (QK^T and PV).
  EXPECT_DOUBLE_EQ(find_op(ops, op::attention).cost.flops, 4.0 * 16 * 128 * 4096.0 * 4097 / 2);
  // All-reduce message = t * h * 2 bytes.
  EXPECT_DOUBLE_EQ(find_op(ops, op::allreduce_attn).cost.comm_bytes, t * h * 2);
  EXPECT_EQ(find_op(ops, op::allreduce_mlp).lane, Lane::comm);
  // GEMM bytes: A + W + C once each.
  const double f_local = 4 * h / 4; // act [t, f/tp], W2 [h, f/tp], out [t, h]
  EXPECT_DOUBLE_EQ(find_op(ops, op::fc2).cost.hbm_bytes, (t * f_local + h * f_local + t * h) * 2);
  EXPECT_THROW(find_op(ops, op::rotary), Error); // no rotary in a GPT layer
}

// The train plan under sequence parallelism: the backward mirrors the forward's collectives (an
// all-gather of the output gradient where the forward reduce-scattered, a reduce-scatter of the
// input gradient where it gathered), in execution order, with no all-reduce; without it, the
// two all-reduces of the column-parallel input gradients.
TEST(LayerPlan, SequenceParallelBackwardMirrorsTheForward) {
  const ModelSpec m = gpt(1024, 16, 4096);
  LayerShape s;
  s.seq = 512;
  s.batch = 2;
  s.tp = 4;
  s.dtype = DType::bf16;
  std::vector<std::string> collectives;
  for (const OpSpec& o : train_layer_plan(m, s, AttentionImpl::fused))
    if (o.kind == OpKind::collective) collectives.push_back(o.name);
  EXPECT_EQ(collectives, (std::vector<std::string>{op::allreduce_attn, op::allreduce_mlp,
                                                   op::allreduce_mlp_bwd, op::allreduce_attn_bwd}));
  s.sequence_parallel = true;
  const std::vector<OpSpec> plan = train_layer_plan(m, s, AttentionImpl::fused);
  collectives.clear();
  for (const OpSpec& o : plan)
    if (o.kind == OpKind::collective) collectives.push_back(o.name);
  EXPECT_EQ(collectives,
            (std::vector<std::string>{op::allgather_attn, op::reducescatter_attn, op::allgather_mlp,
                                      op::reducescatter_mlp, op::allgather_mlp_bwd,
                                      op::reducescatter_mlp_bwd, op::allgather_attn_bwd,
                                      op::reducescatter_attn_bwd}));
  EXPECT_DOUBLE_EQ(find_op(plan, op::allgather_mlp_bwd).cost.comm_bytes,
                   find_op(plan, op::allgather_mlp).cost.comm_bytes);
  EXPECT_DOUBLE_EQ(find_op(plan, op::reducescatter_attn_bwd).cost.comm_bytes,
                   find_op(plan, op::reducescatter_attn).cost.comm_bytes);
  EXPECT_EQ(find_op(plan, op::allgather_attn_bwd).pass, Pass::backward_input);
  // The norms' backward sees this rank's rows: a quarter of the tokens.
  LayerShape whole = s;
  whole.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(
      find_op(plan, op::norm2_bwd).cost.flops * 4,
      find_op(train_layer_plan(m, whole, AttentionImpl::fused), op::norm2_bwd).cost.flops);
}

// The op registry: one row per name, an unregistered name refused, and every entry of the layer
// plans (prefill, decode, sequence parallelism, the train phase's backward) a row whose kind,
// lane, pass and collective are the entry's.
TEST(OpRegistry, EveryPlannedOpIsItsRow) {
  std::set<std::string> names;
  for (const OpRow& row : kOpRows)
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
  for (int i = 0; i < layer_op::op_count; ++i)
    EXPECT_EQ(op_index(kOpRows[i].name), i);
  EXPECT_EQ(op_index("no_such_op"), -1);
  EXPECT_THROW(op_row("no_such_op"), Error);
  EXPECT_THROW(registered_op("no_such_op"), Error);

  ModelSpec m = gpt(1024, 16, 4096);
  m.rotary = true;
  LayerShape s;
  s.seq = 256;
  s.batch = 2;
  s.tp = 4;
  s.dtype = DType::bf16;
  LayerShape sp = s, decode = s;
  sp.sequence_parallel = true;
  decode.phase = Phase::decode;
  decode.context = 100;
  size_t checked = 0;
  for (const auto& plan :
       {train_layer_plan(m, s, AttentionImpl::fused), train_layer_plan(m, sp, AttentionImpl::naive),
        layer_ops(m, decode, AttentionImpl::fused)})
    for (const OpSpec& o : plan) {
      const OpRow& row = op_row(o.name);
      EXPECT_EQ(o.kind, row.kind) << o.name;
      EXPECT_EQ(o.lane, row.lane) << o.name;
      EXPECT_EQ(o.pass, row.pass) << o.name;
      EXPECT_EQ(o.collective, row.collective) << o.name;
      EXPECT_EQ(o.kind == OpKind::collective, !o.collective.empty()) << o.name;
      ++checked;
    }
  EXPECT_GT(checked, 60u);
}

TEST(WorkModel, NoCollectivesAtTp1AndDecodeShapes) {
  ModelSpec m = gpt(4096, 32, 14336);
  m.kv_heads = 8;
  m.mlp = MlpKind::swiglu;
  m.rotary = true;
  LayerShape s;
  s.phase = Phase::decode;
  s.batch = 64;
  s.context = 1000;
  s.tp = 1;
  s.dtype = DType::bf16;
  const auto ops = layer_ops(m, s, AttentionImpl::fused);
  for (const OpSpec& o : ops)
    EXPECT_NE(o.kind, OpKind::collective) << o.name;
  // SwiGLU FC1 produces gate and up: 2 * tokens * 2f * h.
  EXPECT_DOUBLE_EQ(find_op(ops, op::fc1).cost.flops, 2.0 * 64 * 2 * 14336 * 4096);
  // Decode attention: each of 64 sequences reads context + 1 keys for 32 heads of 128.
  EXPECT_DOUBLE_EQ(find_op(ops, op::attention).cost.flops, 4.0 * 64 * 32 * 128 * 1001);
  EXPECT_DOUBLE_EQ(find_op(ops, op::kv_append).cost.hbm_bytes, 4.0 * 64 * 8 * 128 * 2);
  EXPECT_NO_THROW(find_op(ops, op::rotary));
}

// A growing cache: the work model costs a step at the mean keys of the decode steps.
TEST(WorkModel, DecodeStepsCostTheMeanContext) {
  ModelSpec m = gpt(4096, 32, 14336);
  m.kv_heads = 8;
  LayerShape s;
  s.phase = Phase::decode;
  s.batch = 4;
  s.context = 1000;
  s.decode_steps = 10; // keys 1001 .. 1010, mean 1005.5
  s.dtype = DType::bf16;
  const auto ops = layer_ops(m, s, AttentionImpl::fused);
  EXPECT_DOUBLE_EQ(find_op(ops, op::attention).cost.flops, 4.0 * 4 * 32 * 128 * 1005.5);
  EXPECT_DOUBLE_EQ(find_op(ops, op::attention).cost.hbm_bytes,
                   (2.0 * 4 * 32 * 128 + 2.0 * 4 * 1005.5 * 8 * 128) * 2);
}

TEST(ModelSpec, KvHeadsSplitOrReplicate) {
  ModelSpec m = gpt(8192, 64, 28672);
  m.kv_heads = 8;
  EXPECT_EQ(local_kv_heads(m, 4), 2);
  EXPECT_EQ(first_kv_head(m, 4, 3), 6);
  EXPECT_EQ(local_kv_heads(m, 16), 1); // replicated: two ranks per KV head
  EXPECT_EQ(first_kv_head(m, 16, 5), 2);
  EXPECT_EQ(local_heads(m, 16), 4);
}

class HostKernels : public ::testing::Test {
protected:
  std::unique_ptr<Backend> be = make_host_backend();
  Tensor make(int64_t r, int64_t c, uint64_t role) {
    m_bufs.push_back(be->allocate(r, c));
    Tensor t = m_bufs.back().view(r, c, DType::f32);
    be->fill_random(t, GenKey{5, role, c, 1.0f}, 0, 0);
    return t;
  }
  std::vector<Buffer> m_bufs;
};

TEST_F(HostKernels, GemmMatchesReference) {
  const Tensor a = make(5, 7, 1), w = make(3, 7, 2), c = make(5, 3, 3);
  be->gemm(a, w, c);
  const auto av = be->to_host(a), wv = be->to_host(w), cv = be->to_host(c);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      double ref = 0;
      for (int k = 0; k < 7; ++k)
        ref += static_cast<double>(av[i * 7 + k]) * wv[j * 7 + k];
      EXPECT_NEAR(cv[i * 3 + j], ref, 1e-5);
    }
}

// gemm_add: the product plus the addend, which stays as it was; the addend may not be the output.
TEST_F(HostKernels, GemmAddAddsTheAddend) {
  const Tensor a = make(5, 7, 1), w = make(3, 7, 2), addend = make(5, 3, 4), c = make(5, 3, 3);
  const Tensor product = make(5, 3, 5);
  const std::vector<float> before = be->to_host(addend);
  be->gemm_add(a, w, addend, c);
  be->gemm(a, w, product);
  const auto cv = be->to_host(c), pv = be->to_host(product);
  for (size_t i = 0; i < cv.size(); ++i)
    EXPECT_NEAR(cv[i], pv[i] + before[i], 1e-5) << i;
  EXPECT_EQ(be->to_host(addend), before);
  EXPECT_THROW(be->gemm_add(a, w, c, c), Error);
}

TEST_F(HostKernels, NormsNormalise) {
  const Tensor x = make(4, 64, 1), gamma = make(1, 64, 2), beta = make(1, 64, 3),
               y = make(4, 64, 4);
  be->fill_value(gamma, 1.0f);
  be->fill_value(beta, 0.0f);
  be->layer_norm(x, gamma, beta, y, 1e-5f);
  auto v = be->to_host(y);
  for (int r = 0; r < 4; ++r) {
    double sum = 0, sq = 0;
    for (int c = 0; c < 64; ++c)
      sum += v[r * 64 + c], sq += v[r * 64 + c] * v[r * 64 + c];
    EXPECT_NEAR(sum / 64, 0.0, 1e-5);
    EXPECT_NEAR(sq / 64, 1.0, 1e-3);
  }
  be->rms_norm(x, gamma, y, 1e-5f);
  v = be->to_host(y);
  for (int r = 0; r < 4; ++r) {
    double sq = 0;
    for (int c = 0; c < 64; ++c)
      sq += v[r * 64 + c] * v[r * 64 + c];
    EXPECT_NEAR(sq / 64, 1.0, 1e-3);
  }
}

TEST_F(HostKernels, ActivationsAndRotary) {
  const Tensor x = make(1, 4, 1), y = make(1, 4, 2), gu = make(1, 8, 3), z = make(1, 4, 4);
  be->gelu(x, y);
  auto xv = be->to_host(x), yv = be->to_host(y);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(yv[i], 0.5 * xv[i] * (1 + std::erf(xv[i] / std::sqrt(2.0))), 1e-3); // tanh ~ erf
  be->swiglu(gu, z);
  auto gv = be->to_host(gu), zv = be->to_host(z);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(zv[i], gv[i] / (1 + std::exp(-gv[i])) * gv[4 + i], 1e-6);
  // Rotary at position 0 is the identity; rotation preserves each pair's norm.
  const Tensor q = make(3, 8, 5);
  const auto before = be->to_host(q);
  be->rotary(q, 2, 4, 3, 0, 10000.0f);
  const auto after = be->to_host(q);
  for (int c = 0; c < 8; ++c)
    EXPECT_FLOAT_EQ(after[c], before[c]);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 2; ++i) {
      const int a = 8 + h * 4 + i, b = a + 2;
      EXPECT_NEAR(after[a] * after[a] + after[b] * after[b],
                  before[a] * before[a] + before[b] * before[b], 1e-5);
    }
  EXPECT_NEAR(after[8], before[8] * std::cos(1.0) - before[10] * std::sin(1.0), 1e-6);
}

// Reference attention in double precision, straight from the definition.
std::vector<double> attention_ref(const AttentionShape& s, const std::vector<float>& q, int64_t qld,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  int64_t kld) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  std::vector<double> out(static_cast<size_t>(s.batch * s.seq * s.heads * d));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t last = s.context - s.seq + i;
        std::vector<double> p(static_cast<size_t>(last + 1));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += q[(b * s.seq + i) * qld + h * d + e] *
                   k[(b * s.capacity + j) * kld + (h / group) * d + e];
          p[j] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, p[j]);
        }
        for (auto& x : p)
          sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j <= last; ++j)
            acc += p[j] / sum * v[(b * s.capacity + j) * kld + (h / group) * d + e];
          out[((b * s.seq + i) * s.heads + h) * d + e] = acc;
        }
      }
  return out;
}

TEST_F(HostKernels, AttentionFusedAndNaiveMatchDefinition) {
  AttentionShape s;
  s.batch = 2;
  s.seq = 70; // crosses the 64-row query tile
  s.context = 70;
  s.capacity = 70;
  s.heads = 4;
  s.kv_heads = 2; // GQA
  s.head_dim = 8;
  const Tensor q = make(s.batch * s.seq, s.heads * s.head_dim, 1);
  const Tensor k = make(s.batch * s.capacity, s.kv_heads * s.head_dim, 2);
  const Tensor v = make(s.batch * s.capacity, s.kv_heads * s.head_dim, 3);
  const auto ref = attention_ref(s, be->to_host(q), q.ld, be->to_host(k), be->to_host(v), k.ld);
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::naive}) {
    const Tensor o = make(s.batch * s.seq, s.heads * s.head_dim, 4);
    be->attention(s, q, k, v, o, impl);
    const auto got = be->to_host(o);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-5) << i;
  }
}

TEST_F(HostKernels, DecodeAttentionSeesWholeContext) {
  AttentionShape s;
  s.batch = 3;
  s.seq = 1;
  s.context = 9;
  s.capacity = 12; // cache rows beyond context must be ignored
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 4;
  const Tensor q = make(s.batch, s.heads * s.head_dim, 1);
  const Tensor k = make(s.batch * s.capacity, s.head_dim, 2);
  const Tensor v = make(s.batch * s.capacity, s.head_dim, 3);
  const Tensor o = make(s.batch, s.heads * s.head_dim, 4);
  be->attention(s, q, k, v, o, AttentionImpl::fused);
  const auto ref = attention_ref(s, be->to_host(q), q.ld, be->to_host(k), be->to_host(v), k.ld);
  const auto got = be->to_host(o);
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], 1e-5) << i;
}

// The default ragged decode (one attention() per run of equal contexts) gives each sequence
// exactly what a call of its own gives: contexts of 1, equal neighbours, the full capacity, and
// grouped heads; strided views (columns of a wider tensor) as the mixed step passes them.
TEST_F(HostKernels, RaggedDecodeEqualsOneCallPerSequence) {
  const std::vector<int64_t> contexts = {1, 7, 7, 12, 3, 3, 3, 1, 12};
  AttentionShape s;
  s.batch = static_cast<int64_t>(contexts.size());
  s.seq = 1;
  s.capacity = 12;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 4;
  const int64_t kv_cols = s.kv_heads * s.head_dim, q_cols = s.heads * s.head_dim;
  const Tensor q = make(s.batch, q_cols + 3, 1).cols_slice(0, q_cols);
  const Tensor kv = make(s.batch * s.capacity, 2 * kv_cols, 2);
  const Tensor k = kv.cols_slice(0, kv_cols), v = kv.cols_slice(kv_cols, kv_cols);
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::naive}) {
    const Tensor ragged = make(s.batch, q_cols, 3), single = make(s.batch, q_cols, 4);
    be->attention_decode_ragged(s, contexts, q, k, v, ragged, impl);
    for (int64_t i = 0; i < s.batch; ++i) {
      AttentionShape one = s;
      one.batch = 1;
      one.context = contexts[static_cast<size_t>(i)];
      be->attention(one, q.rows_slice(i, 1), k.rows_slice(i * s.capacity, s.capacity),
                    v.rows_slice(i * s.capacity, s.capacity), single.rows_slice(i, 1), impl);
    }
    EXPECT_EQ(be->to_host(ragged), be->to_host(single)) << attention_name(impl);
  }
}

// Rotary at per-row positions (Backend::rotary_rows, the default: one rotary() per run of
// consecutive positions) gives each row what rotary() of that row alone at its position gives:
// a run of consecutive positions, repeats, a fall back and single rows; columns of a wider
// tensor, as the mixed step passes them.
TEST_F(HostKernels, RotaryRowsEqualsRotaryOfEachRow) {
  const std::vector<int64_t> positions = {5, 6, 7, 7, 0, 1, 1000, 3};
  const int64_t rows = static_cast<int64_t>(positions.size()), heads = 3, d = 8;
  const Tensor x = make(rows, heads * d + 5, 1).cols_slice(0, heads * d);
  const Tensor y = make(rows, heads * d, 2);
  be->copy(x, y);
  be->rotary_rows(x, heads, d, positions, 10000.0f);
  for (int64_t r = 0; r < rows; ++r)
    be->rotary(y.rows_slice(r, 1), heads, d, 1, positions[static_cast<size_t>(r)], 10000.0f);
  const std::vector<float> got = be->to_host(x), ref = be->to_host(y);
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], ref[i]) << i;
  EXPECT_THROW(be->rotary_rows(x, heads, d, {1, 2}, 10000.0f), Error);
}

// A row scatter puts each row where its index says and leaves every other row alone: the
// inverse of the gather of the same index.
TEST_F(HostKernels, ScatterRowsUndoesTheGather) {
  const std::vector<int64_t> index = {9, 0, 4, 7};
  const Tensor out = make(10, 6, 1), rows = make(4, 6, 2);
  const std::vector<float> before = be->to_host(out);
  be->scatter_rows(rows, index, out);
  const std::vector<float> after = be->to_host(out), r = be->to_host(rows);
  for (int64_t row = 0; row < 10; ++row) {
    const auto it = std::find(index.begin(), index.end(), row);
    for (int64_t c = 0; c < 6; ++c) {
      const float want = it == index.end() ? before[static_cast<size_t>(row * 6 + c)]
                                           : r[static_cast<size_t>((it - index.begin()) * 6 + c)];
      ASSERT_EQ(after[static_cast<size_t>(row * 6 + c)], want) << row << "," << c;
    }
  }
  const Tensor back = make(4, 6, 3);
  be->gather_rows(out, index, back);
  EXPECT_EQ(be->to_host(back), r);
  EXPECT_THROW(be->scatter_rows(rows, {1, 2}, out), Error);
}

TEST_F(HostKernels, StridedViewsCopyCacheSlots) {
  const Tensor cache = make(3 * 4, 2, 1); // 3 sequences x capacity 4
  const Tensor fresh = make(3, 2, 2);
  be->copy(fresh, cache.strided_rows(2, 3, 4)); // position 2 of every sequence
  const auto c = be->to_host(cache), f = be->to_host(fresh);
  for (int b = 0; b < 3; ++b)
    for (int e = 0; e < 2; ++e)
      EXPECT_EQ(c[(b * 4 + 2) * 2 + e], f[b * 2 + e]);
  EXPECT_THROW(cache.strided_rows(2, 4, 4), Error);
}

// A GEMM and the op after it (Backend::gemm_epilogue()): the host runs them in turn, and the
// result is each op's own, computed by hand from the GEMM's output.
TEST_F(HostKernels, GemmEpiloguesRunTheGemmThenTheOp) {
  using Kind = GemmEpilogue::Kind;
  EXPECT_FALSE(be->fuses_epilogue(1, Kind::rotary_append));
  const Tensor a = make(2, 6, 1), w = make(8, 6, 2);
  const Tensor plain = make(2, 8, 3);
  be->gemm(a, w, plain);
  const auto p = be->to_host(plain);
  auto run = [&](Kind kind, const Tensor& out) {
    GemmEpilogue e;
    e.kind = kind;
    e.out = out;
    const Tensor c = make(2, 8, 9);
    be->gemm_epilogue(a, w, c, e);
    EXPECT_EQ(be->to_host(c), p);
  };
  const Tensor g = make(2, 8, 4);
  run(Kind::gelu, g);
  const auto gv = be->to_host(g);
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(gv[i], 0.5 * p[i] * (1 + std::erf(p[i] / std::sqrt(2.0))), 1e-3);
  const Tensor sw = make(2, 4, 5);
  run(Kind::swiglu, sw);
  const auto sv = be->to_host(sw);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 4; ++j) {
      const float gate = p[r * 8 + j], up = p[r * 8 + 4 + j];
      EXPECT_NEAR(sv[r * 4 + j], gate / (1 + std::exp(-gate)) * up, 1e-5);
    }
  const Tensor y = make(2, 8, 6);
  const auto before = be->to_host(y);
  run(Kind::residual, y);
  const auto yv = be->to_host(y);
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(yv[i], before[i] + p[i], 1e-5);

  // Two heads of 4 columns, the first rotated at position 1, the second (columns 4-7) appended
  // to slot 1 of each of two sequences of 3 slots.
  GemmEpilogue e;
  e.kind = Kind::rotary_append;
  e.head_dim = 4;
  e.rotated_heads = 1;
  e.pos = 1;
  e.theta = 10000.0f;
  e.cache = make(2 * 3, 4, 7);
  be->fill_value(e.cache, 0.0f);
  e.cache_seq_rows = 3;
  e.cache_col0 = 4;
  const Tensor c = make(2, 8, 8);
  be->gemm_epilogue(a, w, c, e);
  const auto cv = be->to_host(c), kv = be->to_host(e.cache);
  for (int r = 0; r < 2; ++r) {
    const float* in = &p[r * 8];
    EXPECT_NEAR(cv[r * 8 + 0], in[0] * std::cos(1.0) - in[2] * std::sin(1.0), 1e-5);
    EXPECT_NEAR(cv[r * 8 + 2], in[2] * std::cos(1.0) + in[0] * std::sin(1.0), 1e-5);
    const double f = std::pow(10000.0, -0.5); // the second pair's frequency
    EXPECT_NEAR(cv[r * 8 + 1], in[1] * std::cos(f) - in[3] * std::sin(f), 1e-5);
    for (int j = 4; j < 8; ++j) {
      EXPECT_EQ(cv[r * 8 + j], in[j]);
      for (int slot = 0; slot < 3; ++slot)
        EXPECT_EQ(kv[(r * 3 + slot) * 4 + j - 4], slot == 1 ? in[j] : 0.0f);
    }
  }

  // The RMS norm in front: written to norm_out, and the GEMM (then GELU) taken over it.
  EXPECT_FALSE(be->fuses_rms_norm(1));
  GemmEpilogue n;
  n.kind = Kind::gelu;
  n.out = make(2, 8, 10);
  n.norm_gamma = make(1, 6, 11);
  n.norm_out = make(2, 6, 12);
  n.norm_eps = 1e-5f;
  be->gemm_epilogue(a, w, make(2, 8, 13), n);
  const auto av = be->to_host(a), wv = be->to_host(w), gam = be->to_host(n.norm_gamma);
  const auto nv = be->to_host(n.norm_out), ov = be->to_host(n.out);
  for (int r = 0; r < 2; ++r) {
    double squares = 0.0;
    for (int k = 0; k < 6; ++k)
      squares += av[r * 6 + k] * av[r * 6 + k];
    const double inv = 1.0 / std::sqrt(squares / 6 + 1e-5);
    for (int k = 0; k < 6; ++k)
      EXPECT_NEAR(nv[r * 6 + k], av[r * 6 + k] * inv * gam[k], 1e-5);
    for (int j = 0; j < 8; ++j) {
      double sum = 0.0;
      for (int k = 0; k < 6; ++k)
        sum += av[r * 6 + k] * inv * gam[k] * wv[j * 6 + k];
      EXPECT_NEAR(ov[r * 8 + j], 0.5 * sum * (1 + std::erf(sum / std::sqrt(2.0))), 1e-3);
    }
  }
}

TEST_F(HostKernels, MemoryPassesMoveTheRightBytes) {
  constexpr size_t kBytes = 4096 + 48;
  Buffer src = be->allocate_bytes(kBytes), dst = be->allocate_bytes(kBytes);
  std::vector<unsigned char> pattern(kBytes), got(kBytes);
  for (size_t i = 0; i < kBytes; ++i)
    pattern[i] = static_cast<unsigned char>(i * 7 + 1);
  be->upload(src.data(), pattern.data(), kBytes);

  be->memory_pass(Backend::MemoryPass::copy, src, dst, kBytes);
  be->download(got.data(), dst.data(), kBytes);
  EXPECT_EQ(got, pattern);

  // Every written 16-byte word is the same constant, and none is the pattern left there before.
  be->memory_pass(Backend::MemoryPass::write, src, dst, kBytes);
  be->download(got.data(), dst.data(), kBytes);
  for (size_t w = 0; w < kBytes; w += 16) {
    ASSERT_EQ(std::memcmp(got.data() + w, got.data(), 16), 0) << w;
    ASSERT_NE(std::memcmp(got.data() + w, pattern.data() + w, 16), 0) << w;
  }

  be->memory_pass(Backend::MemoryPass::read, src, dst, kBytes);
  be->download(got.data(), src.data(), kBytes);
  EXPECT_EQ(got, pattern);
  be->empty_kernels(1000);
  EXPECT_THROW(be->memory_pass(Backend::MemoryPass::copy, src, dst, 40), Error);
  EXPECT_THROW(be->memory_pass(Backend::MemoryPass::write, src, dst, kBytes + 16), Error);
}

} // namespace
} // namespace ridgeline
