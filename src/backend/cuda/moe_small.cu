// The small regime's expert kernels (launch/moe.h): weight rows are streamed
// once from memory straight into tensor-core fragments (no shared-memory
// staging), the work items' at most 8 rows riding along as the mma's n8
// side. Memory-bound by design: at decode batch sizes every weight byte is
// used by a handful of rows.
#include "backend/cuda/moe_common.cuh"

namespace hyllm::cuda {
namespace {

using moe_detail::down_small_combine;
using moe_detail::down_small_smem;
using moe_detail::down_small_store;
using moe_detail::down_split_smem;
using moe_detail::kDownSmallCols;
using moe_detail::kDownSmallWarps;
using moe_detail::kSplit;
using moe_detail::kSplitCols;
using moe_detail::kSplitWarps;
using moe_detail::load_split_tables;
using moe_detail::split_combine;
using moe_detail::split_store;
using moe_detail::up_store;
using moe_detail::SplitTables;
using moe_detail::few_items;
using moe_detail::ld_stream;
using moe_detail::ld_vec;
using moe_detail::lean;
using moe_detail::mma_k32;
using moe_detail::prefetch_l2;

constexpr int kUpCols = 16;   // intermediate columns per up block
// Warps per up block (the K split): 16 for few work items, else 4 (few_items).
constexpr int kUpUnroll = 4;  // 32-wide k windows in flight per warp
constexpr int kDownUnroll = 8;

// With kPrefetch: a block's share of an up work item (gate and up rows
// [n0, n0 + 16)), one weight row per lane of warp 0.
template <bool kPrefetch>
__device__ __forceinline__ void prefetch_up_rows(const uint16_t* gate, const uint16_t* up, int n0, int I, int H) {
  if constexpr (kPrefetch) {
    const int lane = threadIdx.x, row = n0 + (lane & 15);
    if (lane < 32 && row < I) {
      prefetch_l2((lane < 16 ? gate : up) + static_cast<int64_t>(row) * H, static_cast<uint32_t>(H) * 2);
    }
  }
}

// With kPrefetch: every item's down rows [h0, h0 + cols) (contiguous), one
// item per thread, before the block's warps load them.
template <bool kPrefetch>
__device__ __forceinline__ void prefetch_down_rows(const MoeSmallParams& p, int items, int h0, int cols) {
  if constexpr (kPrefetch) {
    for (int item = threadIdx.x; item < items; item += blockDim.x) {
      const int e = p.plan.item_expert[item];
      const bool shared = e == p.w.experts;
      const int I = shared ? p.w.shared_inter : p.w.inter;
      const uint16_t* W = shared ? p.w.shared_down : p.w.down + e * p.w.down_stride;
      const int rows = min(cols, p.w.hidden - h0);
      prefetch_l2(W + static_cast<int64_t>(h0) * I, static_cast<uint32_t>(rows) * I * 2);
    }
  }
}


// Block (item, column tile): the item's rows times gate rows [n0, n0 + 16)
// and up rows [I + n0, I + n0 + 16) of its expert; warps split K and their
// partial sums are added in warp order; SwiGLU of the bf16-rounded gate and
// up values goes to the item's hidden rows. The item count and the expert id
// are read together (both in flight at once), and the warp's first weight
// windows are loaded before the item's row position, its tokens and x, which
// the weights do not depend on.
template <int kUpWarps, bool kPrefetch>
__global__ void __launch_bounds__(kUpWarps * 32) up_small_kernel(MoeSmallParams p) {
  // Programmatic launch: the plan is complete past the wait; only then may
  // the down kernel begin (its blocks read the plan before their own wait).
  wait_for_prerequisite();
  allow_dependents();
  const int item = blockIdx.x;  // < max_items: item_expert[item] is in the plan's scratch
  const int items = *p.plan.num_items, e = p.plan.item_expert[item];
  if (item >= items) return;  // e may be stale past the item count; unused then
  const bool shared = e == p.w.experts;
  const int I = shared ? p.w.shared_inter : p.w.inter;
  const int n0 = blockIdx.y * kUpCols;
  if (n0 >= I) return;
  const int H = p.w.hidden;
  const uint16_t* gate = shared ? p.w.shared_gate_up : p.w.gate_up + e * p.w.gate_up_stride;
  const uint16_t* up = gate + static_cast<int64_t>(I) * H;
  prefetch_up_rows<kPrefetch>(gate, up, n0, I, H);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const bool v0 = n0 + g < I, v1 = n0 + g + 8 < I;
  const int64_t r0 = v0 ? n0 + g : 0, r1 = v1 ? n0 + g + 8 : 0;
  const uint16_t *g0 = gate + r0 * H, *g1 = gate + r1 * H, *u0 = up + r0 * H, *u1 = up + r1 * H;
  const int windows = (H + 31) / 32;
  const int w_begin = warp * windows / kUpWarps, w_end = (warp + 1) * windows / kUpWarps;
  uint4 a[kUpUnroll][4];
  auto load_weights = [&](int w) {
#pragma unroll
    for (int j = 0; j < kUpUnroll; ++j) {
      const int k0 = (w + j) * 32 + q * 8;
      const bool ok = w + j < w_end && k0 < H;
      a[j][0] = ld_stream(g0 + k0, ok && v0);
      a[j][1] = ld_stream(g1 + k0, ok && v1);
      a[j][2] = ld_stream(u0 + k0, ok && v0);
      a[j][3] = ld_stream(u1 + k0, ok && v1);
    }
  };
  load_weights(w_begin);
  const int pos0 = p.plan.item_pos[item], rows = p.plan.item_rows[item];
  const bool vx = g < rows;
  const uint16_t* xr = p.x + static_cast<int64_t>(vx ? p.plan.sorted_token[pos0 + g] : 0) * H;
  float acc_g[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int w = w_begin; w < w_end; w += kUpUnroll) {
    uint4 b[kUpUnroll];
#pragma unroll
    for (int j = 0; j < kUpUnroll; ++j) {
      const int k0 = (w + j) * 32 + q * 8;
      b[j] = ld_vec(xr + k0, w + j < w_end && k0 < H && vx);
    }
#pragma unroll
    for (int j = 0; j < kUpUnroll; ++j) {
      mma_k32(acc_g, a[j][0], a[j][1], b[j]);
      mma_k32(acc_u, a[j][2], a[j][3], b[j]);
    }
    if (w + kUpUnroll < w_end) load_weights(w + kUpUnroll);
  }
  up_store<kUpWarps>(p, acc_g, acc_u, n0, I, pos0, rows);
}

// The bf16-row down kernel (moe_common.cuh down_small_combine): each warp
// takes items in turn, down rows [h0, h0 + 16) of the item's expert times its
// hidden rows. The fallback of down_split_kernel when its fp32 partials do
// not fit in shared memory.
__global__ void __launch_bounds__(kDownSmallWarps * 32) down_small_kernel(MoeSmallParams p) {
  extern __shared__ uint16_t ybuf[];  // down_small_smem
  const int h0 = blockIdx.x * kDownSmallCols;
  const int H = p.w.hidden, items = *p.plan.num_items;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const bool va = h0 + g < H, vb = h0 + g + 8 < H;
  for (int item = warp; item < items; item += kDownSmallWarps) {
    const int e = p.plan.item_expert[item], pos0 = p.plan.item_pos[item], rows = p.plan.item_rows[item];
    const bool shared = e == p.w.experts;
    const int I = shared ? p.w.shared_inter : p.w.inter;
    const uint16_t* W = shared ? p.w.shared_down : p.w.down + e * p.w.down_stride;
    const uint16_t* wa = W + static_cast<int64_t>(va ? h0 + g : 0) * I;
    const uint16_t* wb = W + static_cast<int64_t>(vb ? h0 + g + 8 : 0) * I;
    const bool vh = g < rows;
    const uint16_t* hr = p.hidden + static_cast<int64_t>(pos0 + (vh ? g : 0)) * p.hidden_ld;
    const int windows = (I + 31) / 32;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int w = 0; w < windows; w += kDownUnroll) {
      uint4 a[kDownUnroll], b[kDownUnroll], x[kDownUnroll];
#pragma unroll
      for (int j = 0; j < kDownUnroll; ++j) {
        const int k0 = (w + j) * 32 + q * 8;
        const bool ok = w + j < windows && k0 < I;
        a[j] = ld_stream(wa + k0, ok && va);
        b[j] = ld_stream(wb + k0, ok && vb);
        x[j] = ld_vec(hr + k0, ok && vh);
      }
#pragma unroll
      for (int j = 0; j < kDownUnroll; ++j) mma_k32(acc, a[j], b[j], x[j]);
    }
    down_small_store(ybuf, acc, g, q, pos0, rows);
  }
  down_small_combine(p, ybuf, h0, H, p.w.shared_gate_up != nullptr);
}

// The split down kernel (moe_common.cuh). The hidden rows are the mma's m16
// side (rows 8..15 zero) and 8 weight rows its n8 side, so that accumulators
// 0 and 1 of lane (g, q) are item row g, output columns 2q and 2q + 1.
template <bool kPrefetch>
__global__ void __launch_bounds__(kSplitWarps * 32) down_split_kernel(MoeSmallParams p) {
  constexpr int kCols = kSplitCols;
  extern __shared__ float part[];
  const bool has_shared = p.w.shared_gate_up != nullptr;
  const SplitTables tables = load_split_tables(p, has_shared);
  const int h0 = blockIdx.x * kCols;
  const int H = p.w.hidden, items = *p.plan.num_items;
  prefetch_down_rows<kPrefetch>(p, items, h0, kCols);
  // Above: the plan (route_small's, complete before the up kernel began).
  // Below: the hidden rows, complete only with the up kernel.
  wait_for_prerequisite();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const bool va = h0 + g < H;
  for (int u = warp; u < p.plan.max_items * kSplit; u += kSplitWarps) {
    const int item = u / kSplit, s = u % kSplit;
    // Read beside the item count; stale past it, and unused then.
    const int e = p.plan.item_expert[item], pos0 = p.plan.item_pos[item], rows = p.plan.item_rows[item];
    if (item >= items) break;
    const bool shared = e == p.w.experts;
    const int I = shared ? p.w.shared_inter : p.w.inter;
    const uint16_t* W = shared ? p.w.shared_down : p.w.down + e * p.w.down_stride;
    const uint16_t* wa = W + static_cast<int64_t>(va ? h0 + g : 0) * I;
    const bool vh = g < rows;
    const uint16_t* hr = p.hidden + static_cast<int64_t>(pos0 + (vh ? g : 0)) * p.hidden_ld;
    const int windows = (I + 31) / 32;
    const int w_begin = s * windows / kSplit, w_end = (s + 1) * windows / kSplit;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int w = w_begin; w < w_end; w += kDownUnroll) {
      uint4 a[kDownUnroll], x[kDownUnroll];
#pragma unroll
      for (int j = 0; j < kDownUnroll; ++j) {
        const int k0 = (w + j) * 32 + q * 8;
        const bool ok = w + j < w_end && k0 < I;
        a[j] = ld_stream(wa + k0, ok && va);
        x[j] = ld_vec(hr + k0, ok && vh);
      }
#pragma unroll
      for (int j = 0; j < kDownUnroll; ++j) mma_k32(acc, x[j], make_uint4(0, 0, 0, 0), a[j]);
    }
    split_store(part, acc, g, q, pos0, rows, s);
  }
  split_combine(p, part, tables, h0, has_shared);
}

template <int kUpWarps>
void launch_up(const MoeSmallParams& p, dim3 grid, cudaStream_t stream) {
  auto kernel = lean(p) ? up_small_kernel<kUpWarps, true> : up_small_kernel<kUpWarps, false>;
  launch_maybe_pdl(kernel, lean(p), grid, kUpWarps * 32, 0, stream, p);
}

}  // namespace

void launch_moe_up_small(const MoeSmallParams& p, cudaStream_t stream) {
  const int inter = p.w.inter > p.w.shared_inter ? p.w.inter : p.w.shared_inter;
  dim3 grid(p.plan.max_items, ceil_div(inter, kUpCols));
  if (few_items(p)) {
    launch_up<16>(p, grid, stream);
  } else {
    launch_up<4>(p, grid, stream);
  }
}

void launch_moe_down_small(const MoeSmallParams& p, cudaStream_t stream) {
  const size_t split_smem = down_split_smem(p);
  if (split_smem <= 48 * 1024) {
    // Programmatic: its blocks read the plan (complete before up began) before they wait for up.
    auto kernel = lean(p) ? down_split_kernel<true> : down_split_kernel<false>;
    launch_maybe_pdl(kernel, lean(p), dim3(ceil_div(p.w.hidden, kSplitCols)), kSplitWarps * 32, split_smem, stream, p);
    return;
  }
  down_small_kernel<<<ceil_div(p.w.hidden, kDownSmallCols), kDownSmallWarps * 32, down_small_smem(p), stream>>>(p);
}

}  // namespace hyllm::cuda
