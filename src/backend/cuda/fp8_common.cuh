#pragma once
// Device side of FP8 activation quantisation (ops.h ActQuantMode), shared by
// every kernel that writes an Fp8Activation: the same arithmetic as the CPU
// reference (cpu_quantize.cpp), so fused and unfused paths agree bit for bit
// (the division by a group scale as Fp8GroupDivisor, with the same codes).

#include <cuda_fp8.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/fp8.h"
#include "tensor/fp8_group_divisor.h"

namespace hyllm::cuda {

inline constexpr int kFp8Group = 128;

// D[16 x 8] += A[16 x 32] B[32 x 8], e4m3 operands, fp32 accumulators.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One 64-wide k window: lane (g, q) holds codes [16q, 16q + 16) of A rows g
// (lo) and g + 8 (hi) and of B column g; A and B see the same permutation
// (a dot product does not depend on the order of its k terms).
__device__ __forceinline__ void mma_k64(float (&d)[4], const uint4& lo, const uint4& hi, const uint4& b) {
  mma_e4m3(d, lo.x, hi.x, lo.y, hi.y, b.x, b.y);
  mma_e4m3(d, lo.z, hi.z, lo.w, hi.w, b.z, b.w);
}

// e4m3 code of clamp(v, -448, 448), round to nearest even.
__device__ __forceinline__ uint8_t e4m3_code(float v) {
  v = fminf(fmaxf(v, -448.0f), 448.0f);
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Quantises the 128-column groups whose values the lanes of a warp hold in
// registers: each lane holds N consecutive bf16 values (Fp8GroupDivisor's
// precondition), columns k .. k+N-1 of row `row`
// (N = 4 or 8, k a multiple of N; zeros at and beyond o.cols), and the 128/N
// lanes holding one group are consecutive and start at a multiple of 128/N
// within the warp. Every lane of the warp calls it (the group maximum is a
// shuffle reduction); lanes with k >= o.cols write nothing.
template <int N>
__device__ __forceinline__ void quantize_group_regs(const float (&v)[N], int k, int row, const Fp8Out& o) {
  static_assert(N == 4 || N == 8, "a lane holds 4 or 8 columns");
  float s = 0.0f;
  if (o.group_scales) {
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) amax = fmaxf(amax, fabsf(v[i]));
#pragma unroll
    for (int off = kFp8Group / N / 2; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    s = __fdiv_rn(fmaxf(amax, 1e-10f), 448.0f);
    if (k % kFp8Group == 0 && k < o.cols) o.scale[static_cast<int64_t>(k / kFp8Group) * o.rows + row] = s;
  } else {
    s = *o.static_scale;
  }
  if (k >= o.cols) return;
  // A group scale divides as Fp8GroupDivisor does; a static one (any float)
  // by an IEEE division.
  const Fp8GroupDivisor divisor(s);
  auto quotient = [&](float x) { return o.group_scales ? divisor.divide(x) : __fdiv_rn(x, s); };
  uint8_t* dst = o.q + static_cast<int64_t>(row) * o.cols + k;
  if (k + N <= o.cols && (reinterpret_cast<uintptr_t>(dst) & (N - 1)) == 0) {
    uint32_t packed[N / 4] = {};
#pragma unroll
    for (int i = 0; i < N; ++i) packed[i / 4] |= static_cast<uint32_t>(e4m3_code(quotient(v[i]))) << (8 * (i % 4));
    if constexpr (N == 4) {
      *reinterpret_cast<uint32_t*>(dst) = packed[0];
    } else {
      *reinterpret_cast<uint2*>(dst) = make_uint2(packed[0], packed[1]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (k + i < o.cols) dst[i] = e4m3_code(quotient(v[i]));
  }
}

// Loads N (4 or 8) bf16 values vals[k .. k+N-1] as floats (zeros at and
// beyond n), with one 8- or 16-byte load when they are in range and aligned.
template <int N>
__device__ __forceinline__ void load_bf16(const uint16_t* vals, int k, int n, float (&v)[N]) {
  static_assert(N == 4 || N == 8, "4 or 8 values");
  if (k + N <= n && (reinterpret_cast<uintptr_t>(vals + k) & (2 * N - 1)) == 0) {
    uint32_t raw[N / 2];
    if constexpr (N == 8) {
      const uint4 r = *reinterpret_cast<const uint4*>(vals + k);
      raw[0] = r.x, raw[1] = r.y, raw[2] = r.z, raw[3] = r.w;
    } else {
      const uint2 r = *reinterpret_cast<const uint2*>(vals + k);
      raw[0] = r.x, raw[1] = r.y;
    }
#pragma unroll
    for (int q = 0; q < N / 2; ++q) {
      v[2 * q] = __uint_as_float(raw[q] << 16);
      v[2 * q + 1] = __uint_as_float(raw[q] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = k + i < n ? bf2f(vals[k + i]) : 0.0f;
  }
}

// Stores N (4 or 8) floats, already bf16-exact, as bf16 at vals[k .. k+N-1]
// (those below n).
template <int N>
__device__ __forceinline__ void store_bf16(uint16_t* vals, int k, int n, const float (&v)[N]) {
  static_assert(N == 4 || N == 8, "4 or 8 values");
  if (k + N <= n && (reinterpret_cast<uintptr_t>(vals + k) & (2 * N - 1)) == 0) {
    uint32_t w[N / 2];
#pragma unroll
    for (int q = 0; q < N / 2; ++q) w[q] = __float_as_uint(v[2 * q]) >> 16 | (__float_as_uint(v[2 * q + 1]) & 0xffff0000u);
    if constexpr (N == 8) {
      *reinterpret_cast<uint4*>(vals + k) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      *reinterpret_cast<uint2*>(vals + k) = make_uint2(w[0], w[1]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (k + i < n) vals[k + i] = static_cast<uint16_t>(__float_as_uint(v[i]) >> 16);
  }
}

// One warp quantises column group `group` (128 columns) of row `row`, whose
// bf16 values are vals[0, cols) (global or shared memory): lane l takes
// columns 4l .. 4l+3 of the group.
__device__ __forceinline__ void quantize_group_warp(const uint16_t* vals, int group, int row, const Fp8Out& o) {
  const int k = group * kFp8Group + (threadIdx.x & 31) * 4;
  float v[4];
  load_bf16<4>(vals, k, o.cols, v);
  quantize_group_regs<4>(v, k, row, o);
}

// The warps of the block quantise row `row` (bf16 values at vals).
__device__ __forceinline__ void quantize_row_block(const uint16_t* vals, int row, const Fp8Out& o) {
  const int groups = (o.cols + kFp8Group - 1) / kFp8Group;
  for (int g = threadIdx.x / 32; g < groups; g += blockDim.x / 32) quantize_group_warp(vals, g, row, o);
}

}  // namespace hyllm::cuda
