// The custom all-reduce (CUDA IPC, one-shot, push, push-ll and two-shot) under mpiexec -n 2 (or
// more): exact sums at odd counts and element offsets in f32, bf16 and fp16, in place and out of
// place; inside a CUDA graph replayed on changed inputs; calls in a row, each on its own inputs, of
// changing sizes and with the ranks put out of step, eager and from a graph of one call; 1000 calls
// in a row without a hang. Ranks may share one GPU (the flag barriers then wait for the other
// process's time slice: slow, still exact). Skips with fewer than two ranks or without a device.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/half_types.hpp"
#include "collectives/ipc_allreduce.hpp"
#include "core/dtype.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {
namespace {

constexpr size_t kMaxBytes = 8u << 20;

/// Element i of rank r: a small integer, so that every sum over two ranks is exact in bf16.
float value(size_t i, int r, int salt) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(r) * 3 + salt) % 17) - 8);
}

void encode_values(const float* v, size_t n, DType dtype, unsigned char* out) {
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::f32) {
      std::memcpy(out + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::bf16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  }
}

void decode_values(const unsigned char* raw, size_t n, DType dtype, float* v) {
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&v[i], raw + 4 * i, 4);
    } else {
      uint16_t h = 0;
      std::memcpy(&h, raw + 2 * i, 2);
      v[i] = dtype == DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
    }
  }
}

class IpcAllReduceCuda : public ::testing::Test {
protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    const int devices = cuda_device_count();
    if (m_size < 2 || devices < 1) GTEST_SKIP() << "needs 2 ranks and a device";
    m_backend = make_cuda_backend(m_rank % devices, DType::bf16);
    m_ar = make_ipc_all_reduce(MPI_COMM_WORLD, kMaxBytes);
  }
  void TearDown() override {
    // The graphs (owned by the backend) hold the kernels that read the mapped buffers.
    m_backend.reset();
    m_ar.reset();
  }

  /// Raw `dtype` encoding of this rank's values [0, count).
  std::vector<unsigned char> encode(size_t count, DType dtype, int salt) const {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i)
      v[i] = value(i, m_rank, salt);
    std::vector<unsigned char> raw(count * dtype_size(dtype));
    encode_values(v.data(), count, dtype, raw.data());
    return raw;
  }
  std::vector<float> expected(size_t count, int salt) const {
    std::vector<float> e(count, 0.0f);
    for (int r = 0; r < m_size; ++r)
      for (size_t i = 0; i < count; ++i)
        e[i] += value(i, r, salt);
    return e;
  }
  /// Elements of `got` (raw dtype) that differ from `want`.
  static int64_t wrong(const std::vector<unsigned char>& got, DType dtype,
                       const std::vector<float>& want) {
    std::vector<float> v(want.size());
    decode_values(got.data(), want.size(), dtype, v.data());
    int64_t n = 0;
    for (size_t i = 0; i < want.size(); ++i)
      n += v[i] != want[i];
    return n;
  }
  void sync() { m_backend->synchronize(); }

  int m_rank = 0;
  int m_size = 1;
  std::unique_ptr<Backend> m_backend;
  std::unique_ptr<IpcAllReduce> m_ar;
};

TEST_F(IpcAllReduceCuda, ExactAtOddCountsAndOffsets) {
  for (IpcAlgo algo : {IpcAlgo::oneshot, IpcAlgo::push, IpcAlgo::push_ll, IpcAlgo::twoshot})
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
      for (size_t count : {size_t{1}, size_t{7}, size_t{8}, size_t{4099}, size_t{1000003}})
        for (size_t offset : {size_t{0}, size_t{1}, size_t{3}})
          for (bool in_place : {false, true}) {
            const size_t elt = dtype_size(dtype);
            if ((count + offset) * elt > kMaxBytes) continue;
            const std::string what = std::string(ipc_algo_name(algo)) + " " + dtype_name(dtype) +
                                     " count " + std::to_string(count) + " offset " +
                                     std::to_string(offset) + (in_place ? " in place" : "");
            Buffer send = m_backend->allocate_bytes((count + offset) * elt);
            Buffer recv = m_backend->allocate_bytes((count + offset) * elt);
            char* s = static_cast<char*>(send.data()) + offset * elt;
            char* r = in_place ? s : static_cast<char*>(recv.data()) + offset * elt;
            const std::vector<unsigned char> raw = encode(count, dtype, 0);
            m_backend->upload(s, raw.data(), raw.size());
            m_ar->all_reduce(s, r, count, dtype, algo, m_backend->stream(Lane::comm));
            sync();
            std::vector<unsigned char> got(raw.size());
            m_backend->download(got.data(), r, got.size());
            EXPECT_EQ(wrong(got, dtype, expected(count, 0)), 0) << what;
          }
}

TEST_F(IpcAllReduceCuda, CapturedCallsReplayOnNewInputs) {
  const size_t count = 5003;
  const DType dtype = DType::bf16;
  const size_t bytes = count * dtype_size(dtype);
  Buffer send = m_backend->allocate_bytes(bytes);
  Buffer mid = m_backend->allocate_bytes(bytes);
  Buffer out = m_backend->allocate_bytes(bytes);
  Buffer last = m_backend->allocate_bytes(bytes);
  // One graph of every algorithm in a chain: a one-shot into `mid` (the sum), a two-shot of
  // `mid` into `out` (n * the sum), a push of `out` into `mid` (n^2 * the sum), then a push-ll
  // of `mid` into `last` (n^3 * the sum). Small integers times powers of two: exact in bf16.
  m_backend->capture_begin(Lane::comm);
  Stream s = m_backend->stream(Lane::comm);
  m_ar->all_reduce(send.data(), mid.data(), count, dtype, IpcAlgo::oneshot, s);
  m_ar->all_reduce(mid.data(), out.data(), count, dtype, IpcAlgo::twoshot, s);
  m_ar->all_reduce(out.data(), mid.data(), count, dtype, IpcAlgo::push, s);
  m_ar->all_reduce(mid.data(), last.data(), count, dtype, IpcAlgo::push_ll, s);
  const int graph = m_backend->capture_end(Lane::comm);
  for (int salt : {0, 5, 11}) {
    const std::vector<unsigned char> raw = encode(count, dtype, salt);
    m_backend->upload(send.data(), raw.data(), raw.size());
    m_backend->replay(graph, Lane::comm);
    sync();
    std::vector<float> want = expected(count, salt);
    const float n = static_cast<float>(m_size);
    for (float& w : want)
      w *= n * n;
    std::vector<unsigned char> got(bytes);
    m_backend->download(got.data(), mid.data(), bytes);
    EXPECT_EQ(wrong(got, dtype, want), 0) << "one-shot, two-shot, push; salt " << salt;
    for (float& w : want)
      w *= n;
    m_backend->download(got.data(), last.data(), bytes);
    EXPECT_EQ(wrong(got, dtype, want), 0) << "then push-ll; salt " << salt;
  }
}

// push-ll's slots are empty while every bit of an element is set; an input element with that
// pattern (a NaN) must arrive as a NaN, not be waited for, and leave the slots empty for the
// next call.
TEST_F(IpcAllReduceCuda, PushLlSendsTheEmptyPatternAsNaN) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const size_t count = 4103; // whole vectors and a tail
    const size_t elt = dtype_size(dtype);
    Buffer send = m_backend->allocate_bytes(count * elt);
    Buffer recv = m_backend->allocate_bytes(count * elt);
    std::vector<unsigned char> raw = encode(count, dtype, 1);
    // Rank 0 sends the empty pattern at the first element, one inside a vector and the last.
    const size_t marked[] = {0, 13, count - 1};
    if (m_rank == 0)
      for (size_t i : marked)
        std::memset(raw.data() + i * elt, 0xff, elt);
    m_backend->upload(send.data(), raw.data(), raw.size());
    Stream s = m_backend->stream(Lane::comm);
    m_ar->all_reduce(send.data(), recv.data(), count, dtype, IpcAlgo::push_ll, s);
    sync();
    std::vector<unsigned char> got(count * elt);
    m_backend->download(got.data(), recv.data(), got.size());
    std::vector<float> v(count);
    decode_values(got.data(), count, dtype, v.data());
    const std::vector<float> want = expected(count, 1);
    int64_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      const bool nan = std::find(std::begin(marked), std::end(marked), i) != std::end(marked);
      bad += nan ? !std::isnan(v[i]) : v[i] != want[i];
    }
    EXPECT_EQ(bad, 0) << dtype_name(dtype);
    // The slots were emptied: the next calls (both buffer pairs) are exact.
    const std::vector<unsigned char> clean = encode(count, dtype, 2);
    m_backend->upload(send.data(), clean.data(), clean.size());
    for (int call = 0; call < 2; ++call) {
      m_ar->all_reduce(send.data(), recv.data(), count, dtype, IpcAlgo::push_ll, s);
      sync();
      m_backend->download(got.data(), recv.data(), got.size());
      EXPECT_EQ(wrong(got, dtype, expected(count, 2)), 0) << dtype_name(dtype) << " call " << call;
    }
  }
}

// The calls reuse their staging and result buffers every other call, with no barrier at a
// call's end: here every call has inputs of its own, the sizes change (and with them the grid),
// and before each call one rank is held back by a 64 MiB copy, so that the other runs ahead
// into the next call while it still reads. A graph of one call is replayed between eager
// calls, so the buffer pair alternates across graph and eager calls alike.
TEST_F(IpcAllReduceCuda, CallsInARowOnTheirOwnInputs) {
  const DType dtype = DType::bf16;
  const size_t elt = dtype_size(dtype);
  const size_t counts[] = {4096, 70001, 300000, 5000};
  const int calls = 24;
  Stream s = m_backend->stream(Lane::comm);
  const size_t delay_bytes = 64u << 20;
  Buffer delay_src = m_backend->allocate_bytes(delay_bytes);
  Buffer delay_dst = m_backend->allocate_bytes(delay_bytes);

  // The graph: one one-shot of `g_send` into `g_out` (5000 elements, 10000 bytes).
  const size_t g_count = 5000, g_bytes = g_count * elt;
  Buffer g_send = m_backend->allocate_bytes(g_bytes);
  Buffer g_out = m_backend->allocate_bytes(g_bytes);
  m_backend->capture_begin(Lane::comm);
  m_ar->all_reduce(g_send.data(), g_out.data(), g_count, dtype, IpcAlgo::oneshot, s);
  const int graph = m_backend->capture_end(Lane::comm);

  std::vector<Buffer> sends, recvs, g_inputs, g_results;
  for (int i = 0; i < calls; ++i) {
    const size_t count = counts[i % 4];
    sends.push_back(m_backend->allocate_bytes(count * elt));
    recvs.push_back(m_backend->allocate_bytes(count * elt));
    const std::vector<unsigned char> raw = encode(count, dtype, i);
    m_backend->upload(sends.back().data(), raw.data(), raw.size());
    g_inputs.push_back(m_backend->allocate_bytes(g_bytes));
    g_results.push_back(m_backend->allocate_bytes(g_bytes));
    const std::vector<unsigned char> g_raw = encode(g_count, dtype, 100 + i);
    m_backend->upload(g_inputs.back().data(), g_raw.data(), g_raw.size());
  }
  sync();
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < calls; ++i) {
    if (i % m_size == m_rank)
      m_backend->memory_pass(Backend::MemoryPass::copy, delay_src, delay_dst, delay_bytes,
                             Lane::comm);
    m_ar->all_reduce(sends[i].data(), recvs[i].data(), counts[i % 4], dtype,
                     static_cast<IpcAlgo>(i % 4), s);
    m_backend->memory_pass(Backend::MemoryPass::copy, g_inputs[i], g_send, g_bytes, Lane::comm);
    m_backend->replay(graph, Lane::comm);
    m_backend->memory_pass(Backend::MemoryPass::copy, g_out, g_results[i], g_bytes, Lane::comm);
  }
  sync();
  for (int i = 0; i < calls; ++i) {
    const size_t count = counts[i % 4];
    std::vector<unsigned char> got(count * elt);
    m_backend->download(got.data(), recvs[i].data(), got.size());
    EXPECT_EQ(wrong(got, dtype, expected(count, i)), 0) << "eager call " << i;
    std::vector<unsigned char> g_got(g_bytes);
    m_backend->download(g_got.data(), g_results[i].data(), g_bytes);
    EXPECT_EQ(wrong(g_got, dtype, expected(g_count, 100 + i)), 0) << "graph replay " << i;
  }
}

TEST_F(IpcAllReduceCuda, ThousandCallsWithoutAHang) {
  const size_t count = 4096; // 8 KiB of bf16
  const DType dtype = DType::bf16;
  const size_t bytes = count * dtype_size(dtype);
  Buffer a = m_backend->allocate_bytes(bytes);
  Buffer b = m_backend->allocate_bytes(bytes);
  const std::vector<unsigned char> raw = encode(count, dtype, 3);
  m_backend->upload(a.data(), raw.data(), raw.size());
  Stream s = m_backend->stream(Lane::comm);
  for (int i = 0; i < 1000; ++i)
    m_ar->all_reduce(a.data(), b.data(), count, dtype, static_cast<IpcAlgo>(i % 4), s);
  sync();
  std::vector<unsigned char> got(bytes);
  m_backend->download(got.data(), b.data(), bytes);
  EXPECT_EQ(wrong(got, dtype, expected(count, 3)), 0);
}

TEST_F(IpcAllReduceCuda, RefusesWhatItCannotDo) {
  Buffer a = m_backend->allocate_bytes(16);
  Stream s = m_backend->stream(Lane::comm);
  EXPECT_THROW(m_ar->all_reduce(a.data(), a.data(), 4, DType::i32, IpcAlgo::oneshot, s),
               UsageError);
  EXPECT_THROW(m_ar->all_reduce(a.data(), a.data(), kMaxBytes, DType::f32, IpcAlgo::oneshot, s),
               Error);
}

} // namespace
} // namespace ridgeline
