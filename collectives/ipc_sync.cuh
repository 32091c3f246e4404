// The device side shared by the project's collectives over CUDA-IPC-mapped memory (the custom
// all-reduce, the all-to-all-v): the peers' base addresses, release stores and acquire loads at
// system scope, the per-block barrier of flags written into every peer's memory, and the
// per-block epochs and call counter every call starts from and advances.
//
// An argument struct A of a kernel that uses them holds: peers (Peers), rank and ranks (int),
// flags_off, epochs_off and calls_off (size_t offsets into every rank's allocation). Block b of
// rank r signals phase p of a call by storing the call's epoch into flags[p][b][r] of every
// rank, then waits until its own flags[p][b][s] hold that epoch for every rank s. The epoch is
// the block's own counter (epochs[b], read and advanced only by block b of this rank), the same
// on every rank because every rank runs the same calls with the same grid. Stores are
// st.release.sys after a block barrier, loads ld.acquire.sys before a block barrier: what any
// thread of a block wrote before it signals (in its own memory or a peer's) is visible to a
// peer's block once that block has seen the flag. The call counter is the rank's own; the last
// block of a call to finish advances it, so the next kernel, stream-ordered after it, reads the
// new value (its parity picks the call's buffer pair), and a replayed graph alternates as eager
// calls do.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ridgeline {
namespace ipc {

constexpr int kMaxRanks = 8;
constexpr int kMaxBlocks = 128;

struct Peers {
  char* base[kMaxRanks]; ///< every rank's allocation, this rank's own included
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
template <typename A> __device__ void barrier(const A& a, int phase, int epoch) {
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

/// The state a call starts from: this block's epoch, and the call's buffer pair (0 or 1).
struct Call {
  int epoch;
  int pair;
};
template <typename A> __device__ __forceinline__ Call begin_call(const A& a) {
  // Read by every thread before the first barrier; advanced by end_call.
  const char* own = a.peers.base[a.rank];
  const int* calls = reinterpret_cast<const int*>(own + a.calls_off);
  return {reinterpret_cast<const int*>(own + a.epochs_off)[blockIdx.x] + 1, calls[0] & 1};
}
template <typename A> __device__ __forceinline__ void end_call(const A& a, int epoch) {
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

} // namespace ipc
} // namespace ridgeline
