// The custom all-reduce (see ipc_allreduce.hpp): CUDA-IPC-mapped buffers, flag barriers in
// peer memory, one-shot, push, push-ll and two-shot kernels.
//
// Memory of every rank, one allocation mapped by every peer, n ranks:
//   pair 0: [slot 0] ... [slot n - 1][result]   pair 1: the same   (max_bytes each)
//   low-latency pair 0: [slot 0] ... [slot n - 1]   pair 1: the same   (max_bytes each)
//   [flags: kPhases x kMaxBlocks x kMaxRanks int][epochs: kMaxBlocks int][call, arrived: int]
// Call c uses pair c % 2 only. Slot s of rank r holds rank s's input: one-shot and two-shot copy
// their input into their own slot (s = r) and read the peers' own slots; push writes its input
// into slot r of every rank and then reads only its own memory. Two-shot puts its reduced slice
// into its result. push-ll uses the low-latency slots instead, where an element whose bits are
// all set is empty: the data is its own flag (as in NCCL's LL protocol), so there is no barrier;
// each rank empties its slots again as it reads them. The call counter, the epochs and the
// flag barriers are ipc_sync.cuh's.
//
// Why no barrier at the end of a call: a rank writes pair c % 2 (its own or a peer's) again
// only in call c + 2, after it finished call c + 1, which needs every peer to have started call
// c + 1 (its phase 0 signal, or its push-ll data), stream-ordered after its call c kernel and so
// after every read, and every emptying of a low-latency slot, that call made of pair c % 2.
// Block b of every rank copies and reads the same vectors, so the barrier of block b covers
// exactly what block b reads.
#include "collectives/ipc_allreduce.hpp"
#include "collectives/ipc_memory.hpp"
#include "collectives/ipc_sync.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

using ipc::barrier;
using ipc::begin_call;
using ipc::Call;
using ipc::end_call;

using ipc::kMaxBlocks;
using ipc::kMaxRanks;
using ipc::Peers;
// Up to one 16-byte vector a thread through 1 MiB (1 MiB / 16 B / kThreads = ipc::kMaxBlocks,
// 128 blocks): the link's bandwidth needs many stores and loads in flight; with at most 32
// blocks, push-ll added about 6.6 us per MiB from 1 to 4 MiB on 2 x H100 (about 160 GB/s).
constexpr int kThreads = 512;
constexpr int kPhases = 2; // start, between the two shots

struct Args {
  Peers peers;
  int rank, ranks;
  size_t max_bytes;  ///< size of each staging and result buffer
  size_t flags_off;  ///< offset of the flags
  size_t epochs_off; ///< offset of this rank's block epochs
  size_t calls_off;  ///< offset of this rank's call counter and arrival count
  size_t vectors;    ///< whole 16-byte vectors of the message
  size_t elements;   ///< elements of the message (the tail past the vectors is scalar)
  const void* send;
  void* recv;
  bool send_aligned; ///< send is 16-byte aligned: vector loads
  bool recv_aligned; ///< recv is 16-byte aligned: vector stores
};

template <typename T> struct Vec;
template <> struct Vec<float> { static constexpr int n = 4; };
template <> struct Vec<__nv_bfloat16> { static constexpr int n = 8; };
template <> struct Vec<__half> { static constexpr int n = 8; };

template <typename T> __device__ __forceinline__ float to_f(T v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return __half2float(v);
}
template <typename T> __device__ __forceinline__ T from_f(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return __float2half_rn(v);
}

/// acc += the elements of 16-byte vector `raw`.
template <typename T> __device__ __forceinline__ void add_vector(float* acc, const uint4& raw) {
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int j = 0; j < Vec<T>::n; ++j)
    acc[j] += to_f(e[j]);
}
/// The sums in `acc` as a vector of T, each rounded once.
template <typename T> __device__ __forceinline__ uint4 pack_vector(const float* acc) {
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int j = 0; j < Vec<T>::n; ++j)
    o[j] = from_f<T>(acc[j]);
  return out;
}

/// The sum over ranks s (in rank order, the same on every rank and in every algorithm) of
/// 16-byte vector `v` of the region `src(s)`.
template <typename T, typename Src>
__device__ __forceinline__ uint4 sum_vector(const Args& a, Src src, size_t v) {
  float acc[Vec<T>::n] = {};
  for (int s = 0; s < a.ranks; ++s)
    add_vector<T>(acc, reinterpret_cast<const uint4*>(src(s))[v]);
  return pack_vector<T>(acc);
}

// The low-latency slots: an element whose bits are all set is empty (a NaN in f32, bf16 and
// fp16); an input element with that pattern is sent as another NaN (sign bit clear), so a sum
// with it is still NaN.
template <typename T> using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
template <typename T> __device__ __forceinline__ Bits<T> ll_encode(Bits<T> x) {
  constexpr Bits<T> empty = static_cast<Bits<T>>(~Bits<T>{0});
  return x == empty ? static_cast<Bits<T>>(empty >> 1) : x;
}
template <typename T> __device__ __forceinline__ uint4 ll_encode_vector(uint4 x) {
  Bits<T>* e = reinterpret_cast<Bits<T>*>(&x);
#pragma unroll
  for (size_t j = 0; j < sizeof(uint4) / sizeof(Bits<T>); ++j)
    e[j] = ll_encode<T>(e[j]);
  return x;
}
template <typename T> __device__ __forceinline__ bool ll_empty_vector(const uint4& x) {
  const Bits<T>* e = reinterpret_cast<const Bits<T>*>(&x);
  bool empty = false;
#pragma unroll
  for (size_t j = 0; j < sizeof(uint4) / sizeof(Bits<T>); ++j)
    empty |= e[j] == static_cast<Bits<T>>(~Bits<T>{0});
  return empty;
}
/// A load that goes to memory every time (the peers' stores arrive while this thread polls).
__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

/// Vector v of recv = x (element by element where recv is not 16-byte aligned).
template <typename T>
__device__ __forceinline__ void store_vector(const Args& a, size_t v, uint4 x) {
  if (a.recv_aligned) {
    reinterpret_cast<uint4*>(a.recv)[v] = x;
  } else {
    const T* e = reinterpret_cast<const T*>(&x);
    T* out = static_cast<T*>(a.recv) + v * Vec<T>::n;
#pragma unroll
    for (int j = 0; j < Vec<T>::n; ++j)
      out[j] = e[j];
  }
}

/// Vector v of send (element by element where send is not 16-byte aligned).
template <typename T> __device__ __forceinline__ uint4 load_send(const Args& a, size_t v) {
  if (a.send_aligned) return reinterpret_cast<const uint4*>(a.send)[v];
  uint4 x;
  T* e = reinterpret_cast<T*>(&x);
  const T* in = static_cast<const T*>(a.send) + v * Vec<T>::n;
#pragma unroll
  for (int j = 0; j < Vec<T>::n; ++j)
    e[j] = in[j];
  return x;
}

/// The elements past the last whole vector belong to block 0: into the regions dst(d), d < n.
template <typename T, typename Dst> __device__ void copy_tail(const Args& a, Dst dst, int n) {
  if (blockIdx.x != 0) return;
  for (size_t i = a.vectors * Vec<T>::n + threadIdx.x; i < a.elements; i += blockDim.x) {
    const T x = static_cast<const T*>(a.send)[i];
    for (int d = 0; d < n; ++d)
      reinterpret_cast<T*>(dst(d))[i] = x;
  }
}
template <typename T, typename Src> __device__ void reduce_tail(const Args& a, Src src) {
  if (blockIdx.x != 0) return;
  for (size_t i = a.vectors * Vec<T>::n + threadIdx.x; i < a.elements; i += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < a.ranks; ++s)
      acc += to_f(reinterpret_cast<const T*>(src(s))[i]);
    static_cast<T*>(a.recv)[i] = from_f<T>(acc);
  }
}

/// Vectors [first, vectors) of send, stride apart, into the regions dst(d), d < n.
template <typename T, typename Dst>
__device__ __forceinline__ void copy_in(const Args& a, Dst dst, int n, size_t first,
                                        size_t stride) {
  for (size_t v = first; v < a.vectors; v += stride) {
    const uint4 x = load_send<T>(a, v);
    for (int d = 0; d < n; ++d)
      reinterpret_cast<uint4*>(dst(d))[v] = x;
  }
  copy_tail<T>(a, dst, n);
}

/// Offset of slot s (s == ranks: the result) of buffer pair `pair`.
__device__ __forceinline__ size_t slot(const Args& a, int pair, int s) {
  return (static_cast<size_t>(pair) * (a.ranks + 1) + s) * a.max_bytes;
}
/// Offset of low-latency slot s of pair `pair` (after both pairs of slots and results).
__device__ __forceinline__ size_t ll_slot(const Args& a, int pair, int s) {
  return (2 * static_cast<size_t>(a.ranks + 1) + static_cast<size_t>(pair) * a.ranks + s) *
         a.max_bytes;
}
// One-shot (Push false) and push (Push true). One-shot copies the input into this rank's own
// slot and, after the barrier, reads the peers' slots across the link. Push stores the input
// into this rank's slot of every rank, so the data crosses the link once, as stores, before the
// barrier, and the sum reads only this rank's memory.
template <typename T, bool Push>
__global__ void __launch_bounds__(kThreads) oneshot_kernel(Args a) {
  const Call c = begin_call(a);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  auto into = [&](int r) { return a.peers.base[Push ? r : a.rank] + slot(a, c.pair, a.rank); };
  auto from = [&](int s) { return a.peers.base[Push ? a.rank : s] + slot(a, c.pair, s); };
  copy_in<T>(a, into, Push ? a.ranks : 1, first, stride);
  barrier(a, 0, c.epoch); // every rank's block has put its share of the input in place
  for (size_t v = first; v < a.vectors; v += stride)
    store_vector<T>(a, v, sum_vector<T>(a, from, v));
  reduce_tail<T>(a, from);
  end_call(a, c.epoch);
}

// push with the data as its own flag: every element is stored into this rank's low-latency slot
// of every rank, and each rank polls its own slots until no element is empty, sums, and empties
// them for the call after next that uses this pair. No barrier: the message crosses the link
// once, and nothing waits for a separate flag to follow it.
template <typename T> __global__ void __launch_bounds__(kThreads) push_ll_kernel(Args a) {
  const Call c = begin_call(a);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  char* const own = a.peers.base[a.rank];
  const uint4 empty = make_uint4(~0u, ~0u, ~0u, ~0u);
  for (size_t v = first; v < a.vectors; v += stride) {
    const uint4 x = ll_encode_vector<T>(load_send<T>(a, v));
    for (int r = 0; r < a.ranks; ++r)
      reinterpret_cast<uint4*>(a.peers.base[r] + ll_slot(a, c.pair, a.rank))[v] = x;
  }
  const size_t tail = a.vectors * Vec<T>::n;
  if (blockIdx.x == 0)
    for (size_t i = tail + threadIdx.x; i < a.elements; i += blockDim.x) {
      Bits<T> x;
      memcpy(&x, static_cast<const T*>(a.send) + i, sizeof(x));
      x = ll_encode<T>(x);
      for (int r = 0; r < a.ranks; ++r)
        reinterpret_cast<Bits<T>*>(a.peers.base[r] + ll_slot(a, c.pair, a.rank))[i] = x;
    }
  for (size_t v = first; v < a.vectors; v += stride) {
    float acc[Vec<T>::n] = {};
    for (int s = 0; s < a.ranks; ++s) {
      uint4* p = reinterpret_cast<uint4*>(own + ll_slot(a, c.pair, s)) + v;
      uint4 y;
      do
        y = load_volatile(p);
      while (ll_empty_vector<T>(y));
      *p = empty;
      add_vector<T>(acc, y);
    }
    store_vector<T>(a, v, pack_vector<T>(acc));
  }
  if (blockIdx.x == 0)
    for (size_t i = tail + threadIdx.x; i < a.elements; i += blockDim.x) {
      float acc = 0.0f;
      for (int s = 0; s < a.ranks; ++s) {
        volatile Bits<T>* p = reinterpret_cast<Bits<T>*>(own + ll_slot(a, c.pair, s)) + i;
        Bits<T> y;
        do
          y = *p;
        while (y == static_cast<Bits<T>>(~Bits<T>{0}));
        *p = static_cast<Bits<T>>(~Bits<T>{0});
        T e;
        memcpy(&e, &y, sizeof(e));
        acc += to_f(e);
      }
      static_cast<T*>(a.recv)[i] = from_f<T>(acc);
    }
  end_call(a, c.epoch);
}

template <typename T> __global__ void __launch_bounds__(kThreads) twoshot_kernel(Args a) {
  const Call c = begin_call(a);
  char* const own_base = a.peers.base[a.rank];
  const size_t result = slot(a, c.pair, a.ranks);
  // Slice s: vectors [s * per, min((s + 1) * per, vectors)). Index i of every slice belongs to
  // the same (block, thread) on every rank, so a block's barrier covers what it reads next.
  const size_t per = (a.vectors + a.ranks - 1) / a.ranks;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  auto own = [&](int) { return own_base + slot(a, c.pair, a.rank); };
  auto theirs = [&](int s) { return a.peers.base[s] + slot(a, c.pair, s); };
  uint4* staging = reinterpret_cast<uint4*>(own(0));
  for (size_t i = first; i < per; i += stride)
    for (int s = 0; s < a.ranks; ++s) {
      const size_t v = static_cast<size_t>(s) * per + i;
      if (v < a.vectors) staging[v] = load_send<T>(a, v);
    }
  copy_tail<T>(a, own, 1);
  barrier(a, 0, c.epoch);
  for (size_t i = first; i < per; i += stride) {
    const size_t v = static_cast<size_t>(a.rank) * per + i;
    if (v < a.vectors) reinterpret_cast<uint4*>(own_base + result)[v] = sum_vector<T>(a, theirs, v);
  }
  reduce_tail<T>(a, theirs);
  barrier(a, 1, c.epoch); // every rank's reduced slice is in its result buffer
  for (size_t i = first; i < per; i += stride)
    for (int s = 0; s < a.ranks; ++s) {
      const size_t v = static_cast<size_t>(s) * per + i;
      if (v < a.vectors)
        store_vector<T>(a, v, reinterpret_cast<const uint4*>(a.peers.base[s] + result)[v]);
    }
  end_call(a, c.epoch);
}

class CudaIpcAllReduce final : public IpcAllReduce {
public:
  CudaIpcAllReduce(MPI_Comm comm, size_t max_bytes)
      : m_max_bytes((max_bytes + 255) / 256 * 256),
        m_flags_off(2 * (2 * std::min<size_t>(group_size(comm), kMaxRanks) + 1) * m_max_bytes),
        m_epochs_off(m_flags_off + sizeof(int) * kPhases * kMaxBlocks * kMaxRanks),
        m_calls_off(m_epochs_off + sizeof(int) * kMaxBlocks),
        m_memory(comm, m_calls_off + 2 * sizeof(int), "the custom all-reduce", kMaxRanks) {
    for (int r = 0; r < size(); ++r)
      m_peers.base[r] = m_memory.base(r);
    // Every low-latency slot starts empty (all bits set).
    const size_t ll = 2 * static_cast<size_t>(size() + 1) * m_max_bytes;
    RIDGELINE_CHECK(cudaMemset(m_memory.base(rank()) + ll, 0xff, m_flags_off - ll));
    RIDGELINE_CHECK(cudaDeviceSynchronize());
    // Nobody signals, or pushes, before every peer has mapped and prepared every buffer.
    RIDGELINE_CHECK(MPI_Barrier(comm));
  }

  int rank() const override { return m_memory.rank(); }
  int size() const override { return m_memory.size(); }
  size_t max_bytes() const override { return m_max_bytes; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, IpcAlgo algo,
                  Stream stream) override {
    const size_t elt = dtype_size(dtype);
    const size_t bytes = count * elt;
    RIDGELINE_REQUIRE(bytes <= m_max_bytes, "custom all-reduce: message larger than its buffers");
    if (count == 0) return;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    Args a{};
    a.peers = m_peers;
    a.rank = rank();
    a.ranks = size();
    a.max_bytes = m_max_bytes;
    a.flags_off = m_flags_off;
    a.epochs_off = m_epochs_off;
    a.calls_off = m_calls_off;
    a.vectors = bytes / 16;
    a.elements = count;
    a.send = send;
    a.recv = recv;
    a.send_aligned = reinterpret_cast<uintptr_t>(send) % 16 == 0;
    a.recv_aligned = reinterpret_cast<uintptr_t>(recv) % 16 == 0;
    // The grid is a function of the message alone, the same on every rank (see the epochs).
    const size_t work = algo == IpcAlgo::twoshot ? (a.vectors + size() - 1) / size() : a.vectors;
    const unsigned blocks =
        static_cast<unsigned>(std::clamp<size_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kThreads, 0, s>>>(a);
      RIDGELINE_CHECK(cudaGetLastError());
    };
    // The kernel of `algo` for element type T (a null T picks the type).
    auto run = [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      switch (algo) {
      case IpcAlgo::oneshot:
        return launch(oneshot_kernel<T, false>);
      case IpcAlgo::push:
        return launch(oneshot_kernel<T, true>);
      case IpcAlgo::push_ll:
        return launch(push_ll_kernel<T>);
      case IpcAlgo::twoshot:
        return launch(twoshot_kernel<T>);
      }
    };
    switch (dtype) {
    case DType::f32:
      run(static_cast<float*>(nullptr));
      break;
    case DType::bf16:
      run(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case DType::f16:
      run(static_cast<__half*>(nullptr));
      break;
    default:
      throw UsageError(std::string("the custom all-reduce sums f32, bf16 and fp16, not ") +
                       dtype_name(dtype));
    }
  }

private:
  static size_t group_size(MPI_Comm comm) {
    int n = 1;
    RIDGELINE_CHECK(MPI_Comm_size(comm, &n));
    return static_cast<size_t>(n);
  }

  size_t m_max_bytes = 0, m_flags_off = 0, m_epochs_off = 0, m_calls_off = 0;
  IpcPeerMemory m_memory;
  Peers m_peers{};
};

} // namespace

std::unique_ptr<IpcAllReduce> make_ipc_all_reduce(MPI_Comm comm, size_t max_bytes) {
  return std::make_unique<CudaIpcAllReduce>(comm, max_bytes);
}

} // namespace ridgeline
