// The grouped regime's GEMMs for block-FP8 experts on sm_90a (launch/moe.h).
//
// The same persistent walk over the plan's work items as moe_grouped.cu
// (expert slot, 128 intermediate or 256 output columns, here always 64 rows),
// but both operands stay e4m3 in memory and in the MMAs: the rows of x as
// the producer norm quantised them, or the SwiGLU rows as the gate_up
// epilogue quantised them, and the experts' codes as stored. Prefill is
// bound by reading every expert's weights once per layer, so reading one
// byte per weight instead of expanding them to bf16 first is the whole point.
//
// A k tile is 128 codes: exactly one scale block of both operands. Each
// tile's FP8 MMAs go into a fresh fp32 accumulator that is then added to the
// result times (row scale x block scale), in one FMA. That is the CPU
// reference's per-block sum (cpu_linear.cpp) but for the rounding of the
// scales' product, and it keeps the FP8 MMAs' internal accumulation,
// narrower than fp32, to 128 products.
//
// The weight tiles come by TMA (four 64-row boxes a stage, asked for by one
// thread and counted on the stage's barrier), gate_up's A rows by cp.async
// (rows gathered by token) and down's by one more TMA box (consecutive
// positions), all from a producer warp: with one block an SM the
// kernel is bound by its warps' latency more than by memory, so the consumers
// spend their issue slots on MMAs and promotion only.
//
// The producer also copies each step's scales (the rows' activation scales
// and the two weight blocks') into the stage by cp.async, so the consumers
// read them from shared memory: loading them from global memory after
// issuing a step's MMAs puts an L2 round trip into every step's promotion,
// and that chain, not DRAM, bounds a step (docs/BENCHMARKS.md).
//
// Neither of two forms that needed the registers of a producer warpgroup
// (setmaxnreg) pays for itself once the scales are staged: k tiles taken in
// pairs, promoting one while the other's MMAs run, and 128-row items that
// read each weight tile once per 128 rows; nor does issuing a step as two
// m64n64 halves so that one half is promoted while the other's MMAs run, in
// the registers of one partial (docs/BENCHMARKS.md).
//
// Warpgroup w multiplies the item's 64 A rows by B rows [128 w, 128 w + 128):
// for gate_up those are gate then up rows of intermediate columns
// n0 + 64 w .. n0 + 64 w + 63, so each thread holds the gate and up values
// of the same column and SwiGLU and its quantisation run in the epilogue;
// for down they are
// output columns n0 + 128 w ... Each warpgroup's 128 weight rows lie in one
// 128-row scale block (n0 is a multiple of 128, so are I and H).
#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/dynamic_smem.cuh"
#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/moe_common.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma.cuh"

namespace hyllm::cuda {
namespace {

using namespace wgmma;

constexpr int kBK = 128;  // e4m3 codes per 128-byte row of a k tile = one scale block
constexpr int kRows = 64;  // the A rows of an item: one warpgroup MMA's
constexpr int kBRows = 256;
constexpr int kThreads = 256;  // the two consumer warpgroups
constexpr int kProducerThreads = 32;
constexpr int kStages = 5;
constexpr int kAStage = kRows * kRowBytes;
constexpr int kBStage = kBRows * kRowBytes;
constexpr int kStageBytes = kAStage + kBStage;
constexpr size_t kStagesBytes = static_cast<size_t>(kStages) * kStageBytes;
constexpr int kBoxRows = 64;  // weight rows per TMA box; a stage's B tile is kBRows / kBoxRows boxes
static_assert(kMoeUpColTile == 128 && kMoeDownColTile == kBRows, "tile shapes");
static_assert(kBK == kFp8Group, "a k tile is one scale block");

// The stages (1024-aligned, hence the slack), then the slot tables.
size_t smem_bytes(int experts) { return kStagesBytes + 1024 + moe_detail::slot_tables_bytes(experts); }

// One work item's operands. A block's items form one stream of (item, k
// tile) steps; the copies run kStages - 1 steps ahead of the MMAs across item
// boundaries, so an item's first tiles arrive while the previous item's last
// ones are multiplied and its epilogue runs, and a short item (a down item is
// I / 128 k tiles) never waits for a refilled pipeline.
template <bool kUp>
struct ItemOperands {
  moe_detail::GroupedItem it;
  int n0;
  int kblocks;
  int wrow0;        // the expert's first row in its weight map (the shared expert has a map of its own)
  const float* ws;  // its block scales, [rows / 128][K / 128]

  __device__ __forceinline__ ItemOperands(const MoeGroupedGemmParams& p, const moe_detail::SlotTables& t, int item) {
    it = moe_detail::grouped_item<kRows>(p, t, item);
    n0 = it.col_tile * (kUp ? kMoeUpColTile : kMoeDownColTile);
    kblocks = (kUp ? p.w.hidden : it.inter) / kBK;
    const int64_t e = it.expert;
    wrow0 = it.shared ? 0 : static_cast<int>(e * (kUp ? 2 * it.inter : p.w.hidden));
    if (kUp) {
      ws = it.shared ? p.w.shared_gate_up_scale : p.w.gate_up_scale + e * p.w.gate_up_scale_stride;
    } else {
      ws = it.shared ? p.w.shared_down_scale : p.w.down_scale + e * p.w.down_scale_stride;
    }
  }
  __device__ __forceinline__ int row_source(const MoeGroupedPlan& pl, int r) const {
    return it.template row_source<kUp>(pl, r);
  }
};

// What the consumers need of an item to store its result, staged by the
// producer beside each step's scales (so that the consumers never resolve
// items): the item's first output column, its rows, the position of its
// first row, and flags: kLastStep on the item's last k step, kStored when
// its columns are stored (gate_up: below the expert's intermediate size).
struct StagedItem {
  int n0;
  int nrows;
  int pos0;
  int flags;
};
constexpr int kLastStep = 1, kStored = 2;

// A barrier of the two consumer warpgroups alone (the producer warp does not
// take part); barrier 0 is __syncthreads'.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory"); }

// The up epilogue: SwiGLU of the gate and up accumulators, rounded to bf16
// as the CPU reference's hidden rows, quantised straight to e4m3 codes and a
// scale per (row, 128 columns) with the CPU quantiser's arithmetic
// (fp8_common.cuh). The tile's 128 columns are one scale group, split
// between the two warpgroups, which exchange their row maxima through
// s_amax. Every consumer thread calls it (it has barriers).
__device__ __forceinline__ void up_epilogue_quantize(const MoeGroupedGemmParams& p, const StagedItem& out,
                                                     const float (&acc)[64], float (*s_amax)[kRows]) {
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int r0 = warp * 16 + (lane >> 2);
  // h[j]: accumulator j's column (gate in acc[j], up in acc[j + 32]).
  float h[32];
  float amax[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    h[j] = round_bf(silu(round_bf(acc[j])) * round_bf(acc[j + 32]));
    amax[(j >> 1) & 1] = fmaxf(amax[(j >> 1) & 1], fabsf(h[j]));
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    amax[i] = fmaxf(amax[i], __shfl_xor_sync(0xffffffffu, amax[i], 1));
    amax[i] = fmaxf(amax[i], __shfl_xor_sync(0xffffffffu, amax[i], 2));
    if ((lane & 3) == 0) s_amax[wg][r0 + 8 * i] = amax[i];
  }
  consumers_sync();
  // The group maxima leave s_amax before the second barrier: with no block
  // barrier in the k loop, a warp may reach the next item's epilogue while
  // another still reads this one's.
  float row_amax[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) row_amax[i] = fmaxf(s_amax[0][r0 + 8 * i], s_amax[1][r0 + 8 * i]);
  consumers_sync();
  // Every column of the group is below I or none is (I and n0 are multiples of 128).
  if (!(out.flags & kStored)) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = r0 + 8 * i;
    const float s = __fdiv_rn(fmaxf(row_amax[i], 1e-10f), 448.0f);
    const Fp8GroupDivisor divisor(s);  // h holds bf16 values
    const int64_t pos = out.pos0 + r;
    // Accumulators j, j + 1 of row r (j = 2 i + 4 g): columns 8 g + 2 q, +1.
    // words[k]: the codes of column groups 2 k and 2 k + 1 (16 bits each);
    // after the quad transpose, words[t] holds thread t's codes of groups
    // 2 q and 2 q + 1, which byte permutes order into those two groups' 16
    // consecutive bytes.
    uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int j0 = 2 * i + 8 * k, j1 = j0 + 4;
      const uint32_t c0 = e4m3_code(divisor.divide(h[j0])) | e4m3_code(divisor.divide(h[j0 + 1])) << 8;
      const uint32_t c1 = e4m3_code(divisor.divide(h[j1])) | e4m3_code(divisor.divide(h[j1 + 1])) << 8;
      words[k] = c0 | c1 << 16;
    }
    quad_transpose(words, lane & 3);
    if (r >= out.nrows) continue;
    if (wg == 0 && (lane & 3) == 0) p.hidden_scale[(out.n0 / kBK) * p.hidden_scale_ld + pos] = s;
    uint8_t* dst = p.hidden_q + pos * p.hidden_ld + out.n0 + 64 * wg + 16 * (lane & 3);
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(__byte_perm(words[0], words[1], 0x5410), __byte_perm(words[2], words[3], 0x5410),
                   __byte_perm(words[0], words[1], 0x7632), __byte_perm(words[2], words[3], 0x7632));
  }
}

// The down epilogue: the item's outputs as bf16 rows of y. A quad's four
// threads hold 2 of every 8 consecutive columns of their two rows; a quad
// transpose per 4 column groups gives each thread 8 consecutive columns, so
// that it stores 16 bytes at once: 4-byte pieces of rows throttle the
// load-store queue in an epilogue that comes every 4 k tiles.
__device__ __forceinline__ void down_epilogue_store(const MoeGroupedGemmParams& p, const StagedItem& out,
                                                    const float (&acc)[64]) {
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, q = lane & 3;
  const int r0 = warp * 16 + (lane >> 2);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Row r0 + 8 h: accumulators 4 g + 2 h, +1 are columns 8 g + 2 q, +1.
    const int r = r0 + 8 * h;
    const int64_t pos = out.pos0 + r;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      // cols[i]: this thread's pair of column group 4 m + i, then (after the
      // transpose) thread i's pair of group 4 m + q: columns 2 i, 2 i + 1.
      uint32_t cols[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) cols[i] = pack_bf16(acc[16 * m + 4 * i + 2 * h], acc[16 * m + 4 * i + 2 * h + 1]);
      quad_transpose(cols, q);
      const int col = out.n0 + 128 * wg + 8 * (4 * m + q);
      if (r < out.nrows && col < p.w.hidden) {
        *reinterpret_cast<uint4*>(p.y + pos * p.w.hidden + col) = make_uint4(cols[0], cols[1], cols[2], cols[3]);
      }
    }
  }
}

// kUp: A = x's codes gathered by token, output the SwiGLU rows' codes and
// scales. Otherwise A = the hidden rows' codes, output y.
// wmap: the routed experts' codes as one [experts x rows, K] byte matrix
// (gate_up: [E * 2I, H], down: [E * H, I]); smap: the shared expert's.
//
// Warp-specialised: warps 0-7 (two consumer warpgroups) only wait, multiply
// and promote; warp 8 (the producer) fills the stages. A stage is full when
// its weight boxes have landed (TMA bytes on the `full` barrier, with the
// producer's lane 0 arriving as it asks for them) and the producer's 32
// lanes have arrived after their A row and scale copies completed and they
// fenced them for the async proxy; it is empty again when the 8 consumer
// warps have arrived after their MMAs on it and their reads of its scales.
// Nothing in the k loop waits at a block barrier.
template <bool kUp>
__global__ void __launch_bounds__(kThreads + kProducerThreads, 1)
    grouped_fp8_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap smap,
                       const __grid_constant__ CUtensorMap amap, const MoeGroupedGemmParams p) {
#ifdef HYLLM_WGMMA
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  __shared__ float s_amax[2][kRows];
  __shared__ uint64_t full[kStages], empty[kStages];
  // Step s's scales, in stage s % kStages: the A rows' (invalid past the
  // item's rows, whose sums are never stored), then the two weight blocks'
  // (gate_up: the gate and up rows' block; down: warpgroup w's columns').
  __shared__ float s_scales[kStages][kRows + 2];
  // Step s's item, in stage s % kStages (StagedItem), written by the
  // producer's lane 0 before its arrival on the stage's `full` barrier.
  __shared__ StagedItem s_items[kStages];
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&wmap);
    prefetch_tensor_map(&smap);
    if (!kUp) prefetch_tensor_map(&amap);
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 32 + 1);
      mbar_init(&empty[i], kThreads / 32);
    }
    mbar_init_fence();
  }
  // (stage_slot_tables ends with a barrier, after which the barriers are used.)
  const MoeGroupedPlan& pl = p.plan;
  const moe_detail::SlotTables tables = moe_detail::stage_slot_tables<kUp>(p, smem + kStagesBytes);
  const int total = tables.item_begin[tables.num_slots];
  const int tid = threadIdx.x, lane = tid & 31;

  if (tid >= kThreads) {
    // The producer. Lane l copies A rows l + 32 h's scales and, for gate_up,
    // the rows themselves (gathered by token) by cp.async; down's A rows are
    // consecutive positions and come as one TMA box with the weights. Rows
    // past the item's are not copied (or hold the next item's rows or
    // zeros): their products land in accumulator rows that are never
    // stored. Its copies of step n are waited for at step n + kLag, so that
    // several steps' copies are in flight. A stage counts as full only after
    // that wait, which comes when the producer has the stage of step n + kLag
    // back: the smaller the lag, the earlier a stage fills, as long as its
    // copies (L2 hits, mostly) are done by then (docs/BENCHMARKS.md).
    constexpr int kLag = kStages - 3;
    constexpr int kCopyRows = kRows / 32;
    const float* as = kUp ? p.x_scale : p.hidden_scale;
    const int64_t as_ld = kUp ? p.x_scale_ld : p.hidden_scale_ld;
    int n = 0;  // steps asked for so far
    const LaggedCopyArrivals<kStages, kLag> copies{full};
    // Items are resolved one ahead: the next item's row sources (global loads
    // for gate_up) are asked for before this item's copies, so that an item
    // switch does not hold back the copies, and with them the lagged arrivals
    // of the previous item's last steps, for a memory round trip.
    auto resolve = [&](int item, int (&src)[kCopyRows]) {
      const ItemOperands<kUp> op(p, tables, item < total ? item : blockIdx.x);
#pragma unroll
      for (int h = 0; h < kCopyRows; ++h) src[h] = item < total ? op.row_source(pl, lane + 32 * h) : -1;
    };
    int next_src[kCopyRows];
    resolve(blockIdx.x, next_src);
    for (int item = blockIdx.x; item < total; item += gridDim.x) {
      const ItemOperands<kUp> op(p, tables, item);
      int src[kCopyRows];
#pragma unroll
      for (int h = 0; h < kCopyRows; ++h) src[h] = next_src[h];
      resolve(item + gridDim.x, next_src);
      const CUtensorMap* map = op.it.shared ? &smap : &wmap;
      // The weight scale rows: up, the gate and up rows' blocks; down, the two
      // warpgroups' column blocks (the second past H only when H is an odd
      // number of blocks: its columns are not stored, so it is not read).
      const int sb_row0 = op.n0 / kBK;
      const int sb_row1 = kUp ? (op.it.inter + op.n0) / kBK : sb_row0 + 1;
      const bool sb_row1_valid = kUp || (sb_row1 + 1) * kBK <= p.w.hidden;
      for (int kt = 0; kt < op.kblocks; ++kt, ++n) {
        const int st = n % kStages;
        if (n >= kStages) mbar_wait(&empty[st], static_cast<uint32_t>(((n / kStages) & 1) ^ 1));
        uint8_t* sa = smem + st * kStageBytes;
        uint8_t* sb = sa + kAStage;
        const int64_t k0 = static_cast<int64_t>(kt) * kBK;
        if constexpr (kUp) {
#pragma unroll
          for (int h = 0; h < kCopyRows; ++h) {
            if (src[h] < 0) continue;
            const uint8_t* row = p.xq + src[h] * static_cast<int64_t>(p.w.hidden) + k0;
#pragma unroll
            for (int c = 0; c < 8; ++c) cp_async16(sa + swizzled(lane + 32 * h, c), row + c * 16, true);
          }
        }
#pragma unroll
        for (int h = 0; h < kCopyRows; ++h) {
          if (src[h] >= 0) cp_async4(&s_scales[st][lane + 32 * h], as + kt * as_ld + src[h]);
        }
        if (lane == 0) cp_async4(&s_scales[st][kRows], op.ws + static_cast<int64_t>(sb_row0) * op.kblocks + kt);
        if (lane == 1 && sb_row1_valid) {
          cp_async4(&s_scales[st][kRows + 1], op.ws + static_cast<int64_t>(sb_row1) * op.kblocks + kt);
        }
        cp_async_commit();
        if (lane == 0) {
          const bool stored = !kUp || op.n0 < op.it.inter;
          s_items[st] = StagedItem{op.n0, op.it.nrows, op.it.pos_begin + op.it.m0,
                                   (kt == op.kblocks - 1 ? kLastStep : 0) | (stored ? kStored : 0)};
          // Box b holds B rows [64 b, 64 b + 64): for gate_up, gate rows when
          // b is even and up rows when odd, intermediate columns n0 + 64 (b / 2)
          // on (n0 + 128 <= I: both multiples of 128); for down, output
          // columns n0 + 64 b on (rows past H read the next expert's or zeros,
          // and their columns are not stored).
          mbar_expect_bytes(&full[st], kUp ? kBStage : kBStage + kAStage);
          if (!kUp) tma_load_box(sa, &amap, &full[st], static_cast<int>(k0), op.it.pos_begin + op.it.m0);
#pragma unroll
          for (int b = 0; b < kBRows / kBoxRows; ++b) {
            const int row = kUp ? ((b & 1) ? op.it.inter : 0) + op.n0 + kBoxRows * (b >> 1) : op.n0 + kBoxRows * b;
            tma_load_box(sb + b * kBoxRows * kRowBytes, map, &full[st], static_cast<int>(k0), op.wrow0 + row);
          }
        }
        copies.step_committed(n);
      }
    }
    copies.finish(n);
    return;
  }

  const int wg = tid >> 7, warp = (tid >> 5) & 3;
  // This thread's accumulator rows (j / 2 even, odd).
  const int r0 = warp * 16 + (lane >> 2);
  // The block's items, one after another as the producer stages them: the
  // consumers count them and take each one's output from its last step's
  // StagedItem, so they never resolve an item themselves.
  const int items = blockIdx.x < total ? (total - 1 - blockIdx.x) / static_cast<int>(gridDim.x) + 1 : 0;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  int step = 0;  // this block's steps so far: step s's tiles are in stage s % kStages
#pragma unroll 1
  for (int done = 0; done < items; ++step) {
    const int st = step % kStages;
    mbar_wait(&full[st], static_cast<uint32_t>((step / kStages) & 1));
    // The step's MMAs into a fresh partial accumulator (one commit group).
    const uint8_t* stage = smem + st * kStageBytes;
    const uint64_t da = smem_desc(stage);
    const uint64_t db = smem_desc(stage + kAStage + wg * 128 * kRowBytes);
    float part[64];
    fence_operands(part);
    fence();
#pragma unroll
    for (int k32 = 0; k32 < kBK / 32; ++k32) m64n128k32_e4m3(part, da + 2 * k32, db + 2 * k32, k32);
    commit();
    // The scale products and the step's item, read while the MMAs run and
    // before the stage goes back: one scale per (row, weight block), so a
    // single FMA per accumulator. Up: the gate columns take the first weight
    // block, the up columns the second; down: warpgroup w's.
    const float* sc = s_scales[st];
    const float sa0 = sc[r0], sa1 = sc[r0 + 8];
    const float sb0 = sc[kRows + (kUp ? 0 : wg)], sb1 = kUp ? sc[kRows + 1] : sb0;
    const float s00 = sa0 * sb0, s10 = sa1 * sb0, s01 = sa0 * sb1, s11 = sa1 * sb1;
    const StagedItem out = s_items[st];
    wait<0>();
    // This warp's MMAs on the stage are complete: it goes back.
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[st]);
    // The partial sums join the result. Accumulator j: row r0 + 8 ((j / 2) % 2),
    // column 8 (j / 4) + 2 (lane % 4) + j % 2.
    fence_operands(part);
#pragma unroll
    for (int j = 0; j < 64; ++j) {
      const bool odd_row = (j >> 1) & 1, second = kUp && j >= 32;
      acc[j] = fmaf(part[j], odd_row ? (second ? s11 : s10) : (second ? s01 : s00), acc[j]);
    }
    if (out.flags & kLastStep) {
      if constexpr (kUp) {
        up_epilogue_quantize(p, out, acc, s_amax);
      } else {
        down_epilogue_store(p, out, acc);
      }
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      ++done;
    }
  }
#endif
}

template <bool kUp>
bool launch_grouped_fp8(const MoeGroupedGemmParams& p, int max_items, cudaStream_t stream) {
  const MoeExpertPtrs& w = p.w;
  const int64_t E = w.experts, H = w.hidden, I = w.inter, Is = w.shared_inter;
  CUtensorMap wmap, smap;
  if (!encode_swizzled_byte_map(&wmap, kUp ? w.gate_up_q : w.down_q, E * (kUp ? 2 * I : H), kUp ? H : I, kBoxRows,
                                kRowBytes))
    return false;
  if (!w.has_shared()) {
    smap = wmap;  // no item reads it
  } else if (!encode_swizzled_byte_map(&smap, kUp ? w.shared_gate_up_q : w.shared_down_q, kUp ? 2 * Is : H,
                                       kUp ? H : Is, kBoxRows, kRowBytes)) {
    return false;
  }
  // Down's A: the hidden rows' codes, [T * top_k (+ T with a shared expert), hidden_ld].
  CUtensorMap amap = wmap;
  const int64_t hidden_rows = static_cast<int64_t>(p.tokens) * (p.top_k + (w.has_shared() ? 1 : 0));
  if (!kUp && !encode_swizzled_byte_map(&amap, p.hidden_q, hidden_rows, p.hidden_ld, kRows, kRowBytes)) return false;
  const int grid = p.grid < max_items ? p.grid : max_items;
  if (grid <= 0) return true;
  const size_t smem = smem_bytes(p.w.experts);
  auto kernel = grouped_fp8_kernel<kUp>;
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<grid, kThreads + kProducerThreads, smem, stream>>>(wmap, smap, amap, p);
  return true;
}

}  // namespace

bool launch_moe_up_grouped_fp8(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  return launch_grouped_fp8<true>(p, p.max_up_items, stream);
}

bool launch_moe_down_grouped_fp8(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  return launch_grouped_fp8<false>(p, p.max_down_items, stream);
}

}  // namespace hyllm::cuda
