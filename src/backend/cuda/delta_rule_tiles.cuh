#pragma once
// The tiles of the chunked gated delta rule's kernels (chunked_delta_rule.cu,
// chunk_output.cu): TF32 tensor-core fragments, the staging of chunk rows
// into shared memory, and how a sequence splits into chunks. Included only
// by .cu files.

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/delta_rule_scratch.cuh"

namespace hyllm::cuda::delta_tiles {

inline constexpr int kThreads = 256;  // eight warps in every chunked kernel

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float round_tf32(float x) { return __uint_as_float(to_tf32(x)); }

// D = A B + D, m16n8k8 with TF32 operands. Fragment coordinates, lane =
// 4 g + t: A holds (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); B holds
// (t, g), (t + 4, g); the accumulator (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ int acc_row(int e, int g) { return g + (e >= 2 ? 8 : 0); }
__device__ __forceinline__ int acc_col(int e, int t) { return 2 * t + (e & 1); }

// A fragment of the row-major M at (m0, k0); `Rounded` when M already holds
// TF32 values.
template <bool Rounded>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const float* M, int ld, int m0, int k0, int g, int t) {
  const float v[4] = {M[(m0 + g) * ld + k0 + t], M[(m0 + g + 8) * ld + k0 + t], M[(m0 + g) * ld + k0 + t + 4],
                      M[(m0 + g + 8) * ld + k0 + t + 4]};
#pragma unroll
  for (int e = 0; e < 4; ++e) a[e] = Rounded ? __float_as_uint(v[e]) : to_tf32(v[e]);
}
// B fragment of B[k][n] = M[k * ld + n] at (k0, n0).
template <bool Rounded>
__device__ __forceinline__ void load_b(uint32_t (&b)[2], const float* M, int ld, int k0, int n0, int g, int t) {
  const float v0 = M[(k0 + t) * ld + n0 + g], v1 = M[(k0 + t + 4) * ld + n0 + g];
  b[0] = Rounded ? __float_as_uint(v0) : to_tf32(v0);
  b[1] = Rounded ? __float_as_uint(v1) : to_tf32(v1);
}
// B fragment of B[k][n] = M[n * ld + k] (M^T) at (k0, n0).
__device__ __forceinline__ void load_bt(uint32_t (&b)[2], const float* M, int ld, int k0, int n0, int g, int t) {
  b[0] = to_tf32(M[(n0 + g) * ld + k0 + t]);
  b[1] = to_tf32(M[(n0 + g) * ld + k0 + t + 4]);
}
// acc[nt] += A[m0 .. m0 + 16)[0 .. K) B[0 .. K)[n0 + 8 nt .. n0 + 8 nt + 8)
// for nt < NT, k ascending: A and B row-major (B as load_b reads it),
// RoundedA / RoundedB when they already hold TF32 values.
template <int NT, int K, bool RoundedA, bool RoundedB>
__device__ __forceinline__ void mma_rows(float (&acc)[NT][4], const float* A, int lda, const float* B, int ldb, int m0,
                                         int n0, int g, int t) {
#pragma unroll 4
  for (int k0 = 0; k0 < K; k0 += 8) {
    uint32_t a[4];
    load_a<RoundedA>(a, A, lda, m0, k0, g, t);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b[2];
      load_b<RoundedB>(b, B, ldb, k0, n0 + 8 * nt, g, t);
      mma_tf32(acc[nt], a, b[0], b[1]);
    }
  }
}

// Stages the first `rows` of `total_rows` rows of `cols4` float4s (zeros past
// `valid_cols4` and past `rows`) with 16-byte asynchronous copies; src row r
// is at src + r * src_stride.
__device__ __forceinline__ void stage_rows16(float* dst, int ld, const float* src, int64_t src_stride, int rows,
                                             int cols4, int valid_cols4, int total_rows = kDeltaChunk) {
  for (int i = threadIdx.x; i < total_rows * cols4; i += blockDim.x) {
    const int r = i / cols4, c4 = i % cols4;
    const bool ok = r < rows && c4 < valid_cols4;
    cp_async16(dst + r * ld + 4 * c4, src + (ok ? r * src_stride + 4 * c4 : 0), ok);
  }
}
// The same for rows whose length is not a multiple of four floats.
__device__ __forceinline__ void load_rows(float* dst, int ld, const float* src, int64_t src_stride, int rows,
                                          int cols, int valid_cols) {
  for (int i = threadIdx.x; i < kDeltaChunk * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    dst[r * ld + c] = (r < rows && c < valid_cols) ? src[r * src_stride + c] : 0.0f;
  }
}
// The chunk's rows of q and k for key head kh ([T, Hk, Dk] scratch).
__device__ __forceinline__ void stage_qk(float* dst, int ld, const float* src, const GatedDeltaRuleParams& p,
                                         int64_t tb, int kh, int rows, int dk_pad) {
  const int Dk = p.k_dim;
  const float* at = src + (tb * p.num_k_heads + kh) * Dk;
  const int64_t stride = static_cast<int64_t>(p.num_k_heads) * Dk;
  if (Dk % 4 == 0) stage_rows16(dst, ld, at, stride, rows, dk_pad / 4, Dk / 4);
  else load_rows(dst, ld, at, stride, rows, dk_pad, Dk);
}

// The chunks of one sequence of n tokens: kDeltaChunk tokens each from its
// start. A prefix-cache save after `split` tokens (0 < split < n, ops.h
// StateSaveArgs) cuts the sequence into two segments, [0, split) and
// [split, n), chunked each from its own start: a chunk then ends at the
// split, where the state kernel copies the state out, and that state is
// the one a call over [0, split) alone computes (the same chunks). Both
// kernels derive the same spans from the same arguments.
struct ChunkSpans {
  int n = 0;
  int split = 0;   // 0: one segment
  int before = 0;  // chunks of the first segment
  __device__ int count() const {
    return split > 0 ? before + (n - split + kDeltaChunk - 1) / kDeltaChunk : (n + kDeltaChunk - 1) / kDeltaChunk;
  }
  __device__ int start(int c) const { return c < before ? c * kDeltaChunk : split + (c - before) * kDeltaChunk; }
  __device__ int end(int c) const {
    return c < before ? min(split, (c + 1) * kDeltaChunk) : min(n, split + (c - before + 1) * kDeltaChunk);
  }
};

// The save length of sequence seq (0: none); the sequence has n tokens.
__device__ __forceinline__ int save_len_of(const GatedDeltaRuleParams& p, int seq, int n) {
  if (p.save_slots == nullptr) return 0;
  const int64_t slot = p.save_slots[seq];
  const int len = p.save_lens[seq];
  return slot >= 0 && slot < p.num_slots && len >= 1 && len <= n ? len : 0;
}

__device__ __forceinline__ ChunkSpans chunk_spans(const GatedDeltaRuleParams& p, int seq, int n) {
  ChunkSpans c;
  c.n = n;
  const int len = save_len_of(p, seq, n);
  c.split = len < n ? len : 0;
  c.before = (c.split + kDeltaChunk - 1) / kDeltaChunk;
  return c;
}

// The chunk-start state slot of sequence seq's first chunk: the chunks, in
// order, of the sequences before it that take the chunked path (every
// kernel derives the same numbering). Every thread of the block calls it:
// a block reduction through red (one int a warp).
__device__ __forceinline__ int chunk_slot_base(const GatedDeltaRuleParams& p, int seq, int* red) {
  int count = 0;
  for (int i = threadIdx.x; i < seq; i += blockDim.x) {
    const int n = p.query_start_loc[i + 1] - p.query_start_loc[i];
    if (n >= kChunkedFromTokens) count += chunk_spans(p, i, n).count();
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(0xffffffffu, count, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = count;
  __syncthreads();
  int total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += red[w];
  __syncthreads();  // red is free again
  return total;
}

}  // namespace hyllm::cuda::delta_tiles
