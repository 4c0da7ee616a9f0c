#pragma once
// Warpgroup MMA (wgmma) plumbing shared by the sm_90a GEMM kernels: the
// m64n128 bf16 and e4m3 MMAs, shared memory descriptors of K-major tiles with
// 128-byte rows in the 128-byte swizzle, the fences and the commit / wait of
// the async MMAs. Kernels that
// use them compile them only where HYLLM_WGMMA is defined (sm_90a); other
// architectures in the build get empty kernels.
#include <cstdint>

#include "backend/cuda/async_copy.cuh"
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

// Descriptor of an N-major B operand (bf16, the MMA's K dimension along the
// rows) held as 8-row atoms of 1024 bytes with 128-byte rows in the 128-byte
// swizzle, base 1024-aligned: each row holds 64 N elements of one k, the
// next 8 k start 1024 bytes on (stride offset), and N past 64 sits
// n_block_bytes on (leading offset).
__device__ __forceinline__ uint64_t smem_desc_n_major(const void* p, uint32_t n_block_bytes = 8192) {
  const uint64_t addr = smem_addr(p);
  return ((addr & 0x3FFFFu) >> 4) | (uint64_t{(n_block_bytes >> 4) & 0x3FFFu} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
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

template <int M, int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i) {
#pragma unroll
    for (int j = 0; j < N; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
  }
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

// A producer warp's cp.async copies into a ring of kStages stages, one commit
// group per step: each lane waits for step n's copies kLag steps later (so
// that several steps' copies are in flight), fences them for the MMAs' async
// proxy and arrives on the stage's full barrier (which counts the warp's 32
// lanes among its arrivals).
template <int kStages, int kLag>
struct LaggedCopyArrivals {
  static_assert(kLag >= 1 && kLag <= kStages - 1, "a stage's copies complete before the producer needs it back");
  uint64_t* full;
  // After step n's commit.
  __device__ __forceinline__ void step_committed(int n) const {
    if (n >= kLag) {
      cp_async_wait<kLag>();
      arrive(n - kLag);
    }
  }
  // After the last of n steps: the steps not yet arrived for.
  __device__ __forceinline__ void finish(int n) const {
    cp_async_wait<0>();
    for (int m = n > kLag ? n - kLag : 0; m < n; ++m) arrive(m);
  }
  __device__ __forceinline__ void arrive(int step) const {
    fence_proxy_async();
    mbar_arrive(&full[step % kStages]);
  }
};

// The fp32 accumulators of an m64n64 MMA (32) and of an m64n128 MMA (64):
// their PTX operands %0..%31 or %0..%63 and their constraints; the other
// operands follow them.
#define HYLLM_WGMMA_R0_31                                                             \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "            \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define HYLLM_WGMMA_D32 "{" HYLLM_WGMMA_R0_31 "}"
#define HYLLM_WGMMA_D64                                                                 \
  "{" HYLLM_WGMMA_R0_31 ", "                                                            \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "   \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define HYLLM_WGMMA_D32_OPERANDS(d)                                                                  \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),     \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),         \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),       \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),       \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define HYLLM_WGMMA_D64_OPERANDS(d)                                                                  \
  HYLLM_WGMMA_D32_OPERANDS(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),       \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),       \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),       \
      "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),       \
      "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// D[64 x 128] (+)= A[64 x 16] B[16 x 128], bf16 operands from shared memory
// (both K-major), fp32 accumulators; scale_d 0 overwrites D.
__device__ __forceinline__ void m64n128k16_bf16(float (&d)[64], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " HYLLM_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : HYLLM_WGMMA_D64_OPERANDS(d)
      : "l"(a), "l"(b), "r"(scale_d));
}

// D[64 x 64] (+)= A[64 x 16] B[16 x 64], bf16 operands from shared memory
// (both K-major), fp32 accumulators; scale_d 0 overwrites D.
__device__ __forceinline__ void m64n64k16_bf16(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " HYLLM_WGMMA_D32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
      : HYLLM_WGMMA_D32_OPERANDS(d)
      : "l"(a), "l"(b), "r"(scale_d));
}

// D[64 x 64] += A[64 x 16] B[16 x 64]: A from registers (the m16n8k16 A
// fragments of each warp's 16 rows), B N-major in shared memory
// (smem_desc_n_major), fp32 accumulators.
__device__ __forceinline__ void m64n64k16_bf16_rs_n_major(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " HYLLM_WGMMA_D32
      ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : HYLLM_WGMMA_D32_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// D[64 x 128] (+)= A[64 x 32] B[32 x 128], e4m3 operands from shared memory
// (both K-major), fp32 accumulators; scale_d 0 overwrites D.
__device__ __forceinline__ void m64n128k32_e4m3(float (&d)[64], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " HYLLM_WGMMA_D64 ", %64, %65, p, 1, 1;\n}\n"
      : HYLLM_WGMMA_D64_OPERANDS(d)
      : "l"(a), "l"(b), "r"(scale_d));
}

// D[64 x 8 NT] (+)= A[64 x 32] B[32 x 8 NT], e4m3 operands from shared
// memory (both K-major), fp32 accumulators (NT = 1..4: the token tiles of a
// decode linear); scale_d 0 overwrites D. Accumulator 4 nt + j of a thread
// is the m16n8 fragment's j of token tile nt.
template <int NT>
__device__ __forceinline__ void m64nk32_e4m3(float (&d)[NT * 4], uint64_t a, uint64_t b, int scale_d) {
  static_assert(NT >= 1 && NT <= 4, "token tiles");
  if constexpr (NT == 1) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(a), "l"(b), "r"(scale_d));
  }
  if constexpr (NT == 2) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b), "r"(scale_d));
  }
  if constexpr (NT == 3) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n24k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, %12, %13, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
        : "l"(a), "l"(b), "r"(scale_d));
  }
  if constexpr (NT == 4) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a), "l"(b), "r"(scale_d));
  }
}
#endif

}  // namespace hyllm::cuda::wgmma
