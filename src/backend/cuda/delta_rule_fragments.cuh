#pragma once
// The chunked delta rule's tensor-core operands (chunk_prepare.cu and
// chunked_delta_rule.cu): TF32 conversions, the m16n8k8 TF32 MMA and its fragment loads from
// shared memory (fp16 operands by ldmatrix, fp32 ones stored transposed), the
// fp16 fragment loads of the m16n8k16 MMA (mma_f16, cuda_common.cuh), and the
// asynchronous staging of a chunk's rows.

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/delta_rule_scratch.cuh"

namespace hyllm::cuda::delta_rule_fragments {

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float round_tf32(float x) { return __uint_as_float(to_tf32(x)); }
// An fp16 value as a TF32 operand: exact, no rounding needed.
__device__ __forceinline__ uint32_t h2tf32(uint16_t h) { return __float_as_uint(h2f(h)); }
__device__ __forceinline__ uint32_t lds32(const uint16_t* at) { return *reinterpret_cast<const uint32_t*>(at); }

// D = A B + D, m16n8k8 with TF32 operands. Fragment coordinates, lane =
// 4 g + t: A holds (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); B holds
// (t, g), (t + 4, g); the accumulator (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1). The fragment loads below give k slots t and t + 4 of an
// 8-wide step elements 2t and 2t + 1 of the step, to both operands: a dot
// product does not depend on the order of its terms, and an fp16 pair is
// then one 32-bit load.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ int acc_row(int e, int g) { return g + (e >= 2 ? 8 : 0); }
__device__ __forceinline__ int acc_col(int e, int t) { return 2 * t + (e & 1); }

// The TF32 A fragment of two fp16 pairs: lo holds row g's k slots (t, t + 4)
// in its halves, hi row g + 8's.
__device__ __forceinline__ void halves_to_tf32(uint32_t (&a)[4], uint32_t lo, uint32_t hi) {
  a[0] = h2tf32(static_cast<uint16_t>(lo));
  a[2] = h2tf32(static_cast<uint16_t>(lo >> 16));
  a[1] = h2tf32(static_cast<uint16_t>(hi));
  a[3] = h2tf32(static_cast<uint16_t>(hi >> 16));
}
// TF32 A fragments of the row-major fp16 M at (m0, k0) and (m0, k0 + 8), k
// slots paired, with one ldmatrix: its four 8 x 8 tiles are rows m0 and
// m0 + 8 of columns k0, then of columns k0 + 8. Rows of M start 16-byte
// aligned; m0 and k0 are multiples of 16 and 8.
__device__ __forceinline__ void load_a_h_x2(uint32_t (&a)[2][4], const uint16_t* M, int ld, int m0, int k0,
                                            int lane) {
  uint32_t r[4];
  ldmatrix_x4(r, M + (m0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * ld + k0 + 8 * (lane >> 4));
  halves_to_tf32(a[0], r[0], r[1]);
  halves_to_tf32(a[1], r[2], r[3]);
}
// The same for A[m][k] = M[k][m] (M row-major fp16, read transposed): the
// tiles are rows k0 of columns m0 and m0 + 8, then rows k0 + 8 of both.
__device__ __forceinline__ void load_a_h_trans_x2(uint32_t (&a)[2][4], const uint16_t* M, int ld, int m0, int k0,
                                                  int lane) {
  uint32_t r[4];
  ldmatrix_x4_trans(r, M + (k0 + (lane & 7) + 8 * (lane >> 4)) * ld + m0 + 8 * ((lane >> 3) & 1));
  halves_to_tf32(a[0], r[0], r[1]);
  halves_to_tf32(a[1], r[2], r[3]);
}
// TF32 B fragment of B[k][n] = MT[n * ld + k] (fp32 values already rounded to
// TF32, stored transposed) at (k0, n): the paired k slots are adjacent, one
// 8-byte load. ld is even.
__device__ __forceinline__ void load_b_t(uint32_t (&b)[2], const float* MT, int ld, int k0, int n, int t) {
  const float2 v = *reinterpret_cast<const float2*>(MT + n * ld + k0 + 2 * t);
  b[0] = __float_as_uint(v.x);
  b[1] = __float_as_uint(v.y);
}
// The B fragments of k steps k0 and k0 + 8 (h = 0, 1) for NT tiles of 8
// columns from n0, from the transposed TF32 rows MT (load_b_t), each handed
// to mma(h, nt, b0, b1): the products of an x2 A fragment pair.
template <int NT, typename Mma>
__device__ __forceinline__ void for_b_tiles_x2(const float* MT, int ld, int k0, int n0, int lane, Mma mma) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b[2];
      load_b_t(b, MT, ld, k0 + 8 * h, n0 + 8 * nt + g, t);
      mma(h, nt, b[0], b[1]);
    }
  }
}
// fp16 A fragment (m16n8k16) of the row-major fp16 M at (m0, k0).
__device__ __forceinline__ void load_a16(uint32_t (&a)[4], const uint16_t* M, int ld, int m0, int k0, int g, int t) {
  const uint16_t* lo = M + (m0 + g) * ld + k0 + 2 * t;
  a[0] = lds32(lo);
  a[1] = lds32(lo + 8 * ld);
  a[2] = lds32(lo + 8);
  a[3] = lds32(lo + 8 * ld + 8);
}

// Stages `rows` rows of `cols` elements (cols * sizeof(T) a multiple of 16
// bytes, zeros past `rows`) with 16-byte asynchronous copies; src row r is
// at src + r * src_stride, dst row r at dst + r * ld.
template <typename T>
__device__ __forceinline__ void stage_rows(T* dst, int ld, const T* src, int64_t src_stride, int rows, int cols) {
  constexpr int kPer16 = 16 / sizeof(T);
  const int per_row = cols / kPer16;
  for (int i = threadIdx.x; i < kDeltaChunk * per_row; i += blockDim.x) {
    const int r = i / per_row, c = (i % per_row) * kPer16;
    cp_async16(dst + r * ld + c, src + (r < rows ? r * src_stride + c : 0), r < rows);
  }
}

}  // namespace hyllm::cuda::delta_rule_fragments
