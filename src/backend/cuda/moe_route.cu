// MoE routing: the moe_route op, the small regime's fused router (GEMV,
// softmax, top-k, renormalisation and the plan, in one kernel), and the
// grouped regime's top-k with per-expert counts and its plan.
#include <algorithm>

#include "backend/cuda/dynamic_smem.cuh"
#include "backend/cuda/moe_common.cuh"

namespace hyllm::cuda {
namespace {

using moe_detail::block_scan_experts;
using moe_detail::ld_stream;
using moe_detail::mma_k32;
using moe_detail::warp_route;
using moe_detail::warp_route_rows;

// One warp per token.
__global__ void route_kernel(MoeRouteParams p) {
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (t >= p.tokens) return;
  int id;
  float w;
  warp_route([&](int e) { return load_float(p.logits, p.logits_f32, static_cast<int64_t>(t) * p.experts + e); },
             p.experts, p.top_k, lane, id, w);
  if (lane < p.top_k) {
    p.topk_ids[static_cast<int64_t>(t) * p.top_k + lane] = id;
    p.topk_weights[static_cast<int64_t>(t) * p.top_k + lane] = w;
  }
}

constexpr int kSmallRouteWarps = 8;
constexpr int kSmallPairs = kMoeSmallMaxTokens * kMoeMaxTopK;

// The last block's work for one token, by its first warp alone: the plan the
// general path below writes, without its masks, scans and block barriers.
// Every expert then has one row, so an expert's item index, row position and
// rank in the token's row list are all its rank by id among the top k; the
// shared expert's item follows them.
template <int kPerLane>
__device__ __forceinline__ void route_one_token(const MoeRouteSmallParams& p, const float* lg, int warp, int lane) {
  if (warp != 0) return;
  const int E = p.experts, k = p.top_k;
  // The shared expert's gate logit is asked for beside the routed ones.
  const float gate_logit = p.shared && p.gate != nullptr && lane == 0 ? __ldcg(lg + E) : 0.0f;
  int id;
  float wt;
  warp_route<kPerLane>([&](int e) { return __ldcg(lg + e); }, E, k, lane, id, wt);
  int rank = 0;
  for (int j = 0; j < k; ++j) rank += __shfl_sync(0xffffffffu, id, j) < id ? 1 : 0;
  if (lane < k) {
    if (p.topk_ids != nullptr) {
      p.topk_ids[lane] = id;
      p.topk_weights[lane] = wt;
    }
    if (p.expert_load != nullptr) atomicAdd(&p.expert_load[id], 1);
    p.plan.item_expert[rank] = id;
    p.plan.item_pos[rank] = rank;
    p.plan.item_rows[rank] = 1;
    p.plan.sorted_token[rank] = 0;
    p.plan.sorted_weight[rank] = wt;
    p.plan.token_pos[rank] = rank;
  }
  if (lane != 0) return;
  if (p.shared) {
    p.plan.item_expert[k] = E;
    p.plan.item_pos[k] = k;
    p.plan.item_rows[k] = 1;
    p.plan.sorted_token[k] = 0;
    p.plan.sorted_weight[k] = p.gate != nullptr ? sigmoid(gate_logit) : 1.0f;
  }
  *p.plan.num_items = k + (p.shared ? 1 : 0);
  *p.counter = 0;
}

// Rows a warp of route_small's last block routes at once: four where a lane
// holds 8 logits a row, one where it holds 32 (four rows would spill).
template <int kPerLane>
constexpr int kRouteRowsPerWarp = kPerLane <= 8 ? 4 : 1;

// route_small's last block: warp w routes tokens w, w + 8, ..., NT of them a
// pass, into the block's pair tables (and the op's top-k outputs when asked).
template <int NT, int kPerLane>
__device__ __forceinline__ void route_rows(const MoeRouteSmallParams& p, const float* lg, int warp, int lane,
                                           int* s_ids, float* s_w, float* s_gate) {
  const int T = p.tokens, E = p.experts, k = p.top_k;
  for (int t0 = warp; t0 < T; t0 += kSmallRouteWarps * NT) {
    // Rows past T repeat the last token, and their results are dropped.
    int tok[NT];
    float gate_logit[NT];
#pragma unroll
    for (int u = 0; u < NT; ++u) {
      tok[u] = min(t0 + u * kSmallRouteWarps, T - 1);
      gate_logit[u] = p.gate != nullptr && lane == 0 ? __ldcg(lg + tok[u] * (E + 1) + E) : 0.0f;
    }
    int id[NT];
    float wt[NT];
    warp_route_rows<NT, kPerLane>([&](int u, int e) { return __ldcg(lg + tok[u] * (E + 1) + e); }, E, k, lane, id,
                                  wt);
#pragma unroll
    for (int u = 0; u < NT; ++u) {
      const int t = t0 + u * kSmallRouteWarps;
      if (t >= T) continue;
      if (lane < k) {
        s_ids[t * k + lane] = id[u];
        s_w[t * k + lane] = wt[u];
        if (p.topk_ids != nullptr) {
          p.topk_ids[t * k + lane] = id[u];
          p.topk_weights[t * k + lane] = wt[u];
        }
      }
      if (lane == 0) s_gate[t] = p.gate != nullptr ? sigmoid(gate_logit[u]) : 1.0f;
    }
  }
}

// Block b: router rows [8b, 8b + 8) (row E is the shared-expert gate) dotted
// with the x rows of the block's tokens (staged in shared memory), rounded to
// bf16 as the linear op rounds. The last block to finish routes every token
// and writes the plan (launch/moe.h). The code is kept small (kPerLane = the
// smallest per-lane logit count that holds E): unrolled over every token and
// 1024 experts it outgrew the instruction cache, whose misses then took most
// of a decode step's routing time. Grid row y takes only the tokens
// [kMaxT y, kMaxT (y + 1)) and stages only their x: staging every token's x in
// every block made each block wait on T rows of dependent loads before its
// first dot product.
//
// kMaxT = 1 (one token a block; the batch-1 instance): warp w dots row 8b + w
// with the token, each lane 16 bytes of the row at a time. kMaxT = 4 (needs
// H % 32 == 0): the block's 8 rows times its 4 tokens on tensor cores, warp w
// taking the K windows of 32 columns w, w + 8, ...; the warps' partial sums
// then add up in warp order. Dot products spend several instructions on each
// weight pair, which made the GEMV of many tokens issue-bound.
template <int kMaxT, int kPerLane>
__global__ void __launch_bounds__(256) route_small_kernel(MoeRouteSmallParams p) {
  static_assert(kMaxT == 1 || kMaxT == 4, "the GEMV forms");
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int s_ids[kSmallPairs];
  __shared__ float s_w[kSmallPairs];
  __shared__ float s_gate[kMoeSmallMaxTokens];
  __shared__ uint32_t s_mask[kMoeMaxExperts];
  __shared__ int s_off[kMoeMaxExperts];
  __shared__ int s_item[kMoeMaxExperts];
  const int T = p.tokens, H = p.hidden, E = p.experts, k = p.top_k;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int chunks = H / 8;  // 16-byte chunks of a row
  // This block's tokens [t_begin, t_end); xs holds their rows from t_begin.
  const int t_begin = static_cast<int>(blockIdx.y) * kMaxT;
  const int t_end = min(T, t_begin + kMaxT);
  uint4* xs = reinterpret_cast<uint4*>(smem);
  const uint4* xg = reinterpret_cast<const uint4*>(p.x) + static_cast<int64_t>(t_begin) * chunks;
  const int rows = E + (p.gate != nullptr ? 1 : 0);
  const int row0 = blockIdx.x * kSmallRouteWarps;
  // The form's own row: warp w's (kMaxT = 1), or lane group g's (kMaxT = 4).
  const int row = row0 + (kMaxT == 1 ? warp : lane >> 2);
  const uint16_t* w = row < E ? p.router + static_cast<int64_t>(row) * H : p.gate;
  // The first 8 weight loads of each lane (all of a row up to H = 2048) are
  // in flight while x is staged: the weights do not depend on x, and the two
  // reads then take one memory latency instead of two.
  uint4 wv[8];
  auto load_row = [&](int c0) {  // kMaxT = 1: chunks c0 + 32 j + lane
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = c0 + j * 32 + lane;
      wv[j] = ld_stream(w + c * 8, row < rows && c < chunks);
    }
  };
  const int windows = H / 32, q = lane & 3;
  auto load_windows = [&](int i0) {  // kMaxT = 4: the warp's windows i0 .. i0 + 7, its lane's 16 bytes of each
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int win = warp + kSmallRouteWarps * (i0 + j);
      wv[j] = ld_stream(w + win * 32 + q * 8, row < rows && win < windows);
    }
  };
  if constexpr (kMaxT == 1) {
    load_row(0);
  } else {
    load_windows(0);
  }
  // Launched programmatically: the weights above, which nothing writes, are
  // asked for while the kernel that writes x (the norm) still runs; x and
  // every write of this kernel come after the wait.
  wait_for_prerequisite();
  allow_dependents();  // the up kernel's blocks launch and wait for this grid
  for (int c = tid; c < (t_end - t_begin) * chunks; c += blockDim.x) xs[c] = xg[c];
  __syncthreads();

  if constexpr (kMaxT == 1) {
    if (row < rows) {
      float acc = 0.0f;
      for (int c0 = 0; c0 < chunks; c0 += 32 * 8) {
        if (c0 != 0) load_row(c0);  // else loaded above
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int c = c0 + j * 32 + lane;
          if (c < chunks) acc = dot8(wv[j], xs[c], acc);
        }
      }
      const float v = warp_sum(acc);
      if (lane == 0) p.logits[t_begin * (E + 1) + row] = round_bf(v);
    }
  } else {
    // D[8 rows (+ 8 zero rows) x 8 tokens] += W window x X window^T: lane
    // (g, q) feeds row g's and token g's 16 bytes q of each window (tokens
    // past the block's are zeros) and holds row g's sums of tokens 2q, 2q + 1.
    __shared__ float partial[kSmallRouteWarps][8][8];  // [warp][row][token]
    const int g = lane >> 2, nt = t_end - t_begin;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i0 = 0; warp + kSmallRouteWarps * i0 < windows; i0 += 8) {
      if (i0 != 0) load_windows(i0);  // else loaded above
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int win = warp + kSmallRouteWarps * (i0 + j);
        if (win < windows) {
          uint4 b = zero;  // (a conditional of two lvalues would select an address and put zero on the stack)
          if (g < nt) b = xs[g * chunks + win * 4 + q];
          mma_k32(d, wv[j], zero, b);
        }
      }
    }
    partial[warp][g][2 * q] = d[0];
    partial[warp][g][2 * q + 1] = d[1];
    __syncthreads();
    if (tid < 8 * kMaxT) {
      const int r = tid / kMaxT, u = tid % kMaxT;
      float v = 0.0f;
#pragma unroll
      for (int i = 0; i < kSmallRouteWarps; ++i) v += partial[i][r][u];
      if (row0 + r < rows && u < nt) p.logits[(t_begin + u) * (E + 1) + row0 + r] = round_bf(v);
    }
  }
  // Publish this block's logits; the last block sees every block's.
  if (!last_block_to_arrive(p.counter, static_cast<int32_t>(gridDim.x * gridDim.y))) return;

  const float* lg = p.logits;
  if constexpr (kMaxT == 1) {
    if (T == 1) return route_one_token<kPerLane>(p, lg, warp, lane);
  }
  // More tokens than warps: each warp routes its tokens t, t + 8, ... (up to
  // kRouteRowsPerWarp of them) at once, their reduction chains interleaved.
  bool routed = false;
  if constexpr (kMaxT > 1) {
    if (T > kSmallRouteWarps) {
      route_rows<kRouteRowsPerWarp<kPerLane>, kPerLane>(p, lg, warp, lane, s_ids, s_w, s_gate);
      routed = true;
    }
  }
  if (!routed) route_rows<1, kPerLane>(p, lg, warp, lane, s_ids, s_w, s_gate);
  for (int e = tid; e < E; e += blockDim.x) s_mask[e] = 0;
  __syncthreads();
  // Expert e's tokens as a bit mask over the (at most 32) tokens: its row
  // count and each row's rank come out of popcounts, in token order.
  for (int i = tid; i < T * k; i += blockDim.x) atomicOr(&s_mask[s_ids[i]], 1u << (i / k));
  __syncthreads();
  int total[2];
  block_scan_experts<2>(
      E,
      [&](int e, int c) {
        const int n = __popc(s_mask[e]);
        return c == 0 ? n : (n + kMoeItemRows - 1) / kMoeItemRows;
      },
      [&](int e, int c, int v) { (c == 0 ? s_off : s_item)[e] = v; }, total);
  if (p.expert_load != nullptr) {
    for (int e = tid; e < E; e += blockDim.x) {
      if (s_mask[e] != 0) atomicAdd(&p.expert_load[e], __popc(s_mask[e]));
    }
  }
  const int P = T * k, routed_items = total[1];
  const int shared_items = p.shared ? (T + kMoeItemRows - 1) / kMoeItemRows : 0;
  for (int e = tid; e < E; e += blockDim.x) {
    const int n = __popc(s_mask[e]);
    for (int j = 0; j * kMoeItemRows < n; ++j) {
      const int it = s_item[e] + j;
      p.plan.item_expert[it] = e;
      p.plan.item_pos[it] = s_off[e] + j * kMoeItemRows;
      p.plan.item_rows[it] = min(kMoeItemRows, n - j * kMoeItemRows);
    }
  }
  for (int j = tid; j < shared_items; j += blockDim.x) {
    p.plan.item_expert[routed_items + j] = E;
    p.plan.item_pos[routed_items + j] = P + j * kMoeItemRows;
    p.plan.item_rows[routed_items + j] = min(kMoeItemRows, T - j * kMoeItemRows);
  }
  if (tid == 0) *p.plan.num_items = routed_items + shared_items;
  for (int i = tid; i < P; i += blockDim.x) {
    const int t = i / k, e = s_ids[i];
    const int pos = s_off[e] + __popc(s_mask[e] & ((1u << t) - 1u));
    p.plan.sorted_token[pos] = t;
    p.plan.sorted_weight[pos] = s_w[i];
    int rank = 0;
    for (int j = 0; j < k; ++j) rank += s_ids[t * k + j] < e ? 1 : 0;
    p.plan.token_pos[t * k + rank] = pos;
  }
  if (p.shared) {
    for (int t = tid; t < T; t += blockDim.x) {
      p.plan.sorted_token[P + t] = t;
      p.plan.sorted_weight[P + t] = s_gate[t];
    }
  }
  if (tid == 0) *p.counter = 0;
}

// One warp per token: its top-k, and a rank among its expert's rows.
__global__ void __launch_bounds__(256) route_grouped_kernel(MoeRouteGroupedParams p) {
  const int t = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (t >= p.tokens) return;
  const int k = p.top_k;
  int id;
  float wt;
  const uint16_t* row = p.logits + static_cast<int64_t>(t) * p.logits_ld;
  warp_route([&](int e) { return bf2f(row[e]); }, p.experts, k, lane, id, wt);
  if (lane < k) {
    const int i = t * k + lane;
    p.plan.topk_ids[i] = id;
    p.plan.topk_weights[i] = wt;
    if (p.user_ids != nullptr) {
      p.user_ids[i] = id;
      p.user_weights[i] = wt;
    }
    p.plan.pair_rank[i] = atomicAdd(&p.plan.counts[id], 1);
  }
  if (lane == 0 && p.shared) {
    const int P = p.tokens * k;
    p.plan.sorted_token[P + t] = t;
    p.plan.sorted_weight[P + t] =
        p.gate_logits != nullptr ? sigmoid(bf2f(p.gate_logits[static_cast<int64_t>(t) * p.gate_ld])) : 1.0f;
  }
}

constexpr int kPlanPairsPerBlock = 2048;

// Every block turns the counts into offsets and places its share of the
// routed rows; block 0 also writes the slot table.
__global__ void __launch_bounds__(256) plan_grouped_kernel(MoePlanGroupedParams p) {
  __shared__ int s_off[kMoeMaxExperts];
  const int E = p.experts, k = p.top_k, P = p.tokens * k;
  const MoeGroupedPlan& pl = p.plan;
  int total[1];
  block_scan_experts<1>(
      E, [&](int e, int) { return pl.counts[e]; }, [&](int e, int, int v) { s_off[e] = v; }, total);
  const int end = min(P, static_cast<int>(blockIdx.x + 1) * kPlanPairsPerBlock);
  for (int i = blockIdx.x * kPlanPairsPerBlock + threadIdx.x; i < end; i += blockDim.x) {
    const int pos = s_off[pl.topk_ids[i]] + pl.pair_rank[i];
    pl.sorted_token[pos] = i / k;
    pl.sorted_weight[pos] = pl.topk_weights[i];
    pl.token_pos[i] = pos;
  }
  if (blockIdx.x != 0) return;
  auto tiles = [&](int rows) { return (rows + p.tile_rows - 1) / p.tile_rows; };
  const int up_cols = (p.inter + p.up_col_tile - 1) / p.up_col_tile;
  const int down_cols = (p.hidden + p.down_col_tile - 1) / p.down_col_tile;
  __shared__ int s_slot[kMoeMaxExperts], s_up[kMoeMaxExperts], s_down[kMoeMaxExperts];
  int sums[3];
  block_scan_experts<3>(
      E,
      [&](int e, int c) {
        const int n = pl.counts[e];
        if (c == 0) return n > 0 ? 1 : 0;
        return tiles(n) * (c == 1 ? up_cols : down_cols);
      },
      [&](int e, int c, int v) { (c == 0 ? s_slot : c == 1 ? s_up : s_down)[e] = v; }, sums);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int n = pl.counts[e];
    if (n == 0) continue;
    if (p.expert_load != nullptr) atomicAdd(&p.expert_load[e], n);
    const int s = s_slot[e];
    pl.slot_expert[s] = e;
    pl.slot_pos[s] = s_off[e];
    pl.slot_rows[s] = n;
    pl.up_item_begin[s] = s_up[e];
    pl.down_item_begin[s] = s_down[e];
  }
  if (threadIdx.x == 0) {
    int s = sums[0], up = sums[1], down = sums[2];
    if (p.shared) {
      pl.slot_expert[s] = E;
      pl.slot_pos[s] = P;
      pl.slot_rows[s] = p.tokens;
      pl.up_item_begin[s] = up;
      pl.down_item_begin[s] = down;
      up += tiles(p.tokens) * ((p.shared_inter + p.up_col_tile - 1) / p.up_col_tile);
      down += tiles(p.tokens) * down_cols;
      ++s;
    }
    *pl.num_slots = s;
    pl.up_item_begin[s] = up;
    pl.down_item_begin[s] = down;
  }
}

template <int kMaxT, int kPerLane>
void launch_route_small_instance(const MoeRouteSmallParams& p, cudaStream_t stream) {
  const int tiles = ceil_div(p.tokens, kMaxT);
  const size_t smem = static_cast<size_t>(std::min(p.tokens, kMaxT)) * p.hidden * 2;
  auto kernel = route_small_kernel<kMaxT, kPerLane>;
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  const int rows = p.experts + (p.gate != nullptr ? 1 : 0);
  // Programmatic (see the kernel's wait): its weight loads overlap the norm.
  launch_maybe_pdl(kernel, true, dim3(ceil_div(rows, kSmallRouteWarps), tiles), 256, smem, stream, p);
}

template <int kMaxT>
void launch_route_small(const MoeRouteSmallParams& p, cudaStream_t stream) {
  if (p.experts <= 32 * 8) {
    launch_route_small_instance<kMaxT, 8>(p, stream);
  } else {
    launch_route_small_instance<kMaxT, moe_detail::kRoutePerLane>(p, stream);
  }
}

}  // namespace

void launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  route_kernel<<<ceil_div(p.tokens, 4), 128, 0, stream>>>(p);
}

void launch_moe_route_small(const MoeRouteSmallParams& p, cudaStream_t stream) {
  // The tensor-core form needs whole 32-column windows; one token a block
  // serves any width.
  if (p.tokens <= 1 || p.hidden % 32 != 0) return launch_route_small<1>(p, stream);
  launch_route_small<4>(p, stream);
}

void launch_moe_route_grouped(const MoeRouteGroupedParams& p, cudaStream_t stream) {
  route_grouped_kernel<<<ceil_div(p.tokens, 8), 256, 0, stream>>>(p);
}

void launch_moe_plan_grouped(const MoePlanGroupedParams& p, cudaStream_t stream) {
  const int pairs_blocks = ceil_div(static_cast<int64_t>(p.tokens) * p.top_k, kPlanPairsPerBlock);
  const int blocks = pairs_blocks > 0 ? pairs_blocks : 1;
  plan_grouped_kernel<<<blocks, 256, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
