#pragma once
// Device helpers shared by the kernels: bf16 conversion with round to nearest
// even (what c10::BFloat16 and the CPU reference do), reductions and the
// tensor-core fragments. Included only by .cu files.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

namespace hyllm::cuda {

// Programmatic dependent launch: allow_dependents lets a kernel launched
// after this one with programmatic stream serialization start before this
// one ends; wait_for_prerequisite (in such a kernel) returns once the
// kernel before it has completed and its writes are visible. Both are no-ops
// without such a launch.
//
// The decode step chains such launches, so "the kernel before has
// completed" must imply "every earlier kernel has completed": every block
// of a programmatically launched kernel passes its wait in some thread, even
// a block with no work (a grid that ended without waiting could end before
// its own predecessor; a block ends only once all its threads have). Before its wait a kernel reads only what no kernel of the
// step writes (weights, the step's inputs, state from earlier steps that
// the kernels still running do not touch) and writes nothing.
__device__ __forceinline__ void allow_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
__device__ __forceinline__ void wait_for_prerequisite() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

// The "last block" handshake of a grid whose blocks publish global writes
// that the last block to finish then reads: returns true in every thread of
// that block, whose reads after the call see every block's writes before
// it. One thread a block makes an acquire-release add at GPU scope after a
// block barrier (the barrier orders the block's writes before the release;
// the acquire orders the last block's reads after every release), instead of
// a sequentially consistent fence in every thread, which also empties each
// SM's L1. The caller resets *counter to zero in the last block, for the
// next launch. Every thread of every block must call it.
__device__ __forceinline__ bool last_block_to_arrive(int32_t* counter, int32_t blocks) {
  __shared__ int32_t s_last;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    int32_t before;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(before) : "l"(counter) : "memory");
    s_last = before == blocks - 1 ? 1 : 0;
  }
  __syncthreads();
  return s_last != 0;
}

// Launches kernel(args...) so that, when `pdl`, it may begin before the
// stream's previous kernel completes (it must then wait_for_prerequisite
// before reading that kernel's outputs or writing anything another kernel
// before it may still read), in clusters of `cluster` blocks when that is
// more than one block. A launch error stays for the caller's check.
template <typename... Params, typename... Args>
void launch_ex(void (*kernel)(Params...), bool pdl, dim3 cluster, dim3 grid, int threads, size_t smem,
               cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
template <typename... Params, typename... Args>
void launch_maybe_pdl(void (*kernel)(Params...), bool pdl, dim3 grid, int threads, size_t smem, cudaStream_t stream,
                      Args&&... args) {
  launch_ex(kernel, pdl, dim3(1), grid, threads, smem, stream, std::forward<Args>(args)...);
}

__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
__device__ __forceinline__ uint16_t f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
__device__ __forceinline__ float round_bf(float f) { return bf2f(f2bf(f)); }
// fp16 bits of f (round to nearest even) and the float they hold (exact).
__device__ __forceinline__ uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// The 8 bf16 values of a 16-byte word as floats (exact), in element order.
__device__ __forceinline__ void unpack8(const uint4& r, float (&v)[8]) {
  const uint32_t words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    v[2 * q] = __uint_as_float(words[q] << 16);
    v[2 * q + 1] = __uint_as_float(words[q] & 0xffff0000u);
  }
}

// Packs 8 bf16-exact floats into a 16-byte word.
__device__ __forceinline__ uint4 pack8(const float (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) w[q] = __float_as_uint(v[2 * q]) >> 16 | (__float_as_uint(v[2 * q + 1]) & 0xffff0000u);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Dot product of 8 bf16 pairs (16 bytes each), in fp32, in element order.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = fmaf(__uint_as_float(av[i] << 16), __uint_as_float(bv[i] << 16), acc);
    acc = fmaf(__uint_as_float(av[i] & 0xffff0000u), __uint_as_float(bv[i] & 0xffff0000u), acc);
  }
  return acc;
}

// Element i of a float vector stored as f32 or bf16.
__device__ __forceinline__ float load_float(const void* p, bool is_f32, int64_t i) {
  return is_f32 ? static_cast<const float*>(p)[i] : bf2f(static_cast<const uint16_t*>(p)[i]);
}

// SiLU with the hardware exponential and an approximate division: every
// caller rounds the result to bf16 (or multiplies it into a value that is),
// so a few fp32 ulps from the CPU's IEEE form rarely move a bf16 output by
// one ulp, and the IEEE forms made the SwiGLU kernels and the MoE gate_up
// epilogues bound by instruction issue. For x below about -88, 1 + e^-x is
// infinite and the quotient is -0, SiLU's limit.
__device__ __forceinline__ float silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }
// The sigmoid below uses IEEE expf and division so that it matches the CPU
// reference to the last fp32 bit in most cases.
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// A float as an unsigned key of the same order, for integer reductions and
// sorts: non-negative floats above negative ones, -inf lowest, each sign
// ascending with the value. Exact for every non-NaN float but -0 < +0.
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_order_key(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread
// gets the result. `red` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = lane < nwarps ? red[lane] : 0.0f;
  return warp_sum(r);
}

// The sequence that owns token t < query_start_loc[num_seqs]: the last s
// with query_start_loc[s] <= t, whose range is then non-empty.
__device__ __forceinline__ int find_sequence(const int32_t* qsl, int num_seqs, int t) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (qsl[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy global -> shared; src_bytes 0 fills zeros.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
// One float from global to shared memory, through L1: small tables read by
// a whole block, such as scales.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// D = A B + D, m16n8k16 with fp32 accumulators and bf16 (mma_bf16) or fp16
// (mma_f16) operands, two a register, the lower k first. Lane = 4 g + t:
// A holds (g, 2t..2t+1), (g + 8, 2t..2t+1), (g, 2t+8..2t+9),
// (g + 8, 2t+8..2t+9); B holds (2t..2t+1, g), (2t+8..2t+9, g); D holds
// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
#define HYLLM_MMA_M16N8K16(type)                                                                      \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type                              \
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                      \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                      \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  HYLLM_MMA_M16N8K16("bf16");
}
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  HYLLM_MMA_M16N8K16("f16");
}
#undef HYLLM_MMA_M16N8K16

// Two floats as packed bf16 (lo in the low half), round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(f2bf(lo)) | (static_cast<uint32_t>(f2bf(hi)) << 16);
}

// A 4 x 4 transpose across the four lanes of a quad (lanes 4 i .. 4 i + 3,
// q = lane % 4): on return a[t] holds what lane t of the quad held in a[q].
// Two rounds of xor shuffles, each swapping one bit of the lane with the same
// bit of the slot; the slots are picked by selects, not indexed, so that the
// quad's lanes never diverge (an indexed pick compiles to branches that
// serialise the four lanes). Every lane of the warp must call it.
__device__ __forceinline__ void quad_transpose(uint32_t (&a)[4], int q) {
#pragma unroll
  for (int bit = 1; bit <= 2; bit <<= 1) {
    const bool high = (q & bit) != 0;
#pragma unroll
    for (int lo = 0; lo < 4; ++lo) {
      if (lo & bit) continue;
      // Slots lo and lo + bit: a lane keeps the one whose bit matches its
      // own and trades the other with its partner (lane ^ bit).
      const uint32_t give = high ? a[lo] : a[lo + bit];
      const uint32_t got = __shfl_xor_sync(0xffffffffu, give, bit);
      a[lo] = high ? got : a[lo];
      a[lo + bit] = high ? a[lo + bit] : got;
    }
  }
}

inline int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace hyllm::cuda
