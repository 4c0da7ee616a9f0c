#pragma once
// Warpgroup MMA (wgmma) plumbing shared by the sm_90a GEMM kernels: shared
// memory descriptors of K-major tiles with 128-byte rows in the 128-byte
// swizzle, the fences and the commit / wait of the async MMAs. Kernels that
// use them compile them only where HYLLM_WGMMA is defined (sm_90a); other
// architectures in the build get empty kernels.
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HYLLM_WGMMA 1
#endif

namespace hyllm::cuda::wgmma {

inline constexpr int kRowBytes = 128;  // one k tile row: 64 bf16 or 128 e4m3

// Descriptor of a K-major tile with 128-byte rows in the 128-byte swizzle
// (8-row atoms of 1024 bytes, base 1024-aligned). Advancing k by 32 bytes
// adds 2 (the address field counts 16-byte units).
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
  const uint64_t addr = smem_addr(p);
  return ((addr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Byte offset of 16-byte chunk c of row r in a 128-byte-swizzled tile.
__device__ __forceinline__ int swizzled(int r, int c) { return r * kRowBytes + ((c ^ (r & 7)) << 4); }

// Keeps the compiler from moving accumulator reads or writes across an
// async MMA's issue or wait.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#ifdef HYLLM_WGMMA
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes shared-memory writes of the generic proxy (cp.async) visible to the
// async proxy that wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif

}  // namespace hyllm::cuda::wgmma
