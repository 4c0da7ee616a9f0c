#pragma once
// Device helpers shared by the MoE kernels: the warp router (softmax, top-k,
// renormalise), block scans over experts, and the register-fed tensor-core
// step of the small-batch expert kernels.

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/moe.h"

namespace hyllm::cuda::moe_detail {

inline constexpr int kRoutePerLane = kMoeMaxExperts / 32;

// Softmax over the E logits get(u, e) of each of NT rows u in fp32, then the
// top_k (<= 32) largest probabilities (ties: the lower expert id),
// renormalised to sum 1, in descending order: lane i < top_k gets row u's
// choice i in id[u] and weight[u]. A NaN probability ranks below every
// number, so every choice is a valid, distinct expert id even for garbage rows
// (padding of a captured step). Requires E <= 32 * kPerLane.
//
// Each choice is one round of two warp reductions on the hardware's integer
// reduce (the largest key, then the lowest id holding it), not shuffle trees:
// routing is a chain of such rounds, so its latency is the router's, and NT
// rows at once interleave their chains. The probabilities are never -0, so
// their keys order as they do.
template <int NT, int kPerLane, typename Get>
__device__ __forceinline__ void warp_route_rows(Get get, int E, int top_k, int lane, int (&id)[NT],
                                                float (&weight)[NT]) {
  static_assert((kPerLane & (kPerLane - 1)) == 0, "the lane's argmax tree pairs neighbours");
  constexpr uint32_t kAll = 0xffffffffu;
  uint32_t key[NT][kPerLane];
  float top_sum[NT];
#pragma unroll
  for (int u = 0; u < NT; ++u) {
    float v[kPerLane];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = i * 32 + lane;
      v[i] = e < E ? get(u, e) : -INFINITY;
      mx = fmaxf(mx, v[i]);
    }
    // A lane's fmaxf chain from -inf never yields NaN, so the key max is exact.
    mx = from_order_key(__reduce_max_sync(kAll, order_key(mx)));
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      v[i] = i * 32 + lane < E ? expf(v[i] - mx) : 0.0f;
      sum += v[i];
    }
    sum = warp_sum(sum);
    // Keys: probabilities, NaN as -1 (below every probability), padding past
    // E as -2, taken entries 0 (below every float's key).
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const float p = v[i] / sum;
      key[u][i] = order_key(i * 32 + lane < E ? (p == p ? p : -1.0f) : -2.0f);
    }
    top_sum[u] = 0.0f;
    id[u] = 0;
    weight[u] = 0.0f;
  }
  for (int r = 0; r < top_k; ++r) {
#pragma unroll
    for (int u = 0; u < NT; ++u) {
      // The lane's largest key and its index, lowest index on ties: a tree
      // over neighbours, where the right operand's indices all exceed the left's.
      uint32_t bk[kPerLane];
      int bi[kPerLane];
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        bk[i] = key[u][i];
        bi[i] = i;
      }
#pragma unroll
      for (int d = 1; d < kPerLane; d *= 2) {
#pragma unroll
        for (int j = 0; j + d < kPerLane; j += 2 * d) {
          if (bk[j + d] > bk[j]) {
            bk[j] = bk[j + d];
            bi[j] = bi[j + d];
          }
        }
      }
      const uint32_t best = __reduce_max_sync(kAll, bk[0]);
      const uint32_t won = __reduce_min_sync(kAll, bk[0] == best ? static_cast<uint32_t>(bi[0] * 32 + lane) : kAll);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        if (static_cast<uint32_t>(i * 32 + lane) == won) key[u][i] = 0;
      }
      const float w = from_order_key(best);
      top_sum[u] += w;
      if (lane == r) {
        id[u] = static_cast<int>(won);
        weight[u] = w;
      }
    }
  }
#pragma unroll
  for (int u = 0; u < NT; ++u) weight[u] /= top_sum[u];
}

// warp_route_rows for one row of logits get(e).
template <int kPerLane = kRoutePerLane, typename Get>
__device__ __forceinline__ void warp_route(Get get, int E, int top_k, int lane, int& id, float& weight) {
  int ids[1];
  float weights[1];
  warp_route_rows<1, kPerLane>([&](int, int e) { return get(e); }, E, top_k, lane, ids, weights);
  id = ids[0];
  weight = weights[0];
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

// Asks the copy engine of the SM to bring `bytes` (a multiple of 16, from a
// 16-byte aligned address) into L2 without holding registers, so that later
// register loads of them hit L2 however late the compiler schedules them.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes));
}

// launch/moe.h: prefetches and programmatic launches only for the fewest tokens.
inline bool lean(const MoeSmallParams& p) { return p.tokens <= kMoeLeanMaxTokens; }

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

// Columns [I, hidden_ld) of an item's hidden rows, for an expert narrower
// than the widest (routed and shared intermediate sizes differ), hold zeros:
// the FP8 path quantises whole hidden rows in 128-column groups, and a zero
// never raises a group's scale, so the codes of the expert's own columns are
// those of its row alone. Columns [n0, n0 + cols) of the block's item.
__device__ __forceinline__ void zero_hidden_tail(const MoeSmallParams& p, int item, int n0, int cols, int I) {
  const int pos0 = p.plan.item_pos[item], rows = p.plan.item_rows[item];
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, col = n0 + i % cols;
    if (col >= I && col < p.hidden_ld) p.hidden[static_cast<int64_t>(pos0 + r) * p.hidden_ld + col] = 0;
  }
}

// The small regime's up kernels' end (bf16 and block-FP8 experts): warp partial sums added in warp order, SwiGLU of the
// bf16-rounded gate and up values into the item's hidden rows (zeros past I, as zero_hidden_tail).
template <int kUpWarps>
__device__ __forceinline__ void up_store(const MoeSmallParams& p, const float (&acc_g)[4], const float (&acc_u)[4],
                                         int n0, int I, int pos0, int rows) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  __shared__ float red[kUpWarps][8][32];
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    red[warp][v][lane] = acc_g[v];
    red[warp][4 + v][lane] = acc_u[v];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    float gs = red[0][v][lane], us = red[0][4 + v][lane];
#pragma unroll
    for (int w = 1; w < kUpWarps; ++w) {
      gs += red[w][v][lane];
      us += red[w][4 + v][lane];
    }
    // Accumulator v: weight row g + 8 (v / 2), item row 2q + v % 2.
    const int col = n0 + g + 8 * (v >> 1), r = 2 * q + (v & 1);
    if (r < rows && col < p.hidden_ld) {
      p.hidden[static_cast<int64_t>(pos0 + r) * p.hidden_ld + col] =
          col < I ? f2bf(silu(round_bf(gs)) * round_bf(us)) : uint16_t{0};
    }
  }
}
// The split down kernels (moe_small.cu for bf16 experts, moe_small_fp8.cu for
// block-FP8 ones). Block = kSplitCols output columns [h0, h0 + kSplitCols);
// work units (item, K half) go to kSplitWarps warps in turn, so that at decode
// every warp has one unit and one round of loads. A unit's fp32 partial sums
// go to shared memory by (row position, half); the combine adds the halves in
// order, rounds to bf16 and weighs them: a token's routed rows in ascending
// position (ascending expert id), then the shared expert's row scaled by its
// gate. The combine's tables are loaded into registers first and stored to
// shared memory after the units, so their latency hides behind the weights'.
inline constexpr int kSplitCols = 8;
inline constexpr int kSplitWarps = 16;
inline constexpr int kSplit = 2;
inline constexpr int kStageSlots = 3;  // table entries per thread: 3 * 512 >= 32 * 33 rows

// Dynamic shared memory of a split down kernel: partials [R][kSplit][kSplitCols],
// R = T * (top_k + 1), then the routing weights [R] and the tokens' row
// positions [T * top_k]. Past 48 KiB the launchers fall back to a kernel with
// bf16 rows, which also keeps R within the staged tables.
inline size_t down_split_smem(const MoeSmallParams& p) {
  const size_t R = static_cast<size_t>(p.tokens) * (p.top_k + 1);
  return R * kSplit * kSplitCols * 4 + R * 4 + static_cast<size_t>(p.tokens) * p.top_k * 4;
}

struct SplitTables {
  int pos[kStageSlots];
  float weight[kStageSlots];
};

__device__ __forceinline__ SplitTables load_split_tables(const MoeSmallParams& p, bool has_shared) {
  const int P = p.tokens * p.top_k, weights = has_shared ? P + p.tokens : P;
  SplitTables t;
#pragma unroll
  for (int j = 0; j < kStageSlots; ++j) {
    const int i = threadIdx.x + j * kSplitWarps * 32;
    t.pos[j] = i < P ? p.plan.token_pos[i] : 0;
    t.weight[j] = i < weights ? p.plan.sorted_weight[i] : 0.0f;
  }
  return t;
}

// After the block's units: stores the tables, waits for every partial, and
// writes the block's columns of every token.
__device__ __forceinline__ void split_combine(const MoeSmallParams& p, float* part, const SplitTables& tables,
                                              int h0, bool has_shared) {
  constexpr int kCols = kSplitCols;
  const int T = p.tokens, k = p.top_k, P = T * k, R = P + T, H = p.w.hidden;
  const int weights = has_shared ? R : P;
  float* weight_s = part + R * kSplit * kCols;        // [R]
  int* pos_s = reinterpret_cast<int*>(weight_s + R);  // [P]
#pragma unroll
  for (int j = 0; j < kStageSlots; ++j) {
    const int i = threadIdx.x + j * kSplitWarps * 32;
    if (i < P) pos_s[i] = tables.pos[j];
    if (i < weights) weight_s[i] = tables.weight[j];
  }
  __syncthreads();
  auto row_value = [&](int pos, int c) {
    float y = 0.0f;
#pragma unroll
    for (int h = 0; h < kSplit; ++h) y += part[(pos * kSplit + h) * kCols + c];
    return round_bf(y);
  };
  for (int i = threadIdx.x; i < T * kCols; i += blockDim.x) {
    const int t = i / kCols, c = i % kCols, h = h0 + c;
    if (h >= H) continue;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int pos = pos_s[t * k + j];
      acc = __fadd_rn(acc, __fmul_rn(weight_s[pos], row_value(pos, c)));
    }
    if (has_shared) acc = __fadd_rn(acc, __fmul_rn(weight_s[P + t], row_value(P + t, c)));
    p.out[static_cast<int64_t>(t) * H + h] = f2bf(acc);
  }
}

// A split down unit's end: lane (g, q)'s partial sums of item row g, weight
// rows 2q and 2q + 1 (accumulators 0 and 1), into the partials of half s.
__device__ __forceinline__ void split_store(float* part, const float (&acc)[4], int g, int q, int pos0, int rows,
                                            int s) {
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    if (g < rows) part[((pos0 + g) * kSplit + s) * kSplitCols + 2 * q + v] = acc[v];
  }
}

// The down kernels with bf16 rows (the fallback of the split kernels when
// their fp32 partials do not fit in shared memory): block = kDownSmallCols
// output columns [h0, h0 + kDownSmallCols), kDownSmallWarps warps taking
// items in turn; an item's rows are rounded to bf16 into shared memory by row
// position, ybuf[(T * top_k + T) * kDownSmallCols].
inline constexpr int kDownSmallCols = 16;
inline constexpr int kDownSmallWarps = 8;

inline size_t down_small_smem(const MoeSmallParams& p) {
  return static_cast<size_t>(p.tokens) * (p.top_k + 1) * kDownSmallCols * 2;
}

// Lane (g, q)'s accumulators of an item: weight rows g and g + 8 (output
// columns) by item rows 2q and 2q + 1.
__device__ __forceinline__ void down_small_store(uint16_t* ybuf, const float (&acc)[4], int g, int q, int pos0,
                                                 int rows) {
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const int col = g + 8 * (v >> 1), r = 2 * q + (v & 1);
    if (r < rows) ybuf[(pos0 + r) * kDownSmallCols + col] = f2bf(acc[v]);
  }
}

// After every item: each token's columns, its routed rows in ascending
// position (ascending expert id), then the shared expert's row scaled by its
// gate.
__device__ __forceinline__ void down_small_combine(const MoeSmallParams& p, const uint16_t* ybuf, int h0, int H,
                                                   bool has_shared) {
  __syncthreads();
  const int T = p.tokens, k = p.top_k, P = T * k;
  for (int i = threadIdx.x; i < T * kDownSmallCols; i += blockDim.x) {
    const int t = i / kDownSmallCols, c = i % kDownSmallCols, h = h0 + c;
    if (h >= H) continue;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int pos = p.plan.token_pos[t * k + j];
      acc = __fadd_rn(acc, __fmul_rn(p.plan.sorted_weight[pos], bf2f(ybuf[pos * kDownSmallCols + c])));
    }
    if (has_shared) {
      acc = __fadd_rn(acc, __fmul_rn(p.plan.sorted_weight[P + t], bf2f(ybuf[(P + t) * kDownSmallCols + c])));
    }
    p.out[static_cast<int64_t>(t) * H + h] = f2bf(acc);
  }
}

// Work item `item` of a grouped GEMM (launch/moe.h MoeGroupedPlan): its
// slot's expert (experts = the shared expert) and first row position, the
// item's rows [m0, m0 + nrows) of the slot and its column tile (a slot's
// items take the row tiles fastest).
struct GroupedItem {
  int expert;
  bool shared;
  int inter;  // the expert's intermediate size
  int pos_begin;
  int m0;
  int nrows;
  int col_tile;

  // The source of the item's A row r: a token (kUp: a row of x) or a row
  // position (a row of the hidden activations); -1 past its rows.
  template <bool kUp>
  __device__ __forceinline__ int row_source(const MoeGroupedPlan& pl, int r) const {
    if (r >= nrows) return -1;
    const int pos = pos_begin + m0 + r;
    return kUp ? pl.sorted_token[pos] : pos;
  }
};

// The plan's slot tables, which every work item's lookup reads: copied to
// shared memory once per block (stage_slot_tables), so that resolving an
// item is a handful of shared loads instead of a chain of dependent global
// ones in the middle of a pipelined k loop.
struct SlotTables {
  int* item_begin;  // [num_slots + 1]
  int* expert;      // [num_slots]
  int* pos;
  int* rows;
  int num_slots;
};

// Shared-memory bytes of the slot tables for E experts.
__host__ __device__ constexpr size_t slot_tables_bytes(int experts) {
  return static_cast<size_t>(4) * (experts + 2) * sizeof(int);
}

// Copies the tables into `smem` (slot_tables_bytes(p.w.experts), 4-byte
// aligned); every thread of the block calls it, and it ends with a barrier.
template <bool kUp>
__device__ __forceinline__ SlotTables stage_slot_tables(const MoeGroupedGemmParams& p, void* smem) {
  const MoeGroupedPlan& pl = p.plan;
  const int n = *pl.num_slots, stride = p.w.experts + 2;
  int* base = static_cast<int*>(smem);
  SlotTables t{base, base + stride, base + 2 * stride, base + 3 * stride, n};
  const int32_t* begin = kUp ? pl.up_item_begin : pl.down_item_begin;
  for (int i = threadIdx.x; i <= n; i += blockDim.x) {
    t.item_begin[i] = begin[i];
    if (i < n) {
      t.expert[i] = pl.slot_expert[i];
      t.pos[i] = pl.slot_pos[i];
      t.rows[i] = pl.slot_rows[i];
    }
  }
  __syncthreads();
  return t;
}

template <int kRows>
__device__ __forceinline__ GroupedItem grouped_item(const MoeGroupedGemmParams& p, const SlotTables& t, int item) {
  int lo = 0, hi = t.num_slots - 1;  // the last slot whose items begin at or before `item`
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (t.item_begin[mid] <= item) lo = mid;
    else hi = mid - 1;
  }
  GroupedItem it;
  it.expert = t.expert[lo];
  it.shared = it.expert == p.w.experts;
  it.inter = it.shared ? p.w.shared_inter : p.w.inter;
  it.pos_begin = t.pos[lo];
  const int rows = t.rows[lo], mtiles = (rows + kRows - 1) / kRows, local = item - t.item_begin[lo];
  it.m0 = (local % mtiles) * kRows;
  it.nrows = min(kRows, rows - it.m0);
  it.col_tile = local / mtiles;
  return it;
}

}  // namespace hyllm::cuda::moe_detail
