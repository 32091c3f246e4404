// PTX wrappers for Hopper (sm_90a): warpgroup MMA (wgmma) with shared-memory matrix
// descriptors, tensor-memory-accelerator (TMA) loads completing on mbarriers, and the
// warpgroup register reallocation of warp-specialised kernels. Every body compiles to nothing
// but a trap on other targets, so a translation unit built for several architectures can call
// them from code that only runs on sm_90a.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define RIDGELINE_SM90A_DEVICE 1
#else
#define RIDGELINE_SM90A_DEVICE 0
#endif

namespace ridgeline {
namespace cuda {
namespace hopper {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// The first 1024-byte aligned shared-memory address at or after `p` (128-byte swizzled tiles
/// need their 8-row atoms 1024-byte aligned); dynamic shared memory needs 1 KiB of slack for it.
__device__ __forceinline__ unsigned char* align_1024(unsigned char* p) {
  const uint32_t a = smem_addr(p);
  return p + (((a + 1023u) & ~1023u) - a);
}

// --- mbarriers -------------------------------------------------------------------------------

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals));
#endif
}

/// Makes the initialised barriers visible to the async proxy (TMA) and the other threads.
__device__ __forceinline__ void fence_barrier_init() {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// One arrival that also announces `bytes` of TMA transactions the phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

/// Waits until the phase of parity `parity` has completed (a fresh barrier counts its
/// "previous" phase, parity 1, as complete).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#if RIDGELINE_SM90A_DEVICE
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (done == 0);
#endif
}

// --- named barriers -------------------------------------------------------------------------

/// Waits at named barrier `id` (1-15; 0 is __syncthreads) until `threads` threads, this one
/// included, have arrived or synced there.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Counts this thread at named barrier `id` without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// --- TMA -------------------------------------------------------------------------------------

/// Loads the box at coordinates (c0, c1, c2) of a 3-D tensor map into shared memory at `dst`;
/// completion is counted in bytes on `bar`. Out-of-range elements are written as zeros.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, uint32_t bar, int c0,
                                            int c1, int c2) {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
#endif
}

/// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory into
/// shared memory at `dst`; completion is counted in bytes on `bar`.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar) {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
               "[%3];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
               : "memory");
#endif
}

/// Orders this thread's ordinary shared-memory stores before later reads of that memory by the
/// async proxy (wgmma operands, TMA stores).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// Warms the tensor map's descriptor into the cache before its first use.
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// --- register reallocation -------------------------------------------------------------------

template <int kRegs> __device__ __forceinline__ void warpgroup_registers_dec() {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs> __device__ __forceinline__ void warpgroup_registers_inc() {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// --- wgmma -----------------------------------------------------------------------------------

/// A shared-memory matrix descriptor for the 128-byte swizzle: tiles stored as 8-row atoms of
/// 128-byte rows whose 16-byte chunks are XOR-ed with (row % 8), atoms 1024-byte aligned (the
/// layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B). `lbo` and `sbo` are the leading and
/// stride byte offsets: for a K-major operand sbo steps 8 rows and lbo is unused; for an
/// MN-major one lbo steps 64 MN elements and sbo 8 K rows.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/// Waits until at most `kPending` committed wgmma groups are still in flight.
template <int kPending> __device__ __forceinline__ void wgmma_wait() {
#if RIDGELINE_SM90A_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

/// Keeps the compiler from moving accesses of registers an in-flight wgmma owns across the
/// wait that hands them back.
template <int kRows> __device__ __forceinline__ void fence_registers(float (&r)[kRows][4]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i)
    asm volatile("" : "+f"(r[i][0]), "+f"(r[i][1]), "+f"(r[i][2]), "+f"(r[i][3])::"memory");
}
template <int kRows> __device__ __forceinline__ void fence_registers(uint32_t (&r)[kRows][4]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i)
    asm volatile("" : "+r"(r[i][0]), "+r"(r[i][1]), "+r"(r[i][2]), "+r"(r[i][3])::"memory");
}

#define RIDGELINE_WGMMA_D4(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define RIDGELINE_WGMMA_D64                                                                        \
  RIDGELINE_WGMMA_D4(0), RIDGELINE_WGMMA_D4(1), RIDGELINE_WGMMA_D4(2), RIDGELINE_WGMMA_D4(3),      \
      RIDGELINE_WGMMA_D4(4), RIDGELINE_WGMMA_D4(5), RIDGELINE_WGMMA_D4(6), RIDGELINE_WGMMA_D4(7),  \
      RIDGELINE_WGMMA_D4(8), RIDGELINE_WGMMA_D4(9), RIDGELINE_WGMMA_D4(10),                        \
      RIDGELINE_WGMMA_D4(11), RIDGELINE_WGMMA_D4(12), RIDGELINE_WGMMA_D4(13),                      \
      RIDGELINE_WGMMA_D4(14), RIDGELINE_WGMMA_D4(15)
#define RIDGELINE_WGMMA_REGS64                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "     \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "     \
  "%56, %57, %58, %59, %60, %61, %62, %63}"

/// D (+)= A B^T on one warpgroup, m64n128k16, fp32 accumulators in the m16n8 fragment order
/// (d[j] is the n8 tile j of this warp's 16 rows). A (64 x 16) and B (128 x 16) come from
/// shared memory through descriptors, both K-major; `accumulate` false overwrites D.
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[16][4], uint64_t a_desc,
                                                    uint64_t b_desc, bool accumulate) {
#if RIDGELINE_SM90A_DEVICE
  const int scale_d = accumulate ? 1 : 0;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " RIDGELINE_WGMMA_REGS64
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : RIDGELINE_WGMMA_D64
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  } else {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " RIDGELINE_WGMMA_REGS64
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : RIDGELINE_WGMMA_D64
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
#endif
}

/// D += A B on one warpgroup, m64n128k16: A (64 x 16) from registers in the m16n8k16 A-fragment
/// order of this warp's 16 rows, B (16 x 128) from shared memory stored MN-major (the 128
/// columns contiguous per K row: a [keys][D] V tile read as V, not V^T).
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16_rs_mn(float (&d)[16][4], const uint32_t (&a)[4],
                                                       uint64_t b_desc) {
#if RIDGELINE_SM90A_DEVICE
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " RIDGELINE_WGMMA_REGS64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : RIDGELINE_WGMMA_D64
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
  } else {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " RIDGELINE_WGMMA_REGS64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : RIDGELINE_WGMMA_D64
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
  }
#endif
}

#define RIDGELINE_WGMMA_D32                                                                        \
  RIDGELINE_WGMMA_D4(0), RIDGELINE_WGMMA_D4(1), RIDGELINE_WGMMA_D4(2), RIDGELINE_WGMMA_D4(3),      \
      RIDGELINE_WGMMA_D4(4), RIDGELINE_WGMMA_D4(5), RIDGELINE_WGMMA_D4(6), RIDGELINE_WGMMA_D4(7)
#define RIDGELINE_WGMMA_REGS32                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

/// D (+)= A B on one warpgroup, m64n64k16, both operands from shared memory: A (64 x 16) K-major
/// or, with kTransA, MN-major (its 64 rows contiguous per K row); B (16 x 64) K-major (stored as
/// 64 rows of 16) or, with kTransB, MN-major. `accumulate` false overwrites D.
template <typename T, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[8][4], uint64_t a_desc,
                                                   uint64_t b_desc, bool accumulate) {
#if RIDGELINE_SM90A_DEVICE
  const int scale_d = accumulate ? 1 : 0;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " RIDGELINE_WGMMA_REGS32
                 ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                 : RIDGELINE_WGMMA_D32
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(kTransA), "n"(kTransB));
  } else {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " RIDGELINE_WGMMA_REGS32
                 ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                 : RIDGELINE_WGMMA_D32
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(kTransA), "n"(kTransB));
  }
#endif
}

#undef RIDGELINE_WGMMA_D32
#undef RIDGELINE_WGMMA_REGS32
#undef RIDGELINE_WGMMA_D4
#undef RIDGELINE_WGMMA_D64
#undef RIDGELINE_WGMMA_REGS64

} // namespace hopper
} // namespace cuda
} // namespace ridgeline
