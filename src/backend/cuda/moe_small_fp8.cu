// The small regime's expert kernels for block-FP8 experts (launch/moe.h):
// the same plan, grids, launch choices and register-fed streaming as
// moe_small.cu, on e4m3 tensor cores (mma m16n8k32). Each 128-column block's exact product is
// scaled as ops.h linear says, acc += (P * s_x) * s_w: up_small_fp8 reads x
// quantised by its producer (xq), the down kernels read the hidden rows
// quantised once by quantize_fp8 between the two (launch/moe.h hidden_q):
// quantising them inside the down kernels would repeat the work in every one
// of their H / 8 blocks.
#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/dynamic_smem.cuh"
#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/moe_common.cuh"

namespace hyllm::cuda {
namespace {

using moe_detail::down_small_combine;
using moe_detail::down_small_smem;
using moe_detail::down_small_store;
using moe_detail::down_split_smem;
using moe_detail::kDownSmallCols;
using moe_detail::kDownSmallWarps;
using moe_detail::few_items;
using moe_detail::kSplit;
using moe_detail::kSplitCols;
using moe_detail::kSplitWarps;
using moe_detail::ld_stream;
using moe_detail::ld_vec;
using moe_detail::lean;
using moe_detail::load_split_tables;
using moe_detail::prefetch_l2;
using moe_detail::split_combine;
using moe_detail::split_store;
using moe_detail::up_store;
using moe_detail::zero_hidden_tail;
using moe_detail::SplitTables;

constexpr int kUpCols = 16;  // warps per up block: 16 for few work items, else 4
constexpr int kBlock = 128;  // FP8 scale block (columns)
constexpr int kUnitBlocks = 2;  // K blocks a split down unit loads at once

// What an up block of `item` (expert e, gate rows [n0, n0 + 16)) reads
// besides the weights: the weight scale rows of its gate and up blocks, lane
// (g, q)'s token row of codes (token g of the item; zeros past its rows) and
// the tokens of its accumulator columns 2q and 2q + 1 (whose scales it reads).
struct UpInputs {
  const float* ws_gate;
  const float* ws_up;
  const uint8_t* xr;
  int pos0, rows;
  int t0, t1;
  bool vx;
};

__device__ __forceinline__ UpInputs up_inputs(const MoeSmallParams& p, int item, int e, bool shared, int I, int n0,
                                              int Hb) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  UpInputs in;
  const float* ws = shared ? p.w.shared_gate_up_scale : p.w.gate_up_scale + e * p.w.gate_up_scale_stride;
  in.ws_gate = ws + (n0 / kBlock) * Hb;
  in.ws_up = ws + ((I + n0) / kBlock) * Hb;
  in.pos0 = p.plan.item_pos[item];
  in.rows = p.plan.item_rows[item];
  in.vx = g < in.rows;
  in.xr = p.xq + static_cast<int64_t>(in.vx ? p.plan.sorted_token[in.pos0 + g] : 0) * p.w.hidden;
  const int c0 = 2 * q, c1 = 2 * q + 1;
  in.t0 = c0 < in.rows ? p.plan.sorted_token[in.pos0 + c0] : 0;
  in.t1 = c1 < in.rows ? p.plan.sorted_token[in.pos0 + c1] : 0;
  return in;
}

// Block (item, 16 intermediate columns), warps splitting the 128-column
// blocks of K: gate rows [n0, n0 + 16) and up rows [I + n0, ...) of the
// item's expert times its tokens' codes; SwiGLU of the bf16-rounded sums. As
// moe_small.cu's up kernel, the expert id is read beside the item count and
// a warp's first weight block is loaded before the item's tokens, codes and
// scales, which the weights do not depend on; each next block is in flight
// while one is multiplied.
template <int kUpWarps, bool kPrefetch>
__global__ void __launch_bounds__(kUpWarps * 32) up_small_fp8_kernel(MoeSmallParams p) {
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
  if (n0 >= I) {
    zero_hidden_tail(p, item, n0, kUpCols, I);
    return;
  }
  const int H = p.w.hidden, Hb = (H + kBlock - 1) / kBlock;
  const uint8_t* gate = shared ? p.w.shared_gate_up_q : p.w.gate_up_q + e * p.w.gate_up_stride;
  const uint8_t* up = gate + static_cast<int64_t>(I) * H;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  if constexpr (kPrefetch) {  // one weight row per lane of warp 0
    const int row = n0 + (lane & 15);
    if (warp == 0 && row < I && H % 16 == 0) {
      prefetch_l2((lane < 16 ? gate : up) + static_cast<int64_t>(row) * H, static_cast<uint32_t>(H));
    }
  }
  const bool v0 = n0 + g < I, v1 = n0 + g + 8 < I;
  const int64_t r0 = v0 ? n0 + g : 0, r1 = v1 ? n0 + g + 8 : 0;
  const uint8_t *g0 = gate + r0 * H, *g1 = gate + r1 * H, *u0 = up + r0 * H, *u1 = up + r1 * H;
  const int b_begin = warp * Hb / kUpWarps, b_end = (warp + 1) * Hb / kUpWarps;
  uint4 a[2][4];
  auto load_weights = [&](int kb) {
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const int k0 = kb * kBlock + w * 64 + q * 16;
      const bool ok = kb < b_end && k0 < H;
      a[w][0] = ld_stream(g0 + k0, ok && v0);
      a[w][1] = ld_stream(g1 + k0, ok && v1);
      a[w][2] = ld_stream(u0 + k0, ok && v0);
      a[w][3] = ld_stream(u1 + k0, ok && v1);
    }
  };
  load_weights(b_begin);
  const UpInputs in = up_inputs(p, item, e, shared, I, n0, Hb);
  const int64_t ld = p.xq_scale_ld;
  float acc_g[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int kb = b_begin; kb < b_end; ++kb) {
    uint4 b[2];
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const int k0 = kb * kBlock + w * 64 + q * 16;
      b[w] = ld_vec(in.xr + k0, k0 < H && in.vx);
    }
    const float sx0 = p.xq_scale[kb * ld + in.t0], sx1 = p.xq_scale[kb * ld + in.t1];
    const float swg = in.ws_gate[kb], swu = in.ws_up[kb];
    float pg[4] = {0.0f, 0.0f, 0.0f, 0.0f}, pu[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      mma_k64(pg, a[w][0], a[w][1], b[w]);
      mma_k64(pu, a[w][2], a[w][3], b[w]);
    }
    if (kb + 1 < b_end) load_weights(kb + 1);
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const float sx = (v & 1) ? sx1 : sx0;
      acc_g[v] += (pg[v] * sx) * swg;
      acc_u[v] += (pu[v] * sx) * swu;
    }
  }
  up_store<kUpWarps>(p, acc_g, acc_u, n0, I, in.pos0, in.rows);
}

// The up kernel for the fewest work items (decode of one or two sequences),
// with the block's weight rows brought into shared memory by the copy engine.
// Why: at that size the register-fed kernel's 16-warp blocks need so many
// registers that only one fits an SM, and its grid runs in several waves,
// each paying a full memory latency. Here each of kWarps warps asks for its
// K share of the block's 16 gate and 16 up rows with one bulk copy per row
// (no registers held while they fly), so every block of the grid is resident
// and every weight byte of the step is requested at once.
//
// Shared memory: a header of barriers (one per warp), then per warp the 32
// rows (slot r: gate row r for r < 16, up row r - 16 otherwise) of `span`
// bytes, even slots in one half and odd slots in the other, which starts 64
// bytes further in the bank space: lanes (g, q) and (g + 1, q) of a
// quarter-warp read rows of opposite parity and so different banks.
constexpr int kBulkSlots = 2 * kUpCols;
constexpr int kBulkMaxWarpBlocks = 4;  // K blocks per warp (the x codes held in registers)
constexpr int kBulkHeader = 128;

__host__ __device__ inline int bulk_span(int H, int warps) { return (H / kBlock + warps - 1) / warps * kBlock; }
__host__ __device__ inline int bulk_warp_bytes(int span) { return kBulkSlots * span + 64; }
__device__ __forceinline__ int bulk_slot_offset(int slot, int span) {
  return (slot >> 1) * span + (slot & 1) * (kUpCols * span + 64);
}

template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32) up_bulk_fp8_kernel(MoeSmallParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
  wait_for_prerequisite();  // the plan (see up_small_fp8_kernel)
  allow_dependents();
  const int item = blockIdx.x;
  const int items = *p.plan.num_items, e = p.plan.item_expert[item];
  if (item >= items) return;
  const bool shared = e == p.w.experts;
  const int I = shared ? p.w.shared_inter : p.w.inter;
  const int n0 = blockIdx.y * kUpCols;
  if (n0 >= I) {
    zero_hidden_tail(p, item, n0, kUpCols, I);
    return;
  }
  const int H = p.w.hidden, Hb = H / kBlock, span = bulk_span(H, kWarps);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int b_begin = warp * Hb / kWarps, b_end = (warp + 1) * Hb / kWarps;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem) + warp;
  uint8_t* rows_s = smem + kBulkHeader + warp * bulk_warp_bytes(span);
  const uint8_t* gate = shared ? p.w.shared_gate_up_q : p.w.gate_up_q + e * p.w.gate_up_stride;
  const int valid_rows = min(kUpCols, I - n0);
  const uint32_t bytes = static_cast<uint32_t>(b_end - b_begin) * kBlock;
  if (lane == 0) {
    mbar_init(bar, 1);
    mbar_init_fence();
    mbar_expect_bytes(bar, 2 * valid_rows * bytes);  // the phase completes with the copies
  }
  __syncwarp();
  if ((lane & (kUpCols - 1)) < valid_rows && bytes > 0) {  // lane = slot
    const int64_t row = (lane < kUpCols ? 0 : I) + n0 + (lane & (kUpCols - 1));
    bulk_copy_streamed(rows_s + bulk_slot_offset(lane, span),
                       gate + row * H + b_begin * kBlock, bytes, bar);
  }
  // While the rows fly: the tokens' codes and every scale of this warp's blocks.
  const UpInputs in = up_inputs(p, item, e, shared, I, n0, Hb);
  const int64_t ld = p.xq_scale_ld;
  uint4 b[kBulkMaxWarpBlocks][2];
  float sx0[kBulkMaxWarpBlocks], sx1[kBulkMaxWarpBlocks], swg[kBulkMaxWarpBlocks], swu[kBulkMaxWarpBlocks];
#pragma unroll
  for (int j = 0; j < kBulkMaxWarpBlocks; ++j) {
    const int kb = b_begin + j;
    const bool ok = kb < b_end;
#pragma unroll
    for (int w = 0; w < 2; ++w) b[j][w] = ld_vec(in.xr + kb * kBlock + w * 64 + q * 16, ok && in.vx);
    sx0[j] = ok ? p.xq_scale[kb * ld + in.t0] : 0.0f;
    sx1[j] = ok ? p.xq_scale[kb * ld + in.t1] : 0.0f;
    swg[j] = ok ? in.ws_gate[kb] : 0.0f;
    swu[j] = ok ? in.ws_up[kb] : 0.0f;
  }
  const bool v0 = g < valid_rows, v1 = g + 8 < valid_rows;
  const uint8_t* s_g0 = rows_s + bulk_slot_offset(g, span);
  const uint8_t* s_g1 = rows_s + bulk_slot_offset(g + 8, span);
  const uint8_t* s_u0 = rows_s + bulk_slot_offset(kUpCols + g, span);
  const uint8_t* s_u1 = rows_s + bulk_slot_offset(kUpCols + g + 8, span);
  auto lds = [](const uint8_t* a, bool valid) {
    return valid ? *reinterpret_cast<const uint4*>(a) : make_uint4(0u, 0u, 0u, 0u);
  };
  float acc_g[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mbar_wait(bar, 0);
#pragma unroll
  for (int j = 0; j < kBulkMaxWarpBlocks; ++j) {
    if (b_begin + j >= b_end) break;
    float pg[4] = {0.0f, 0.0f, 0.0f, 0.0f}, pu[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const int c = j * kBlock + w * 64 + q * 16;
      mma_k64(pg, lds(s_g0 + c, v0), lds(s_g1 + c, v1), b[j][w]);
      mma_k64(pu, lds(s_u0 + c, v0), lds(s_u1 + c, v1), b[j][w]);
    }
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const float sx = (v & 1) ? sx1[j] : sx0[j];
      acc_g[v] += (pg[v] * sx) * swg[j];
      acc_u[v] += (pu[v] * sx) * swu[j];
    }
  }
  up_store<kWarps>(p, acc_g, acc_u, n0, I, in.pos0, in.rows);
}

// Lane (g, q)'s codes of hidden row `row` (zeros unless `valid`) for the
// 128-column block kb: window w's bytes [16q, 16q + 16), the layout of the
// mma operands here (A and B see the same permutation of k).
__device__ __forceinline__ void load_hidden_codes(const MoeSmallParams& p, int row, bool valid, int kb,
                                                  uint4 (&codes)[2]) {
  const uint8_t* hr = p.hidden_q + static_cast<int64_t>(row) * p.hidden_ld;
#pragma unroll
  for (int w = 0; w < 2; ++w) codes[w] = ld_vec(hr + kb * kBlock + w * 64 + (threadIdx.x & 3) * 16, valid);
}
__device__ __forceinline__ float hidden_scale(const MoeSmallParams& p, int row, int kb) {
  return p.hidden_scale[static_cast<int64_t>(kb) * p.hidden_rows + row];
}

// The bf16-row down kernel (moe_common.cuh down_small_combine) for block-FP8
// experts: each warp takes items in turn (lanes 4g..4g+3 hold row g's codes of
// a 128-column block). The fallback of down_split_fp8_kernel when its
// partials do not fit in shared memory.
__global__ void __launch_bounds__(kDownSmallWarps * 32) down_small_fp8_kernel(MoeSmallParams p) {
  extern __shared__ uint16_t ybuf[];  // down_small_smem
  const int h0 = blockIdx.x * kDownSmallCols;
  const int H = p.w.hidden, items = *p.plan.num_items;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const bool va = h0 + g < H, vb = h0 + g + 8 < H;
  for (int item = warp; item < items; item += kDownSmallWarps) {
    const int e = p.plan.item_expert[item], pos0 = p.plan.item_pos[item], rows = p.plan.item_rows[item];
    const bool shared = e == p.w.experts;
    const int I = shared ? p.w.shared_inter : p.w.inter, Ib = I / kBlock;
    const uint8_t* W = shared ? p.w.shared_down_q : p.w.down_q + e * p.w.down_stride;
    const float* ws = (shared ? p.w.shared_down_scale : p.w.down_scale + e * p.w.down_scale_stride) +
                      (h0 / kBlock) * Ib;
    const uint8_t* wa = W + static_cast<int64_t>(va ? h0 + g : 0) * I;
    const uint8_t* wb = W + static_cast<int64_t>(vb ? h0 + g + 8 : 0) * I;
    const bool vh = g < rows;
    const int r0 = pos0 + min(2 * q, rows - 1), r1 = pos0 + min(2 * q + 1, rows - 1);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int kb = 0; kb < Ib; ++kb) {
      uint4 a[2], b[2];
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const int k0 = kb * kBlock + w * 64 + q * 16;
        a[w] = ld_stream(wa + k0, va);
        b[w] = ld_stream(wb + k0, vb);
      }
      uint4 codes[2];
      load_hidden_codes(p, pos0 + (vh ? g : 0), vh, kb, codes);
      float pr[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_k64(pr, a[0], b[0], codes[0]);
      mma_k64(pr, a[1], b[1], codes[1]);
      // Columns 2q and 2q + 1 are rows 2q, 2q + 1 of the item (clamped to
      // its last row: the products of absent rows are zero and unused).
      const float s0 = hidden_scale(p, r0, kb), s1 = hidden_scale(p, r1, kb);
      const float sw = ws[kb];
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[v] += (pr[v] * ((v & 1) ? s1 : s0)) * sw;
    }
    down_small_store(ybuf, acc, g, q, pos0, rows);
  }
  down_small_combine(p, ybuf, h0, H, p.w.shared_gate_up_q != nullptr);
}

// The split down kernel (moe_common.cuh) for block-FP8 experts: a unit's
// hidden codes are the mma's m16 side (row g; rows 8..15 zero) against 8 weight
// rows as its n8 side, so that accumulators 0 and 1 of lane (g, q) are item
// row g, output columns 2q and 2q + 1, scaled by row g's block scale (this
// lane's) and the weight block's.
template <bool kPrefetch>
__global__ void __launch_bounds__(kSplitWarps * 32) down_split_fp8_kernel(MoeSmallParams p) {
  constexpr int kCols = kSplitCols;
  extern __shared__ float part[];
  const bool has_shared = p.w.shared_gate_up_q != nullptr;
  const SplitTables tables = load_split_tables(p, has_shared);
  const int h0 = blockIdx.x * kCols;
  const int H = p.w.hidden, items = *p.plan.num_items;
  if constexpr (kPrefetch) {  // every item's down rows [h0, h0 + kCols), one item per thread
    for (int item = threadIdx.x; item < items; item += blockDim.x) {
      const int e = p.plan.item_expert[item];
      const bool shared = e == p.w.experts;
      const int I = shared ? p.w.shared_inter : p.w.inter;
      const uint8_t* W = shared ? p.w.shared_down_q : p.w.down_q + e * p.w.down_stride;
      const int rows = min(kCols, H - h0);
      if (I % 16 == 0) prefetch_l2(W + static_cast<int64_t>(h0) * I, static_cast<uint32_t>(rows) * I);
    }
  }
  // Above: the plan (route_small's, complete before the up kernel began).
  // Below: the hidden rows, complete only with the up kernel.
  wait_for_prerequisite();
  allow_dependents();  // the next layer's norm may take its weights meanwhile
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const bool va = h0 + g < H;
  for (int u = warp; u < p.plan.max_items * kSplit; u += kSplitWarps) {
    const int item = u / kSplit, s = u % kSplit;
    // Read beside the item count; stale past it, and unused then.
    const int e = p.plan.item_expert[item], pos0 = p.plan.item_pos[item], rows = p.plan.item_rows[item];
    if (item >= items) break;
    const bool shared = e == p.w.experts;
    const int I = shared ? p.w.shared_inter : p.w.inter, Ib = I / kBlock;
    const uint8_t* W = shared ? p.w.shared_down_q : p.w.down_q + e * p.w.down_stride;
    const float* ws = (shared ? p.w.shared_down_scale : p.w.down_scale + e * p.w.down_scale_stride) +
                      (h0 / kBlock) * Ib;
    const uint8_t* wa = W + static_cast<int64_t>(va ? h0 + g : 0) * I;
    const bool vh = g < rows;
    const int row = pos0 + (vh ? g : 0);
    const int kb_begin = s * Ib / kSplit, kb_end = (s + 1) * Ib / kSplit;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // kUnitBlocks 128-column blocks at a time, all their loads in flight
    // before the first mma: a warp's units are a chain of memory latencies,
    // and a unit is usually exactly kUnitBlocks blocks (I = 512, kSplit = 2).
    for (int kb0 = kb_begin; kb0 < kb_end; kb0 += kUnitBlocks) {
      uint4 a[kUnitBlocks][2], codes[kUnitBlocks][2];
      float sx[kUnitBlocks], sw[kUnitBlocks];
#pragma unroll
      for (int j = 0; j < kUnitBlocks; ++j) {
        const int kb = kb0 + j;
        const bool ok = kb < kb_end;
#pragma unroll
        for (int w = 0; w < 2; ++w) a[j][w] = ld_stream(wa + kb * kBlock + w * 64 + q * 16, va && ok);
        load_hidden_codes(p, row, vh && ok, kb, codes[j]);
        sx[j] = ok ? hidden_scale(p, row, kb) : 0.0f;
        sw[j] = ok ? ws[kb] : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kUnitBlocks; ++j) {
        if (kb0 + j >= kb_end) break;
        float pr[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          mma_e4m3(pr, codes[j][w].x, 0u, codes[j][w].y, 0u, a[j][w].x, a[j][w].y);
          mma_e4m3(pr, codes[j][w].z, 0u, codes[j][w].w, 0u, a[j][w].z, a[j][w].w);
        }
        acc[0] += (pr[0] * sx[j]) * sw[j];
        acc[1] += (pr[1] * sx[j]) * sw[j];
      }
    }
    split_store(part, acc, g, q, pos0, rows, s);
  }
  split_combine(p, part, tables, h0, has_shared);
}

template <int kUpWarps>
void launch_up(const MoeSmallParams& p, dim3 grid, cudaStream_t stream) {
  auto kernel = lean(p) ? up_small_fp8_kernel<kUpWarps, true> : up_small_fp8_kernel<kUpWarps, false>;
  launch_maybe_pdl(kernel, lean(p), grid, kUpWarps * 32, 0, stream, p);
}

// Warps of the bulk-copy up kernel for these weights, or 0 when it cannot
// take them: whole 128-column blocks, at most kBulkMaxWarpBlocks per warp,
// rows the copy engine can address (16-byte aligned starts).
int up_bulk_warps(const MoeSmallParams& p) {
  const int H = p.w.hidden;
  if (!few_items(p) || H % kBlock != 0) return 0;
  const int64_t stride_bytes = p.w.gate_up_stride;
  const bool aligned = reinterpret_cast<uintptr_t>(p.w.gate_up_q) % 16 == 0 && stride_bytes % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.w.shared_gate_up_q) % 16 == 0;
  if (!aligned) return 0;
  for (int warps : {4, 8}) {
    if (H / kBlock <= warps * kBulkMaxWarpBlocks) return warps;
  }
  return 0;
}

template <int kWarps>
void launch_up_bulk(const MoeSmallParams& p, dim3 grid, cudaStream_t stream) {
  const size_t smem = kBulkHeader + size_t{kWarps} * bulk_warp_bytes(bulk_span(p.w.hidden, kWarps));
  auto kernel = up_bulk_fp8_kernel<kWarps>;
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  launch_maybe_pdl(kernel, lean(p), grid, kWarps * 32, smem, stream, p);
}

}  // namespace

void launch_moe_up_small_fp8(const MoeSmallParams& p, cudaStream_t stream) {
  const int inter = p.w.inter > p.w.shared_inter ? p.w.inter : p.w.shared_inter;
  dim3 grid(p.plan.max_items, ceil_div(inter, kUpCols));
  if (const int warps = up_bulk_warps(p); warps == 4) {
    launch_up_bulk<4>(p, grid, stream);
  } else if (warps == 8) {
    launch_up_bulk<8>(p, grid, stream);
  } else if (few_items(p)) {
    launch_up<16>(p, grid, stream);
  } else {
    launch_up<4>(p, grid, stream);
  }
}

void launch_moe_down_small_fp8(const MoeSmallParams& p, cudaStream_t stream) {
  const size_t split_smem = down_split_smem(p);
  if (split_smem <= 48 * 1024) {
    // Programmatic: its blocks read the plan (complete before up began) before they wait for up.
    auto kernel = lean(p) ? down_split_fp8_kernel<true> : down_split_fp8_kernel<false>;
    launch_maybe_pdl(kernel, lean(p), dim3(ceil_div(p.w.hidden, kSplitCols)), kSplitWarps * 32, split_smem, stream,
                     p);
    return;
  }
  down_small_fp8_kernel<<<ceil_div(p.w.hidden, kDownSmallCols), kDownSmallWarps * 32, down_small_smem(p), stream>>>(p);
}

}  // namespace hyllm::cuda
