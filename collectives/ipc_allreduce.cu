// The custom all-reduce (see ipc_allreduce.hpp): CUDA-IPC-mapped staging buffers, flag barriers
// in peer memory, one-shot and two-shot kernels.
//
// Memory of every rank, one allocation mapped by every peer:
//   [staging 0][staging 1][result 0][result 1]: max_bytes each
//   [flags: kPhases x kMaxBlocks x kMaxRanks int][epochs: kMaxBlocks int][call, arrived: int]
// A call copies its input into staging and, for two-shot, its reduced slice into result, of
// the pair the call's parity picks: call c uses buffers c % 2. The call counter is this rank's
// own (every rank runs the same calls, so it is the same on every rank); the last block of a
// call to finish advances it, so the next kernel, stream-ordered after it, reads the new value,
// and a replayed graph alternates like eager calls do.
// Block b of rank r signals phase p of a call by storing the call's epoch into
// flags[p][b][r] of every rank, then waits until its own flags[p][b][s] hold that epoch for every
// rank s. The epoch is the block's own counter (epochs[b], read and advanced only by block b
// of this rank), the same on every rank because every rank runs the same calls with the same
// grid. Stores are st.release.sys after a block barrier, loads ld.acquire.sys before a block
// barrier: what any thread of a block wrote before it signals is visible to a peer's block once
// that block has seen the flag.
//
// Why no barrier at the end of a call: a rank writes buffer pair c % 2 again only in call c + 2,
// after its blocks passed phase 0 of call c + 1, which every peer's blocks signal only from
// call c + 1's kernel, stream-ordered after its call c kernel and so after every read that
// call made of this rank's pair. Block b of every rank copies and reads the same vectors, so the
// barrier of block b covers exactly what block b reads.
#include "collectives/ipc_allreduce.hpp"
#include "collectives/ipc_memory.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

constexpr int kMaxRanks = 8;
constexpr int kMaxBlocks = 32;
constexpr int kThreads = 512;
constexpr int kPhases = 2; // start, between the two shots

struct Peers {
  char* base[kMaxRanks]; ///< every rank's allocation, this rank's own included
};

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

__device__ __forceinline__ void store_release(int* p, int v) {
  asm volatile("st.release.sys.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/// Every rank's block blockIdx.x reaches phase `phase` of the call with epoch `epoch`.
__device__ void barrier(const Args& a, int phase, int epoch) {
  __syncthreads(); // everything this block wrote before the barrier is ordered before the signal
  if (threadIdx.x < a.ranks) {
    const size_t slot = (static_cast<size_t>(phase) * kMaxBlocks + blockIdx.x) * kMaxRanks;
    int* theirs = reinterpret_cast<int*>(a.peers.base[threadIdx.x] + a.flags_off) + slot + a.rank;
    const int* mine =
        reinterpret_cast<const int*>(a.peers.base[a.rank] + a.flags_off) + slot + threadIdx.x;
    store_release(theirs, epoch);
    while (load_acquire(mine) < epoch) {
    }
  }
  __syncthreads();
}

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

/// The sum over ranks (in rank order, the same on every rank) of 16-byte vector `v` of the
/// region at `offset` of every rank.
template <typename T>
__device__ __forceinline__ uint4 sum_vector(const Args& a, size_t offset, size_t v) {
  constexpr int n = Vec<T>::n;
  float acc[n];
#pragma unroll
  for (int j = 0; j < n; ++j)
    acc[j] = 0.0f;
  for (int r = 0; r < a.ranks; ++r) {
    const uint4 raw = reinterpret_cast<const uint4*>(a.peers.base[r] + offset)[v];
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int j = 0; j < n; ++j)
      acc[j] += to_f(e[j]);
  }
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int j = 0; j < n; ++j)
    o[j] = from_f<T>(acc[j]);
  return out;
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

/// The elements past the last whole vector belong to block 0.
template <typename T> __device__ void copy_tail(const Args& a, size_t staging) {
  if (blockIdx.x != 0) return;
  T* own = reinterpret_cast<T*>(a.peers.base[a.rank] + staging);
  for (size_t i = a.vectors * Vec<T>::n + threadIdx.x; i < a.elements; i += blockDim.x)
    own[i] = static_cast<const T*>(a.send)[i];
}
template <typename T> __device__ void reduce_tail(const Args& a, size_t staging) {
  if (blockIdx.x != 0) return;
  for (size_t i = a.vectors * Vec<T>::n + threadIdx.x; i < a.elements; i += blockDim.x) {
    float acc = 0.0f;
    for (int r = 0; r < a.ranks; ++r)
      acc += to_f(reinterpret_cast<const T*>(a.peers.base[r] + staging)[i]);
    static_cast<T*>(a.recv)[i] = from_f<T>(acc);
  }
}

/// The state a call starts from: this block's epoch, and the call's buffer pair (0 or 1).
struct Call {
  int epoch;
  int pair;
};
__device__ __forceinline__ Call begin_call(const Args& a) {
  // Read by every thread before the first barrier; advanced by end_call.
  const char* own = a.peers.base[a.rank];
  const int* calls = reinterpret_cast<const int*>(own + a.calls_off);
  return {reinterpret_cast<const int*>(own + a.epochs_off)[blockIdx.x] + 1, calls[0] & 1};
}
__device__ __forceinline__ void end_call(const Args& a, int epoch) {
  __syncthreads(); // every thread of the block has read the call counter
  if (threadIdx.x != 0) return;
  char* own = a.peers.base[a.rank];
  reinterpret_cast<int*>(own + a.epochs_off)[blockIdx.x] = epoch;
  int* calls = reinterpret_cast<int*>(own + a.calls_off);
  // The last block of the grid to get here advances the call counter: every block has read it.
  if (atomicAdd(&calls[1], 1) == static_cast<int>(gridDim.x) - 1) {
    calls[1] = 0;
    calls[0] += 1;
  }
}

template <typename T> __global__ void __launch_bounds__(kThreads) oneshot_kernel(Args a) {
  const Call c = begin_call(a);
  const size_t staging = static_cast<size_t>(c.pair) * a.max_bytes;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  uint4* own = reinterpret_cast<uint4*>(a.peers.base[a.rank] + staging);
  for (size_t v = first; v < a.vectors; v += stride)
    own[v] = load_send<T>(a, v);
  copy_tail<T>(a, staging);
  barrier(a, 0, c.epoch); // every rank's block has its share of the input in staging
  for (size_t v = first; v < a.vectors; v += stride)
    store_vector<T>(a, v, sum_vector<T>(a, staging, v));
  reduce_tail<T>(a, staging);
  end_call(a, c.epoch);
}

template <typename T> __global__ void __launch_bounds__(kThreads) twoshot_kernel(Args a) {
  const Call c = begin_call(a);
  const size_t staging = static_cast<size_t>(c.pair) * a.max_bytes;
  const size_t result = static_cast<size_t>(2 + c.pair) * a.max_bytes;
  // Slice s: vectors [s * per, min((s + 1) * per, vectors)). Index i of every slice belongs to
  // the same (block, thread) on every rank, so a block's barrier covers what it reads next.
  const size_t per = (a.vectors + a.ranks - 1) / a.ranks;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  uint4* own = reinterpret_cast<uint4*>(a.peers.base[a.rank] + staging);
  for (size_t i = first; i < per; i += stride)
    for (int s = 0; s < a.ranks; ++s) {
      const size_t v = static_cast<size_t>(s) * per + i;
      if (v < a.vectors) own[v] = load_send<T>(a, v);
    }
  copy_tail<T>(a, staging);
  barrier(a, 0, c.epoch);
  for (size_t i = first; i < per; i += stride) {
    const size_t v = static_cast<size_t>(a.rank) * per + i;
    if (v < a.vectors)
      reinterpret_cast<uint4*>(a.peers.base[a.rank] + result)[v] = sum_vector<T>(a, staging, v);
  }
  reduce_tail<T>(a, staging);
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
      : m_max_bytes((max_bytes + 255) / 256 * 256), m_flags_off(4 * m_max_bytes),
        m_epochs_off(m_flags_off + sizeof(int) * kPhases * kMaxBlocks * kMaxRanks),
        m_calls_off(m_epochs_off + sizeof(int) * kMaxBlocks),
        m_memory(comm, m_calls_off + 2 * sizeof(int), "the custom all-reduce", kMaxRanks) {
    for (int r = 0; r < size(); ++r)
      m_peers.base[r] = m_memory.base(r);
    // Nobody signals before every peer has mapped every buffer.
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
    const size_t work = algo == IpcAlgo::oneshot ? a.vectors : (a.vectors + size() - 1) / size();
    const unsigned blocks =
        static_cast<unsigned>(std::clamp<size_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kThreads, 0, s>>>(a);
      RIDGELINE_CHECK(cudaGetLastError());
    };
    const bool one = algo == IpcAlgo::oneshot;
    switch (dtype) {
    case DType::f32:
      launch(one ? oneshot_kernel<float> : twoshot_kernel<float>);
      break;
    case DType::bf16:
      launch(one ? oneshot_kernel<__nv_bfloat16> : twoshot_kernel<__nv_bfloat16>);
      break;
    case DType::f16:
      launch(one ? oneshot_kernel<__half> : twoshot_kernel<__half>);
      break;
    default:
      throw UsageError(std::string("the custom all-reduce sums f32, bf16 and fp16, not ") +
                       dtype_name(dtype));
    }
  }

private:
  size_t m_max_bytes = 0, m_flags_off = 0, m_epochs_off = 0, m_calls_off = 0;
  IpcPeerMemory m_memory;
  Peers m_peers{};
};

} // namespace

const char* ipc_algo_name(IpcAlgo algo) {
  return algo == IpcAlgo::oneshot ? "oneshot" : "twoshot";
}

std::unique_ptr<IpcAllReduce> make_ipc_all_reduce(MPI_Comm comm, size_t max_bytes) {
  return std::make_unique<CudaIpcAllReduce>(comm, max_bytes);
}

} // namespace ridgeline
