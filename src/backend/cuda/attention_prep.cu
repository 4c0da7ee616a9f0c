// The fused attention preamble: q/gate split, q/k RMSNorm1p, partial NeoX
// RoPE and the paged KV-cache write (bf16, or e4m3 codes), one warp per
// (token, head).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/launch/attention.h"

namespace hyllm::cuda {
namespace {

// One warp per (token, head): blockIdx.x is the token, blockIdx.y * kWarps +
// warp the head item (q heads first, then kv heads), so a decode step spreads
// its heads over many SMs instead of walking them in series.
constexpr int kWarps = 4;
// Rotary pairs (i, i + half) a lane owns: i = lane + 32 * j.
constexpr int kMaxPairsPerLane = kMaxRotaryHalf / 32;
// Head elements a lane holds.
constexpr int kMaxPerLane = kMaxPrepHeadDim / 32;

// kFp8: the cache holds e4m3 codes of k / k_scale and v / v_scale.
template <bool kFp8>
__global__ void __launch_bounds__(kWarps * 32) attention_prep_kernel(const __grid_constant__ AttentionPrepParams p) {
  extern __shared__ float smem[];
  const int half = p.rotary_dim / 2, D = p.head_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int t = blockIdx.x;
  const int item = blockIdx.y * kWarps + warp;
  const int items = p.num_q_heads + p.num_kv_heads;
  if (item >= items) return;  // no block-wide barrier follows
  float* buf = smem + warp * D;
  const bool is_q = item < p.num_q_heads;
  const int h = is_q ? item : item - p.num_q_heads;
  const uint16_t* src = is_q ? p.q_gate + t * p.q_gate_stride + static_cast<int64_t>(h) * 2 * D
                             : p.k + t * p.k_stride + static_cast<int64_t>(h) * D;
  const int64_t slot = p.slot_mapping[t];
  const bool write_cache = slot >= 0 && slot < p.num_slots;
  // A k head whose token has no cache slot has nothing to write.
  if (!is_q && !write_cache) return;
  const int64_t cache_off = (slot * p.num_kv_heads + h) * D;

  // cos/sin of the pairs this lane rotates, in double and rounded once: the
  // correctly rounded values glibc's cosf/sinf give the CPU reference. Each
  // lane computes only its own pairs, so they overlap the loads below.
  float cos_v[kMaxPairsPerLane], sin_v[kMaxPairsPerLane];
  const float pos = static_cast<float>(p.positions[t]);
#pragma unroll
  for (int j = 0; j < kMaxPairsPerLane; ++j) {
    const int i = lane + 32 * j;
    if (i < half) {
      const double angle = static_cast<double>(__fmul_rn(pos, p.inv_freq[i]));
      cos_v[j] = static_cast<float>(cos(angle));
      sin_v[j] = static_cast<float>(sin(angle));
    }
  }

  // Every global read first, so that one memory round trip serves them all:
  // the head's values (element lane + 32 j), its norm weights, and the gate
  // (q heads) or v (kv heads) the warp copies on.
  const void* w = is_q ? p.q_norm : p.k_norm;
  const bool w32 = is_q ? p.q_norm_f32 : p.k_norm_f32;
  const uint16_t* copy_src = is_q ? src + D : p.v + t * p.v_stride + static_cast<int64_t>(h) * D;
  float xv[kMaxPerLane], wv[kMaxPerLane];
  uint16_t cv[kMaxPerLane];
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d < D) {
      xv[j] = bf2f(src[d]);
      wv[j] = load_float(w, w32, d);
      cv[j] = copy_src[d];
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    if (lane + 32 * j < D) sum_sq += xv[j] * xv[j];
  }
  sum_sq = warp_sum(sum_sq);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(D) + p.eps);
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d < D) buf[d] = round_bf(__fmul_rn(__fmul_rn(xv[j], inv), wv[j] + 1.0f));
  }
  __syncwarp();
  if (is_q || !kFp8) {
    uint16_t* dst = is_q ? p.q_out + (static_cast<int64_t>(t) * p.num_q_heads + h) * D
                         : static_cast<uint16_t*>(p.k_cache) + cache_off;
#pragma unroll
    for (int j = 0; j < kMaxPairsPerLane; ++j) {
      const int i = lane + 32 * j;
      if (i < half) {
        const float x1 = buf[i], x2 = buf[i + half];
        dst[i] = f2bf(__fsub_rn(__fmul_rn(x1, cos_v[j]), __fmul_rn(x2, sin_v[j])));
        dst[i + half] = f2bf(__fadd_rn(__fmul_rn(x2, cos_v[j]), __fmul_rn(x1, sin_v[j])));
      }
    }
    for (int d = p.rotary_dim + lane; d < D; d += 32) dst[d] = f2bf(buf[d]);
  } else {
    uint8_t* kd = static_cast<uint8_t*>(p.k_cache) + cache_off;
#pragma unroll
    for (int j = 0; j < kMaxPairsPerLane; ++j) {
      const int i = lane + 32 * j;
      if (i < half) {
        const float x1 = buf[i], x2 = buf[i + half];
        kd[i] = kv_fp8_code(round_bf(__fsub_rn(__fmul_rn(x1, cos_v[j]), __fmul_rn(x2, sin_v[j]))), p.k_scale);
        kd[i + half] = kv_fp8_code(round_bf(__fadd_rn(__fmul_rn(x2, cos_v[j]), __fmul_rn(x1, sin_v[j]))), p.k_scale);
      }
    }
    for (int d = p.rotary_dim + lane; d < D; d += 32) kd[d] = kv_fp8_code(buf[d], p.k_scale);
  }
  if (is_q) {
    uint16_t* go = p.gate_out + (static_cast<int64_t>(t) * p.num_q_heads + h) * D;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      if (lane + 32 * j < D) go[lane + 32 * j] = cv[j];
    }
  } else if constexpr (kFp8) {
    uint8_t* vd = static_cast<uint8_t*>(p.v_cache) + cache_off;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      if (lane + 32 * j < D) vd[lane + 32 * j] = kv_fp8_code(bf2f(cv[j]), p.v_scale);
    }
  } else {
    uint16_t* vd = static_cast<uint16_t*>(p.v_cache) + cache_off;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      if (lane + 32 * j < D) vd[lane + 32 * j] = cv[j];
    }
  }
}

}  // namespace

void launch_attention_prep(const AttentionPrepParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  const size_t smem = static_cast<size_t>(kWarps) * p.head_dim * sizeof(float);
  const dim3 grid(p.tokens, ceil_div(p.num_q_heads + p.num_kv_heads, kWarps));
  if (p.fp8_cache) {
    attention_prep_kernel<true><<<grid, kWarps * 32, smem, stream>>>(p);
  } else {
    attention_prep_kernel<false><<<grid, kWarps * 32, smem, stream>>>(p);
  }
}

}  // namespace hyllm::cuda
