// MoE routing, token permutation, the grouped expert GEMM and the weighted
// combine with the gated shared expert.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/moe.h"

namespace hyllm::cuda {
namespace {

constexpr int kRouteMaxPerLane = kMoeMaxExperts / 32;

// One warp per token: softmax over E in fp32, then top_k rounds of a warp
// argmax (ties: lower expert id), renormalised.
__global__ void route_kernel(MoeRouteParams p) {
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (t >= p.tokens) return;
  float v[kRouteMaxPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kRouteMaxPerLane; ++i) {
    const int e = i * 32 + lane;
    v[i] = e < p.experts ? load_float(p.logits, p.logits_f32, static_cast<int64_t>(t) * p.experts + e) : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kRouteMaxPerLane; ++i) {
    const int e = i * 32 + lane;
    v[i] = e < p.experts ? expf(v[i] - mx) : 0.0f;
    sum += v[i];
  }
  sum = warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kRouteMaxPerLane; ++i) v[i] = i * 32 + lane < p.experts ? v[i] / sum : -1.0f;
  float top_sum = 0.0f, chosen_p = 0.0f;
  int chosen_e = 0;
  for (int r = 0; r < p.top_k; ++r) {
    float best = -2.0f;
    int best_e = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kRouteMaxPerLane; ++i) {
      if (v[i] > best) {  // ascending e per lane: the first max is the lowest id
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
    if (lane == r % 32 && r / 32 == 0) {
      chosen_p = best;
      chosen_e = best_e;
    }
    if (r >= 32 && lane == 0) {  // top_k beyond a warp: written directly
      p.topk_ids[static_cast<int64_t>(t) * p.top_k + r] = best_e;
      p.topk_weights[static_cast<int64_t>(t) * p.top_k + r] = best;
    }
    if ((best_e & 31) == lane) v[best_e / 32] = -1.0f;
  }
  if (lane < p.top_k && lane < 32) {
    p.topk_ids[static_cast<int64_t>(t) * p.top_k + lane] = chosen_e;
    p.topk_weights[static_cast<int64_t>(t) * p.top_k + lane] = chosen_p / top_sum;
  }
  if (lane == 0) {
    for (int r = 32; r < p.top_k; ++r) p.topk_weights[static_cast<int64_t>(t) * p.top_k + r] /= top_sum;
  }
}

__global__ void permute_kernel(MoePermuteParams p) {
  __shared__ int counts[kMoeMaxExperts];
  __shared__ int cursor[kMoeMaxExperts];
  const int n = p.tokens * p.top_k;
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int e = p.topk_ids[i];
    if (e >= 0 && e < p.experts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0, active = 0;
    const int max_active = min(p.experts, n);
    for (int e = 0; e < p.experts; ++e) {
      p.offsets[e] = run;
      cursor[e] = run;
      run += counts[e];
      if (counts[e] > 0 && active < max_active) p.active[active++] = e;
    }
    p.offsets[p.experts] = run;
    // Every grid slot past the last active expert reads -1 (the grid has
    // max_active blocks in y).
    for (int i = active; i <= max_active; ++i) p.active[i] = -1;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int e = p.topk_ids[i];
    int pos = -1;
    if (e >= 0 && e < p.experts) {
      pos = atomicAdd(&cursor[e], 1);
      p.sorted_token[pos] = i / p.top_k;
    }
    p.row_of[i] = pos;
  }
}

// Grouped GEMM: block = (64 output features, one group), looping over the
// group's rows in tiles of 64; 4 warps of 16 rows x 64 features; K in steps of
// 64 through a 4-stage cp.async pipeline.
constexpr int kBM = 64, kBN = 64, kBK = 64, kStages = 4, kGemmThreads = 128;
constexpr int kLd = kBK + 8;  // padded row (elements)
constexpr size_t kGemmSmem = static_cast<size_t>(kStages) * 2 * kBM * kLd * 2;

__global__ void __launch_bounds__(kGemmThreads) grouped_gemm_kernel(GroupedGemmParams p) {
  extern __shared__ __align__(16) uint16_t smem[];
  int g = blockIdx.y;
  if (p.active != nullptr) {
    g = p.active[g];
    if (g < 0) return;
  }
  const int begin = p.offsets[g], end = p.offsets[g + 1];
  if (begin >= end) return;
  const int n0 = blockIdx.x * kBN;
  const uint16_t* w = p.w_table ? p.w_table[g] : p.w + g * p.w_expert_stride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int k_tiles = (p.k + kBK - 1) / kBK;
  auto sa = [&](int st) { return smem + st * 2 * kBM * kLd; };
  auto sb = [&](int st) { return smem + st * 2 * kBM * kLd + kBM * kLd; };

  for (int m0 = begin; m0 < end; m0 += kBM) {
    auto load = [&](int st, int kt) {
      const int k0 = kt * kBK;
      for (int i = threadIdx.x; i < kBM * (kBK / 8); i += kGemmThreads) {
        const int r = i / (kBK / 8), c = (i % (kBK / 8)) * 8;
        const int kc = k0 + c;
        const int row = m0 + r;
        const bool a_ok = row < end && kc < p.k;
        const int64_t src_row = a_ok ? (p.row_index ? p.row_index[row] : row) : 0;
        cp_async16(sa(st) + r * kLd + c, p.x + src_row * p.x_stride + (a_ok ? kc : 0), a_ok);
        const int nn = n0 + r;
        const bool b_ok = nn < p.n && kc < p.k;
        cp_async16(sb(st) + r * kLd + c, w + static_cast<int64_t>(b_ok ? nn : 0) * p.k + (b_ok ? kc : 0), b_ok);
      }
    };
    float acc[kBN / 8][4];
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < k_tiles) load(st, st);
      cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const uint16_t* a_tile = sa(kt % kStages);
      const uint16_t* b_tile = sb(kt % kStages);
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        uint32_t a[4];
        ldmatrix_x4(a, a_tile + (warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kLd + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int nt = 0; nt < kBN / 8; nt += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, b_tile + (nt * 8 + (lane % 8) + (lane / 16) * 8) * kLd + kk * 16 + ((lane / 8) % 2) * 8);
          mma_bf16(acc[nt], a, b[0], b[1]);
          mma_bf16(acc[nt + 1], a, b[2], b[3]);
        }
      }
      const int next = kt + kStages - 1;
      if (next < k_tiles) load(next % kStages, next);
      cp_async_commit();
    }
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = m0 + warp * 16 + lane / 4 + i * 8;
      if (row >= end) continue;
      uint16_t* o = p.out + static_cast<int64_t>(row) * p.out_stride;
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt) {
        const int n = n0 + nt * 8 + (lane % 4) * 2;
        if (n + 1 < p.n) {
          *reinterpret_cast<uint32_t*>(o + n) = pack_bf16(acc[nt][2 * i], acc[nt][2 * i + 1]);
        } else if (n < p.n) {
          o[n] = f2bf(acc[nt][2 * i]);
        }
      }
    }
  }
}

// Block = token. The routed outputs are summed in ascending expert id, as the
// CPU reference accumulates them.
__global__ void combine_kernel(MoeCombineParams p) {
  __shared__ int order[kMoeMaxTopK];
  const int t = blockIdx.x;
  const int k = p.top_k;
  if (threadIdx.x == 0) {
    for (int i = 0; i < k; ++i) order[i] = i;
    for (int i = 1; i < k; ++i) {  // insertion sort by expert id
      const int x = order[i];
      const int xe = p.topk_ids[t * k + x];
      int j = i - 1;
      while (j >= 0 && p.topk_ids[t * k + order[j]] > xe) {
        order[j + 1] = order[j];
        --j;
      }
      order[j + 1] = x;
    }
  }
  __syncthreads();
  float gate = 1.0f;
  if (p.shared && p.shared_gate) gate = sigmoid(load_float(p.shared_gate, p.shared_gate_f32, t));
  for (int h = threadIdx.x; h < p.hidden; h += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) {
      const int c = order[i];
      const int row = p.row_of[t * k + c];
      if (row < 0) continue;
      acc = __fadd_rn(acc, __fmul_rn(p.topk_weights[t * k + c], bf2f(p.y[static_cast<int64_t>(row) * p.hidden + h])));
    }
    if (p.shared) acc = __fadd_rn(acc, __fmul_rn(gate, bf2f(p.shared[static_cast<int64_t>(t) * p.hidden + h])));
    p.out[static_cast<int64_t>(t) * p.hidden + h] = f2bf(acc);
  }
}

}  // namespace

void launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  route_kernel<<<ceil_div(p.tokens, 4), 128, 0, stream>>>(p);
}

void launch_moe_permute(const MoePermuteParams& p, cudaStream_t stream) {
  permute_kernel<<<1, 1024, 0, stream>>>(p);
}

void launch_grouped_gemm(const GroupedGemmParams& p, cudaStream_t stream) {
  if (p.groups == 0 || p.n == 0) return;
  static bool configured = false;
  if (!configured) {
    cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kGemmSmem));
    configured = true;
  }
  dim3 grid(ceil_div(p.n, kBN), p.active ? p.grid_groups : p.groups);
  grouped_gemm_kernel<<<grid, kGemmThreads, kGemmSmem, stream>>>(p);
}

void launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  combine_kernel<<<p.tokens, 256, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
