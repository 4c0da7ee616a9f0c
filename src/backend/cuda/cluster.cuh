#pragma once
// Thread-block clusters (sm_90): a block's rank in its cluster, the cluster
// barrier, and loads and stores into another block's shared memory
// (distributed shared memory). Included only by .cu files.

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace hyllm::cuda {

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster; orders the shared-memory
// writes before it (local or remote) before the reads after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// A split cluster barrier: a block may store into another's shared memory
// only once that block has started, which the arrive at the start and the
// wait before the first remote store guarantee without stalling the block.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

// The address, in the cluster's shared window, of `local`'s offset in block `rank`.
__device__ __forceinline__ uint32_t remote_addr(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(local)), "r"(rank));
  return remote;
}
__device__ __forceinline__ void store_remote(float* local, uint32_t rank, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote_addr(local, rank)), "f"(v) : "memory");
}
__device__ __forceinline__ float load_remote(const float* local, uint32_t rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote_addr(local, rank)) : "memory");
  return v;
}
__device__ __forceinline__ float2 load_remote2(const float* local, uint32_t rank) {
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n"
               : "=f"(v.x), "=f"(v.y)
               : "r"(remote_addr(local, rank))
               : "memory");
  return v;
}

}  // namespace hyllm::cuda
