#pragma once
// Device helpers shared by the MoE kernels: the warp router (softmax, top-k,
// renormalise), block scans over experts, and the register-fed tensor-core
// step of the small-batch expert kernels.

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/moe.h"

namespace hyllm::cuda::moe_detail {

inline constexpr int kRoutePerLane = kMoeMaxExperts / 32;

// Softmax over the E logits get(e) in fp32, then the top_k (<= 32) largest
// probabilities (ties: the lower expert id), renormalised to sum 1, in
// descending order: lane i < top_k gets choice i. A NaN probability ranks
// below every number, so every choice is a valid, distinct expert id even for
// garbage rows (padding of a captured step). Requires E <= 32 * kPerLane.
template <int kPerLane = kRoutePerLane, typename Get>
__device__ __forceinline__ void warp_route(Get get, int E, int top_k, int lane, int& id, float& weight) {
  float v[kPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = i * 32 + lane;
    v[i] = e < E ? get(e) : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    v[i] = i * 32 + lane < E ? expf(v[i] - mx) : 0.0f;
    sum += v[i];
  }
  sum = warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float p = v[i] / sum;
    v[i] = i * 32 + lane < E ? (p == p ? p : -1.0f) : -2.0f;
  }
  float top_sum = 0.0f;
  id = 0;
  weight = 0.0f;
  for (int r = 0; r < top_k; ++r) {
    float best = -3.0f;
    int best_e = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (v[i] > best) {  // ascending ids per lane: the first maximum is the lowest id
        best = v[i];
        best_e = i * 32 + lane;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (ob > best || (ob == best && oe < best_e)) {
        best = ob;
        best_e = oe;
      }
    }
    top_sum += best;
    if (lane == r) {
      id = best_e;
      weight = best;
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (i * 32 + lane == best_e) v[i] = -2.0f;
    }
  }
  weight /= top_sum;
}

// Decode of one or two sequences: so few small-regime work items that the
// gate_up kernel fills the GPU with about two blocks per SM. It then splits K
// over more warps per block, so that each warp has a shorter chain of
// dependent weight loads.
inline bool few_items(const MoeSmallParams& p) { return p.plan.max_items <= 24; }

// Exclusive prefix sums over up to kMoeMaxExperts entries of N counters, by a
// block of 256 threads, each owning 4 consecutive entries: value(e, c) is
// counter c of entry e (0 past the end), prefix(e, c) receives the sums of
// the entries before e, and total[c] the sum of all (in shared memory,
// visible to every thread on return).
template <int N, typename Value, typename Prefix>
__device__ __forceinline__ void block_scan_experts(int entries, Value value, Prefix prefix, int (&total)[N]) {
  constexpr int kPer = kMoeMaxExperts / 256;
  __shared__ int warp_sums[8][N];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int local[kPer][N];
  int sum[N];
#pragma unroll
  for (int c = 0; c < N; ++c) sum[c] = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = tid * kPer + j;
#pragma unroll
    for (int c = 0; c < N; ++c) {
      local[j][c] = sum[c];
      sum[c] += e < entries ? value(e, c) : 0;
    }
  }
  int excl[N];
#pragma unroll
  for (int c = 0; c < N; ++c) {
    int incl = sum[c];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += n;
    }
    excl[c] = incl - sum[c];
    if (lane == 31) warp_sums[warp][c] = incl;
  }
  __syncthreads();
#pragma unroll
  for (int c = 0; c < N; ++c) {
    int before = 0, all = 0;
    for (int w = 0; w < 8; ++w) {
      if (w < warp) before += warp_sums[w][c];
      all += warp_sums[w][c];
    }
    excl[c] += before;
    total[c] = all;
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = tid * kPer + j;
    if (e < entries) {
#pragma unroll
      for (int c = 0; c < N; ++c) prefix(e, c, excl[c] + local[j][c]);
    }
  }
  __syncthreads();
}

// 16 bytes when `pred`, zeros otherwise, through the read-only path without
// allocating in L1 (weights, streamed once) or through L1 (activations that
// several warps read). Not volatile, so that the compiler can hoist a batch
// of them ahead of their uses.
__device__ __forceinline__ uint4 ld_stream(const void* p, bool pred) {
  uint4 r;
  asm("{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\n"
      "mov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"
      "@q ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n}\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p), "r"(static_cast<int>(pred)));
  return r;
}
__device__ __forceinline__ uint4 ld_vec(const void* p, bool pred) {
  uint4 r;
  asm("{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\n"
      "mov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"
      "@q ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n}\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p), "r"(static_cast<int>(pred)));
  return r;
}

// One 32-wide k window of D[16 x 8] += A[16 x 32] B[32 x 8] on tensor cores,
// with operands loaded straight from memory: lane (g = lane / 4, q = lane % 4)
// holds columns [8q, 8q + 8) of A rows g (a_lo) and g + 8 (a_hi) and of B
// column g (b). The k order inside the window is permuted the same way for
// A and B, which a dot product does not see.
__device__ __forceinline__ void mma_k32(float (&d)[4], const uint4& a_lo, const uint4& a_hi, const uint4& b) {
  const uint32_t a0[4] = {a_lo.x, a_hi.x, a_lo.y, a_hi.y};
  mma_bf16(d, a0, b.x, b.y);
  const uint32_t a1[4] = {a_lo.z, a_hi.z, a_lo.w, a_hi.w};
  mma_bf16(d, a1, b.z, b.w);
}


}  // namespace hyllm::cuda::moe_detail
