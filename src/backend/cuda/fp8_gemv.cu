// The FP8 linear for few rows (decode) on small or unaligned weights (large
// aligned ones stream through fp8_gemv_tma.cu): y[m, n] = sum_k x[m, k] W[n, k] with
// e4m3 operands on the tensor cores (mma.sync m16n8k32) and the scales of
// ops.h's linear, the weights streamed from memory once. A GEMM library tiles
// M in 64 or 128 rows, so at M = 1..32 it reads the weights through tiles that
// are almost empty (and cuBLASLt has no block-scaled algorithm below M = 4);
// here the weights are the mma's 16-row A operand and the tokens its 8-column
// B operand, so one warp instruction covers 16 weight rows and 8 tokens.
//
// Loads: each thread reads 16 contiguous bytes of a weight row and of a token
// row at the same K offset, straight into registers. A dot product does not
// depend on the order of its K terms, so bytes 0-3 and 4-7 feed the first
// mma's k = 4t.. and k = 4t+16.., bytes 8-15 the second's (t = the thread's
// index in its quad): both operands' fragments come from one load each.
//
// Work split: a block owns 16 weight rows; its warps take the K blocks of 128
// (the FP8 scale blocks) in turn, each keeping its next one or two blocks of
// weights in flight while it multiplies one, and add their partial sums in
// shared memory at the end. Products of one K block are summed by the tensor
// cores, then promoted into fp32 with the block's scales as ops.h defines:
// acc += (P * sx) * sw.
#include <algorithm>

#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/fp8_gemv_tma.h"
#include "backend/cuda/launch/fp8.h"

namespace hyllm::cuda {
namespace {

constexpr int kRowsPerBlock = 16;
constexpr int kTokensPerGridRow = kFp8GemvRowsPerPass;  // 4 mma n-tiles
// Warps per block at most: more for few tokens, whose registers allow it.
template <int NT>
constexpr int kMaxWarps = NT <= 2 ? 16 : 8;

// Weights are read once: keep them out of L1.
__device__ __forceinline__ uint4 load_stream16(const uint8_t* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// Bytes [b, b + 16) of row `row` of a [rows, K] byte matrix, zero outside it.
template <bool kAligned, bool kStream>
__device__ __forceinline__ uint4 load16(const uint8_t* base, int row, int rows, int64_t b, int64_t K) {
  uint4 r = make_uint4(0, 0, 0, 0);
  if (row >= rows) return r;
  const uint8_t* p = base + static_cast<int64_t>(row) * K + b;
  if constexpr (kAligned) {
    // K % 16 == 0: a 16-byte run lies wholly inside or outside the row.
    if (b < K) r = kStream ? load_stream16(p) : *reinterpret_cast<const uint4*>(p);
  } else {
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 16; ++i)
      if (b + i < K) w[i / 4] |= static_cast<uint32_t>(p[i]) << (8 * (i % 4));
    r = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return r;
}

// A thread's weights of one K block: rows g and g + 8, in two 64-byte halves.
struct WeightBlock {
  uint4 lo[2], hi[2];
};

template <bool kAligned>
__device__ __forceinline__ void load_weights(const Fp8GemvParams& p, int n0, int j, WeightBlock& o) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int64_t b = static_cast<int64_t>(j) * 128 + c * 64 + t * 16;
    o.lo[c] = load16<kAligned, true>(p.w, n0 + g, p.N, b, p.K);
    o.hi[c] = load16<kAligned, true>(p.w, n0 + g + 8, p.N, b, p.K);
  }
}

// acc += the products of K block j (scaled into fp32 for block scales). The
// tokens' bytes are read here, from L1 or L2: they are small and shared by
// every block of the grid.
template <int NT, bool kAligned>
__device__ __forceinline__ void multiply_block(const Fp8GemvParams& p, const WeightBlock& o, int n0, int m0, int j,
                                               int num_kb, float (&acc)[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float part[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) part[nt][i] = 0.0f;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int64_t b = static_cast<int64_t>(j) * 128 + c * 64 + t * 16;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint4 x = load16<kAligned, false>(p.x, m0 + nt * 8 + g, p.M, b, p.K);
      mma_k64(part[nt], o.lo[c], o.hi[c], x);
    }
  }
  if (p.block_scales) {
    const float sw = p.w_scale[(n0 / 128) * num_kb + j];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int m = m0 + nt * 8 + 2 * t;
      const float sx0 = m < p.M ? p.x_scale[static_cast<int64_t>(j) * p.x_scale_pitch() + m] : 0.0f;
      const float sx1 = m + 1 < p.M ? p.x_scale[static_cast<int64_t>(j) * p.x_scale_pitch() + m + 1] : 0.0f;
      acc[nt][0] += (part[nt][0] * sx0) * sw;
      acc[nt][1] += (part[nt][1] * sx1) * sw;
      acc[nt][2] += (part[nt][2] * sx0) * sw;
      acc[nt][3] += (part[nt][3] * sx1) * sw;
    }
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][i] += part[nt][i];
  }
}

template <int NT, bool kAligned>
__global__ void __launch_bounds__(kMaxWarps<NT> * 32) fp8_gemv_kernel(Fp8GemvParams p) {
  extern __shared__ float s_partial[];
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kRowsPerBlock;
  const int m0 = blockIdx.y * kTokensPerGridRow;
  const int num_kb = (p.K + 127) / 128;

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

  // The weights of the warp's next K blocks are in flight while it
  // multiplies one: two up to 24 tokens, one beyond (where the registers
  // would spill). Launched programmatically: the first of them, which no
  // kernel writes, are asked for while the kernel that writes x still runs
  // (on the narrow weights this kernel serves, with two K blocks per warp,
  // that is every weight byte); x, its scales and every write of this kernel
  // come after the wait.
  constexpr bool kTwoAhead = NT <= 3;
  WeightBlock cur{}, next{};
  if (warp < num_kb) load_weights<kAligned>(p, n0, warp, cur);
  if (kTwoAhead && warp + warps < num_kb) load_weights<kAligned>(p, n0, warp + warps, next);
  wait_for_prerequisite();
  allow_dependents();  // the next kernel (a norm) may take its weights meanwhile
  for (int j = warp; j < num_kb; j += warps) {
    if constexpr (kTwoAhead) {
      WeightBlock after{};
      if (j + 2 * warps < num_kb) load_weights<kAligned>(p, n0, j + 2 * warps, after);
      multiply_block<NT, kAligned>(p, cur, n0, m0, j, num_kb, acc);
      cur = next;
      next = after;
    } else {
      if (j + warps < num_kb) load_weights<kAligned>(p, n0, j + warps, next);
      multiply_block<NT, kAligned>(p, cur, n0, m0, j, num_kb, acc);
      cur = next;
    }
  }

  // The warps' partial sums, lane-minor so that the adds read distinct banks.
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) s_partial[((warp * NT + nt) * 4 + i) * 32 + lane] = acc[nt][i];
  __syncthreads();
  if (warp != 0) return;
  const float tensor_scale = p.block_scales ? 1.0f : p.x_scale[0] * p.w_scale[0];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = 0.0f;
      for (int w = 0; w < warps; ++w) v += s_partial[((w * NT + nt) * 4 + i) * 32 + lane];
      if (!p.block_scales) v *= tensor_scale;
      const int n = n0 + g + (i >= 2 ? 8 : 0);
      const int m = m0 + nt * 8 + 2 * t + (i & 1);
      if (n >= p.N || m >= p.M) continue;
      const int64_t o = static_cast<int64_t>(m) * p.N + n;
      if (p.out_f32)
        static_cast<float*>(p.out)[o] = v;
      else
        static_cast<uint16_t*>(p.out)[o] = f2bf(v);
    }
  }
}

template <int NT>
size_t smem_bytes(int warps) {
  return static_cast<size_t>(warps) * NT * 4 * 32 * sizeof(float);
}

template <int NT, bool kAligned>
void launch_nt(const Fp8GemvParams& p, int num_sms, cudaStream_t stream) {
  const int blocks_x = ceil_div(p.N, kRowsPerBlock);
  const int blocks_y = ceil_div(p.M, kTokensPerGridRow);
  const int num_kb = ceil_div(p.K, 128);
  // Warps of a block read consecutive K blocks of the same 16 rows at once.
  // Four per block stream best where there are many row tiles; with few,
  // more warps per block keep about 16 per SM in flight.
  const int want = ceil_div(static_cast<int64_t>(num_sms) * 16, static_cast<int64_t>(blocks_x) * blocks_y);
  const int warps = std::max(1, std::min({std::max(4, want), kMaxWarps<NT>, num_kb}));
  launch_maybe_pdl(fp8_gemv_kernel<NT, kAligned>, true, dim3(blocks_x, blocks_y), warps * 32, smem_bytes<NT>(warps),
                   stream, p);
}

template <int NT>
void launch_aligned(const Fp8GemvParams& p, int num_sms, cudaStream_t stream) {
  const bool aligned = p.K % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  if (aligned)
    launch_nt<NT, true>(p, num_sms, stream);
  else
    launch_nt<NT, false>(p, num_sms, stream);
}

}  // namespace

void launch_fp8_gemv(const Fp8GemvParams& p, int num_sms, cudaStream_t stream) {
  if (p.M == 0 || p.N == 0) return;
  if (p.use_tma && fp8_gemv_uses_tma(p.M, p.N, p.K) && launch_fp8_gemv_tma(p, stream))
    return;
  switch (ceil_div(std::min(p.M, kTokensPerGridRow), 8)) {
    case 1: return launch_aligned<1>(p, num_sms, stream);
    case 2: return launch_aligned<2>(p, num_sms, stream);
    case 3: return launch_aligned<3>(p, num_sms, stream);
    default: return launch_aligned<4>(p, num_sms, stream);
  }
}

}  // namespace hyllm::cuda
