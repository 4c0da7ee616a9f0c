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
// thread and counted on the stage's barrier), the A rows by cp.async (rows
// gathered by token), both from a producer warp: with one block an SM the
// kernel is bound by its warps' latency more than by memory, so the consumers
// spend their issue slots on MMAs and promotion only.
//
// Staged scales (MoeGroupedGemmParams::staged_scales): the producer also
// copies each step's scales (the rows' activation scales and the two weight
// blocks') into the stage by cp.async, and the consumers read them from
// shared memory; otherwise each consumer loads its four scales from global
// memory after issuing the step's MMAs, which puts an L2 round trip into
// every step's promotion.
//
// Paired k tiles (MoeGroupedGemmParams::paired_k_tiles): each consumer issues
// two k tiles' MMAs into two partial accumulators back to back and promotes
// the first while the second's run, then the second. The extra 64 registers a
// thread come from a producer warpgroup that gives its registers to the
// consumers (setmaxnreg: one warp of it works, three exit). ptxas keeps the
// MMAs asynchronous only when each pair drains before the next is issued:
// with a rotating pair (tile kt + 2's MMAs issued before tile kt + 1's
// promotion) it serialises them.
//
// Wide row tiles (MoeGroupedGemmParams::tile_rows 128, once the experts
// average many rows): an item's 128 rows are two halves of 64 that share each
// weight tile in shared memory, so each weight tile is read once per 128 rows
// instead of once per 64. Each consumer multiplies the halves one after the
// other into the same partial accumulator and keeps an accumulator per half
// (3 x 64 registers a thread, again with the producer warpgroup's registers);
// an item whose rows fit one half skips the second half's MMAs.
//
// Warpgroup w multiplies each half's 64 A rows by B rows [128 w, 128 w + 128):
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
constexpr int kHalfRows = 64;  // the A rows of one warpgroup MMA
constexpr int kBRows = 256;
constexpr int kThreads = 256;  // the two consumer warpgroups
constexpr int kBStage = kBRows * kRowBytes;
constexpr int kBoxRows = 64;  // weight rows per TMA box; a stage's B tile is kBRows / kBoxRows boxes
// With a producer warpgroup: a block of 384 threads starts with the
// registers of its launch bound, 168 a thread (65,536 / 384, rounded down to
// 8); setmaxnreg.inc waits until the registers it asks for are free, so the
// consumers can only take what the producer gives back, or the block hangs.
constexpr int kWideLaunchRegs = 168;
constexpr int kWideProducerRegs = 56;
constexpr int kWideConsumerRegs = 224;
static_assert((kWideLaunchRegs - kWideProducerRegs) * 128 >= (kWideConsumerRegs - kWideLaunchRegs) * kThreads,
              "the consumers take more registers than the producer warpgroup gives back");
static_assert(kMoeUpColTile == 128 && kMoeDownColTile == kBRows, "tile shapes");
static_assert(kBK == kFp8Group, "a k tile is one scale block");

// A kernel form: paired k tiles, or kHalves row halves an item (1: 64 rows,
// 2: 128 rows). Both need more registers than a consumer has beside a
// producer warp, and cannot be combined (four 64-float sets).
template <bool kPaired, int kHalves>
struct Form {
  static_assert(kHalves == 1 || kHalves == 2, "64 or 128 rows an item");
  static_assert(!(kPaired && kHalves == 2), "paired k tiles take 64-row items");
  static constexpr int kRows = kHalfRows * kHalves;
  // The producer: one warp, or a whole warpgroup whose registers go to the
  // consumers (one warp of it works, three exit).
  static constexpr bool kWideProducer = kPaired || kHalves == 2;
  static constexpr int kProducerThreads = kWideProducer ? 128 : 32;
  static constexpr int kStages = kHalves == 1 ? 5 : 4;
  static constexpr int kAStage = kRows * kRowBytes;
  static constexpr int kStageBytes = kAStage + kBStage;
  static constexpr size_t kStagesBytes = static_cast<size_t>(kStages) * kStageBytes;
  // The stages (1024-aligned, hence the slack), then the slot tables.
  static size_t smem_bytes(int experts) { return kStagesBytes + 1024 + moe_detail::slot_tables_bytes(experts); }
};


// One work item's operands. A block's items form one stream of (item, k
// tile) steps; the copies run kStages - 1 steps ahead of the MMAs across item
// boundaries, so an item's first tiles arrive while the previous item's last
// ones are multiplied and its epilogue runs, and a short item (a down item is
// I / 128 k tiles) never waits for a refilled pipeline.
template <bool kUp, int kRows>
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

// A barrier of the two consumer warpgroups alone (the producer warp does not
// take part); barrier 0 is __syncthreads'.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory"); }

// The up epilogue: SwiGLU of the gate and up accumulators, rounded to bf16
// as the CPU reference's hidden rows, quantised straight to e4m3 codes and a
// scale per (row, 128 columns) with the CPU quantiser's arithmetic
// (fp8_common.cuh). The tile's 128 columns are one scale group, split
// between the two warpgroups, which exchange their row maxima through
// s_amax. Every consumer thread calls it (it has barriers).
// `half`: the accumulators hold the item's rows [64 half, 64 half + 64).
template <int kRows>
__device__ __forceinline__ void up_epilogue_quantize(const MoeGroupedGemmParams& p,
                                                     const ItemOperands<true, kRows>& op, const float (&acc)[64],
                                                     float (*s_amax)[kHalfRows], int half) {
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int r0 = warp * 16 + (lane >> 2), row0 = kHalfRows * half;
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
  if (op.n0 >= op.it.inter) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + r0 + 8 * i;
    if (r >= op.it.nrows) continue;
    const float s = __fdiv_rn(fmaxf(row_amax[i], 1e-10f), 448.0f);
    const Fp8GroupDivisor divisor(s);  // h holds bf16 values
    const int64_t pos = op.it.pos_begin + op.it.m0 + r;
    if (wg == 0 && (lane & 3) == 0) p.hidden_scale[(op.n0 / kBK) * p.hidden_scale_ld + pos] = s;
    uint8_t* dst = p.hidden_q + pos * p.hidden_ld + op.n0 + 64 * wg + 2 * (lane & 3);
    // Accumulators j, j + 1 of row r: columns 8 (j / 4) + 2 (lane % 4) + 0, 1.
#pragma unroll
    for (int j = 2 * i; j < 32; j += 4) {
      const uint32_t lo = e4m3_code(divisor.divide(h[j])), hi = e4m3_code(divisor.divide(h[j + 1]));
      *reinterpret_cast<uint16_t*>(dst + 8 * (j >> 2)) = static_cast<uint16_t>(lo | hi << 8);
    }
  }
}

// kUp: A = x's codes gathered by token, output the SwiGLU rows' codes and
// scales. Otherwise A = the hidden rows' codes, output y.
// wmap: the routed experts' codes as one [experts x rows, K] byte matrix
// (gate_up: [E * 2I, H], down: [E * H, I]); smap: the shared expert's.
//
// Warp-specialised: warps 0-7 (two consumer warpgroups) only wait, multiply
// and promote; warp 8 (the producer; with a producer warpgroup, warps 9-11
// give their registers away and exit) fills the stages. A stage is full when
// its weight boxes have landed (TMA bytes on the `full` barrier, with the
// producer's lane 0 arriving as it asks for them) and the producer's 32
// lanes have arrived after their A copies (and staged scales) completed and
// they fenced them for the async proxy; it is empty again when the 8
// consumer warps have arrived after their MMAs on it. Nothing in the k loop
// waits at a block barrier.
template <bool kUp, bool kPaired, int kHalves, bool kStaged>
__global__ void __launch_bounds__(kThreads + Form<kPaired, kHalves>::kProducerThreads, 1)
    grouped_fp8_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap smap,
                       const MoeGroupedGemmParams p) {
#ifdef HYLLM_WGMMA
  using F = Form<kPaired, kHalves>;
  constexpr int kRows = F::kRows, kStages = F::kStages, kAStage = F::kAStage, kStageBytes = F::kStageBytes;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  __shared__ float s_amax[2][kHalfRows];
  __shared__ uint64_t full[kStages], empty[kStages];
  // Staged scales: step s's, in stage s % kStages: the A rows' (invalid past
  // the item's rows, whose sums are never stored), then the two weight
  // blocks' (gate_up: the gate and up rows' block; down: warpgroup w's columns').
  __shared__ float s_scales[kStaged ? kStages : 1][kRows + 2];
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&wmap);
    prefetch_tensor_map(&smap);
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 32 + 1);
      mbar_init(&empty[i], kThreads / 32);
    }
    mbar_init_fence();
  }
  // (stage_slot_tables ends with a barrier, after which the barriers are used.)
  const MoeGroupedPlan& pl = p.plan;
  const moe_detail::SlotTables tables = moe_detail::stage_slot_tables<kUp>(p, smem + F::kStagesBytes);
  const int total = tables.item_begin[tables.num_slots];
  const int tid = threadIdx.x, lane = tid & 31;

  if (tid >= kThreads) {
    if constexpr (F::kWideProducer) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kWideProducerRegs));
      if (tid >= kThreads + 32) return;
    }
    // The producer. Lane l copies A rows l + 32 h (rows past the item's are
    // not copied: their products land in accumulator rows that are never
    // stored). Its copies of step n are waited for at step n + kLag, so
    // that several steps' copies are in flight.
    constexpr int kLag = kStages - 2;
    constexpr int kCopyRows = kRows / 32;
    const uint8_t* A = kUp ? p.xq : p.hidden_q;
    const int64_t lda = kUp ? p.w.hidden : p.hidden_ld;
    const float* as = kUp ? p.x_scale : p.hidden_scale;
    const int64_t as_ld = kUp ? p.x_scale_ld : p.hidden_scale_ld;
    int n = 0;  // steps asked for so far
    const LaggedCopyArrivals<kStages, kLag> copies{full};
    // Items are resolved one ahead: the next item's row sources (global loads
    // for gate_up) are asked for before this item's copies, so that an item
    // switch does not hold back the copies, and with them the lagged arrivals
    // of the previous item's last steps, for a memory round trip.
    auto resolve = [&](int item, int (&src)[kCopyRows]) {
      const ItemOperands<kUp, kRows> op(p, tables, item < total ? item : blockIdx.x);
#pragma unroll
      for (int h = 0; h < kCopyRows; ++h) src[h] = item < total ? op.row_source(pl, lane + 32 * h) : -1;
    };
    int next_src[kCopyRows];
    resolve(blockIdx.x, next_src);
    for (int item = blockIdx.x; item < total; item += gridDim.x) {
      const ItemOperands<kUp, kRows> op(p, tables, item);
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
#pragma unroll
        for (int h = 0; h < kCopyRows; ++h) {
          if (src[h] < 0) continue;
          const uint8_t* row = A + src[h] * lda + k0;
#pragma unroll
          for (int c = 0; c < 8; ++c) cp_async16(sa + swizzled(lane + 32 * h, c), row + c * 16, true);
          if constexpr (kStaged) cp_async4(&s_scales[st][lane + 32 * h], as + kt * as_ld + src[h]);
        }
        if constexpr (kStaged) {
          if (lane == 0) cp_async4(&s_scales[st][kRows], op.ws + static_cast<int64_t>(sb_row0) * op.kblocks + kt);
          if (lane == 1 && sb_row1_valid) {
            cp_async4(&s_scales[st][kRows + 1], op.ws + static_cast<int64_t>(sb_row1) * op.kblocks + kt);
          }
        }
        cp_async_commit();
        if (lane == 0) {
          // Box b holds B rows [64 b, 64 b + 64): for gate_up, gate rows when
          // b is even and up rows when odd, intermediate columns n0 + 64 (b / 2)
          // on (n0 + 128 <= I: both multiples of 128); for down, output
          // columns n0 + 64 b on (rows past H read the next expert's or zeros,
          // and their columns are not stored).
          mbar_expect_bytes(&full[st], kBStage);
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

  if constexpr (F::kWideProducer) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kWideConsumerRegs));
  const int wg = tid >> 7, warp = (tid >> 5) & 3;
  int step = 0;  // this block's steps so far: step s's tiles are in stage s % kStages
  for (int item = blockIdx.x; item < total; item += gridDim.x) {
    const ItemOperands<kUp, kRows> op(p, tables, item);
    // The halves with rows (the same for every thread of the block).
    const int halves = kHalves == 1 || op.it.nrows <= kHalfRows ? 1 : 2;
    // This thread's accumulator rows of a half (j / 2 even, odd) and, unless
    // the scales are staged, their sources and this warpgroup's weight scale
    // rows (up: gate, then up).
    const int r0 = warp * 16 + (lane >> 2);
    int src[kHalves][2];
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      src[h][0] = kStaged ? -1 : op.row_source(pl, kHalfRows * h + r0);
      src[h][1] = kStaged ? -1 : op.row_source(pl, kHalfRows * h + r0 + 8);
    }
    const int sb_row0 = kUp ? op.n0 / kBK : (op.n0 + 128 * wg) / kBK;
    const int sb_row1 = kUp ? (op.it.inter + op.n0) / kBK : sb_row0;
    float acc[kHalves][64];
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[h][i] = 0.0f;
    }
    auto wait_full = [&](int s) { mbar_wait(&full[s % kStages], static_cast<uint32_t>((s / kStages) & 1)); };
    // Step s's MMAs of row half h on its stage into `part` (one commit group).
    auto issue = [&](float(&part)[64], int s, int h) {
      const uint8_t* stage = smem + (s % kStages) * kStageBytes;
      const uint64_t da = smem_desc(stage + h * kHalfRows * kRowBytes);
      const uint64_t db = smem_desc(stage + kAStage + wg * 128 * kRowBytes);
      fence_operands(part);
      fence();
#pragma unroll
      for (int k32 = 0; k32 < kBK / 32; ++k32) m64n128k32_e4m3(part, da + 2 * k32, db + 2 * k32, k32);
      commit();
    };
    // Step s's (k tile kt's) scale products for row half h, read while the
    // MMAs run and before the stage goes back: one scale per (row, weight
    // block), so a single FMA per accumulator. Up: the gate columns take the
    // first weight block, the up columns the second; down: warpgroup w's.
    struct Scales {
      float s00, s10, s01, s11;
    };
    auto load_scales = [&](int s, int kt, int h) {
      float sa0, sa1, sb0, sb1;
      if constexpr (kStaged) {
        const float* sc = s_scales[s % kStages];
        sa0 = sc[kHalfRows * h + r0];
        sa1 = sc[kHalfRows * h + r0 + 8];
        sb0 = sc[kRows + (kUp ? 0 : wg)];
        sb1 = kUp ? sc[kRows + 1] : sb0;
      } else {
        const float* as = kUp ? p.x_scale : p.hidden_scale;
        const int64_t as_ld = kUp ? p.x_scale_ld : p.hidden_scale_ld;
        sa0 = src[h][0] >= 0 ? __ldg(as + kt * as_ld + src[h][0]) : 0.0f;
        sa1 = src[h][1] >= 0 ? __ldg(as + kt * as_ld + src[h][1]) : 0.0f;
        sb0 = __ldg(op.ws + static_cast<int64_t>(sb_row0) * op.kblocks + kt);
        sb1 = __ldg(op.ws + static_cast<int64_t>(sb_row1) * op.kblocks + kt);
      }
      return Scales{sa0 * sb0, sa1 * sb0, sa0 * sb1, sa1 * sb1};
    };
    // Once this warp's MMAs of step s are all complete: its stage goes back.
    auto release = [&](int s) {
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s % kStages]);
    };
    // After a step's MMAs into `part` completed: its partial sums join `sum`.
    // Accumulator j: row r0 + 8 ((j / 2) % 2), column 8 (j / 4) + 2 (lane % 4) + j % 2.
    auto promote = [&](float(&sum)[64], float(&part)[64], const Scales& sc) {
      fence_operands(part);
#pragma unroll
      for (int j = 0; j < 64; ++j) {
        const bool odd_row = (j >> 1) & 1, second = kUp && j >= 32;
        sum[j] = fmaf(part[j], odd_row ? (second ? sc.s11 : sc.s10) : (second ? sc.s01 : sc.s00), sum[j]);
      }
    };
    int kt = 0;
    if constexpr (kPaired) {
      float part_b[64];
#pragma unroll 1
      for (; kt + 1 < op.kblocks; kt += 2, step += 2) {
        float part_a[64];
        wait_full(step);
        issue(part_a, step, 0);
        wait_full(step + 1);
        issue(part_b, step + 1, 0);
        const Scales sc_a = load_scales(step, kt, 0), sc_b = load_scales(step + 1, kt + 1, 0);
        wait<1>();
        release(step);
        promote(acc[0], part_a, sc_a);
        wait<0>();
        release(step + 1);
        promote(acc[0], part_b, sc_b);
      }
    }
    // Single tiles (the last of an odd count when paired), each half in turn.
#pragma unroll 1
    for (; kt < op.kblocks; ++kt, ++step) {
      wait_full(step);
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        if (h >= halves) break;
        float part[64];
        issue(part, step, h);
        const Scales sc = load_scales(step, kt, h);
        wait<0>();
        if (h == halves - 1) release(step);
        promote(acc[h], part, sc);
      }
    }
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      if (h >= halves) break;
      if constexpr (kUp) {
        up_epilogue_quantize(p, op, acc[h], s_amax, h);
      } else {
#pragma unroll
        for (int j = 0; j < 64; j += 2) {
          const int r = kHalfRows * h + r0 + 8 * ((j >> 1) & 1);
          const int col = op.n0 + 128 * wg + 8 * (j >> 2) + 2 * (lane & 3);
          if (r < op.it.nrows && col < p.w.hidden) {
            const int64_t pos = op.it.pos_begin + op.it.m0 + r;
            *reinterpret_cast<uint32_t*>(p.y + pos * p.w.hidden + col) = pack_bf16(acc[h][j], acc[h][j + 1]);
          }
        }
      }
    }
  }
#endif
}

template <bool kUp, bool kPaired, int kHalves, bool kStaged>
void launch_kernel(const CUtensorMap& wmap, const CUtensorMap& smap, const MoeGroupedGemmParams& p, int grid,
                   cudaStream_t stream) {
  using F = Form<kPaired, kHalves>;
  const size_t smem = F::smem_bytes(p.w.experts);
  auto kernel = grouped_fp8_kernel<kUp, kPaired, kHalves, kStaged>;
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<grid, kThreads + F::kProducerThreads, smem, stream>>>(wmap, smap, p);
}

template <bool kUp, bool kStaged>
void launch_form(const CUtensorMap& wmap, const CUtensorMap& smap, const MoeGroupedGemmParams& p, int grid,
                 cudaStream_t stream) {
  if (p.tile_rows == 2 * kHalfRows) {
    launch_kernel<kUp, false, 2, kStaged>(wmap, smap, p, grid, stream);
  } else if (p.paired_k_tiles) {
    launch_kernel<kUp, true, 1, kStaged>(wmap, smap, p, grid, stream);
  } else {
    launch_kernel<kUp, false, 1, kStaged>(wmap, smap, p, grid, stream);
  }
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
  const int grid = p.grid < max_items ? p.grid : max_items;
  if (grid <= 0) return true;
  if (p.staged_scales) {
    launch_form<kUp, true>(wmap, smap, p, grid, stream);
  } else {
    launch_form<kUp, false>(wmap, smap, p, grid, stream);
  }
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
