// The paged attention kernel's shape (rows and keys per block, split-KV
// limits) and the two merges of a split key range's partial
// results (paged_attention.cu): through global memory by the last block of a
// group, or inside a cluster over distributed shared memory.
#pragma once

#include <cfloat>

#include "backend/cuda/cluster.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/attention.h"

namespace hyllm::cuda::paged_attention_detail {

constexpr int kRows = 64;   // rows per block
constexpr int kKeys = 64;   // keys per tile
// Split-KV granularity: a split may hold less than a tile, so that a short
// decode context still spreads its work over many SMs (one warp does a
// decode row group's math, and its time grows with the keys it walks).
constexpr int kSplitKeys = 16;
// Most splits of a launch: the merge computes one split's weight per lane.
constexpr int kMaxSplits = 32;
// Splitting aims for this many blocks per SM; a launch that splits thus has
// fewer (sequence, KV head, row tile) groups than kSplitTargetPerSm * SMs,
// which bounds the counters it needs.
constexpr int kSplitTargetPerSm = 2;
// Partial loads each thread keeps in flight while merging.
constexpr int kMergeBatch = 16;
// Splits merged inside one cluster: the portable cluster size. A launch
// takes the cluster merge when its longest context over this many splits is
// at most kClusterMaxSplitKeys keys each.
constexpr int kMaxClusterSplits = 8;
constexpr int kClusterMaxSplitKeys = 512;
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

// Keys per split of a (sequence, KV head, row tile) group whose last row
// sees kv_len keys; splits past ceil(kv_len / split_keys) are empty.
__device__ __forceinline__ int split_keys(int kv_len, int num_splits) {
  return ((kv_len + num_splits - 1) / num_splits + kSplitKeys - 1) / kSplitKeys * kSplitKeys;
}

// Merges the first num_splits splits (those holding keys) of rows
// [m0, m0 + n_rows) of one (sequence, KV head):
// first one warp per row finds the splits' weights (lane s: split s's max and
// sum), then the block's threads share the rows' columns, two each, summing
// the splits in order. `smem` holds kRows * (kMaxSplits + 1) floats. Partials
// are read through L2 (__ldcg): other SMs wrote them during this launch.
template <int D, bool kFp8>
__device__ __forceinline__ void merge_splits(const PagedAttentionParams& p, int num_splits, const float* partial,
                                             int q_start, int m0, int n_rows, int kvh, void* smem) {
  float* s_weight = static_cast<float*>(smem);  // [kRows][kMaxSplits]
  float* s_inv = s_weight + kRows * kMaxSplits;  // [kRows]
  const int group = p.num_q_heads / p.num_kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t hq = p.num_q_heads;
  const int64_t stride = static_cast<int64_t>(p.tokens) * hq * (D + 2);  // one split's partials
  // Row r's (token, head) as an index into [tokens][Hq].
  auto item_of = [&](int r) {
    const int rr = m0 + r;
    return (static_cast<int64_t>(q_start) + rr / group) * hq + kvh * group + rr % group;
  };
  for (int r = warp; r < n_rows; r += kThreads / 32) {
    const float* base = partial + item_of(r) * (D + 2);
    const float ms = lane < num_splits ? __ldcg(base + lane * stride + D) : -INFINITY;
    const float m = warp_max(ms);
    const float weight = ms == -INFINITY ? 0.0f : exp2f(ms - m);
    const float total = warp_sum(lane < num_splits ? __ldcg(base + lane * stride + D + 1) * weight : 0.0f);
    s_weight[r * kMaxSplits + lane] = weight;
    if (lane == 0) s_inv[r] = (kFp8 ? p.v_scale : 1.0f) / total;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_rows * (D / 2); i += kThreads) {
    const int r = i / (D / 2), d = 2 * (i % (D / 2));
    const int64_t item = item_of(r);
    const float* base = partial + item * (D + 2) + d;
    const float* w = s_weight + r * kMaxSplits;
    float o0 = 0.0f, o1 = 0.0f;
    // kMergeBatch loads in flight per thread, then the sums in split order; a
    // split of weight 0 (no visible key) adds nothing.
    for (int s0 = 0; s0 < num_splits; s0 += kMergeBatch) {
      float2 v[kMergeBatch];
#pragma unroll
      for (int j = 0; j < kMergeBatch; ++j) {
        v[j] = s0 + j < num_splits ? __ldcg(reinterpret_cast<const float2*>(base + (s0 + j) * stride))
                                   : make_float2(0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < kMergeBatch; ++j) {
        const float ws = s0 + j < num_splits ? w[s0 + j] : 0.0f;
        if (ws == 0.0f) continue;
        o0 += v[j].x * ws;
        o1 += v[j].y * ws;
      }
    }
    const float inv = s_inv[r];
    o0 = round_bf(o0 * inv);
    o1 = round_bf(o1 * inv);
    const int64_t o_off = item * D + d;
    if (p.gate != nullptr) {
      o0 = __fmul_rn(o0, sigmoid(bf2f(p.gate[o_off])));
      o1 = __fmul_rn(o1, sigmoid(bf2f(p.gate[o_off + 1])));
    }
    *reinterpret_cast<uint32_t*>(p.out + o_off) = pack_bf16(o0, o1);
  }
}

// Merges the splits of one cluster: block q of the cluster holds split q's
// partials for rows [m0, m0 + n_rows) in its shared memory `part`
// ([row - m0][D + 2]: unnormalised o, max, sum). The cluster's blocks share
// the rows' column pairs; every load of an item (each split's max, sum and
// two columns) is issued before the first is used.
template <int D, bool kFp8>
__device__ __forceinline__ void merge_cluster(const PagedAttentionParams& p, const float* part, int num_splits,
                                              int rank, int q_start, int m0, int n_rows, int kvh) {
  const int group = p.num_q_heads / p.num_kv_heads;
  const int64_t hq = p.num_q_heads;
  for (int i = rank * kThreads + static_cast<int>(threadIdx.x); i < n_rows * (D / 2); i += num_splits * kThreads) {
    const int r = i / (D / 2), d = 2 * (i % (D / 2));
    const int rr = m0 + r;
    const int64_t o_off = ((static_cast<int64_t>(q_start) + rr / group) * hq + kvh * group + rr % group) * D + d;
    const uint32_t gate = p.gate != nullptr ? *reinterpret_cast<const uint32_t*>(p.gate + o_off) : 0u;
    const float* row = part + r * (D + 2);
    float ms[kMaxClusterSplits], ss[kMaxClusterSplits];
    float2 v[kMaxClusterSplits];
#pragma unroll
    for (int q = 0; q < kMaxClusterSplits; ++q) {
      if (q < num_splits) {
        ms[q] = load_remote(row + D, q);
        ss[q] = load_remote(row + D + 1, q);
        v[q] = load_remote2(row + d, q);
      }
    }
    float m = -INFINITY;
#pragma unroll
    for (int q = 0; q < kMaxClusterSplits; ++q) m = q < num_splits ? fmaxf(m, ms[q]) : m;
    float total = 0.0f, o0 = 0.0f, o1 = 0.0f;
#pragma unroll
    for (int q = 0; q < kMaxClusterSplits; ++q) {
      // A split with no visible key (max -inf) adds nothing.
      if (q >= num_splits || ms[q] == -INFINITY) continue;
      const float w = exp2f(ms[q] - m);
      total += ss[q] * w;
      o0 += v[q].x * w;
      o1 += v[q].y * w;
    }
    const float inv = (kFp8 ? p.v_scale : 1.0f) / total;
    o0 = round_bf(o0 * inv);
    o1 = round_bf(o1 * inv);
    if (p.gate != nullptr) {
      o0 = __fmul_rn(o0, sigmoid(bf2f(static_cast<uint16_t>(gate & 0xffffu))));
      o1 = __fmul_rn(o1, sigmoid(bf2f(static_cast<uint16_t>(gate >> 16))));
    }
    *reinterpret_cast<uint32_t*>(p.out + o_off) = pack_bf16(o0, o1);
  }
}

}  // namespace hyllm::cuda::paged_attention_detail
