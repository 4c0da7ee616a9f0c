// The grouped regime's GEMMs for block-FP8 experts on sm_90a (launch/moe.h).
//
// The same persistent walk over the plan's work items as moe_grouped.cu
// (expert slot, 128 intermediate or 256 output columns, here always 64 rows),
// but both operands stay e4m3 in memory and in the MMAs: the rows of x as
// the producer norm quantised them, or the SwiGLU rows as
// launch_moe_quantize_hidden quantised them, and the experts' codes as
// stored. Prefill is bound by reading every expert's weights once per layer,
// so reading one byte per weight instead of expanding them to bf16 first is
// the whole point.
//
// A k tile is 128 codes: exactly one scale block of both operands. Each
// tile's FP8 MMAs go into a fresh fp32 accumulator that is then added to the
// result times (row scale x block scale). That is the CPU reference's
// per-block sum (cpu_linear.cpp), and it keeps the FP8 MMAs' internal
// accumulation, narrower than fp32, to 128 products.
//
// Warpgroup w multiplies the tile's 64 A rows by B rows [128 w, 128 w + 128):
// for gate_up those are gate then up rows of intermediate columns
// n0 + 64 w .. n0 + 64 w + 63, so each thread holds the gate and up values
// of the same column and SwiGLU runs in the epilogue; for down they are
// output columns n0 + 128 w ... Each warpgroup's 128 weight rows lie in one
// 128-row scale block (n0 is a multiple of 128, so are I and H).
#include "backend/cuda/dynamic_smem.cuh"
#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/moe_common.cuh"
#include "backend/cuda/wgmma.cuh"

namespace hyllm::cuda {
namespace {

using namespace wgmma;

constexpr int kBK = 128;  // e4m3 codes per 128-byte row of a k tile = one scale block
constexpr int kRows = 64;
constexpr int kBRows = 256;
constexpr int kThreads = 256;
constexpr int kStages = 5;
constexpr int kAStage = kRows * kRowBytes;
constexpr int kBStage = kBRows * kRowBytes;
constexpr int kStageBytes = kAStage + kBStage;
constexpr size_t kSmem = static_cast<size_t>(kStages) * kStageBytes + 1024;  // + alignment slack
static_assert(kMoeUpColTile == 128 && kMoeDownColTile == kBRows, "tile shapes");
static_assert(kBK == kFp8Group, "a k tile is one scale block");


// kUp: A = x's codes gathered by token, output SwiGLU into hidden (bf16).
// Otherwise A = the hidden rows' codes, output y.
template <bool kUp>
__global__ void __launch_bounds__(kThreads, 1) grouped_fp8_kernel(MoeGroupedGemmParams p) {
#ifdef HYLLM_WGMMA
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  __shared__ int s_rows[kRows];
  const MoeGroupedPlan& pl = p.plan;
  const int num_slots = *pl.num_slots;
  const int32_t* item_begin = kUp ? pl.up_item_begin : pl.down_item_begin;
  const int total = item_begin[num_slots];
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int H = p.w.hidden;
  for (int item = blockIdx.x; item < total; item += gridDim.x) {
    const moe_detail::GroupedItem it = moe_detail::grouped_item<kRows>(p, item_begin, num_slots, item);
    const int e = it.expert, I = it.inter, m0 = it.m0, nrows = it.nrows, pos_begin = it.pos_begin;
    const bool shared = it.shared;
    const int n0 = it.col_tile * (kUp ? kMoeUpColTile : kMoeDownColTile);
    const int K = kUp ? H : I;
    const int kblocks = K / kBK;
    const uint8_t* W;
    const float* ws;
    if (kUp) {
      W = shared ? p.w.shared_gate_up_q : p.w.gate_up_q + static_cast<int64_t>(e) * 2 * I * H;
      ws = shared ? p.w.shared_gate_up_scale : p.w.gate_up_scale + e * p.w.gate_up_scale_stride;
    } else {
      W = shared ? p.w.shared_down_q : p.w.down_q + static_cast<int64_t>(e) * H * I;
      ws = shared ? p.w.shared_down_scale : p.w.down_scale + e * p.w.down_scale_stride;
    }
    const uint8_t* A = kUp ? p.xq : p.hidden_q;
    const int64_t lda = kUp ? H : p.hidden_ld;
    const float* as = kUp ? p.x_scale : p.hidden_scale;
    const int64_t as_ld = kUp ? p.x_scale_ld : p.hidden_scale_ld;
    __syncthreads();  // the previous item is done with s_rows and the stages
    moe_detail::stage_item_rows<kUp, kRows>(pl, it, s_rows);
    __syncthreads();
    auto load = [&](int stage, int kt) {
      uint8_t* sa = smem + stage * kStageBytes;
      uint8_t* sb = sa + kAStage;
      const int64_t k0 = static_cast<int64_t>(kt) * kBK;
      for (int i = tid; i < kRows * 8; i += kThreads) {
        const int r = i >> 3, c = i & 7, src = s_rows[r];
        cp_async16(sa + swizzled(r, c), A + (src >= 0 ? src * lda + k0 + c * 16 : 0), src >= 0);
      }
      for (int i = tid; i < kBRows * 8; i += kThreads) {
        const int r = i >> 3, c = i & 7;
        int wrow;
        bool ok;
        if (kUp) {
          const int j = n0 + 64 * (r >> 7) + (r & 63);
          ok = j < I;
          wrow = ((r & 64) ? I : 0) + j;
        } else {
          wrow = n0 + r;
          ok = wrow < H;
        }
        cp_async16(sb + swizzled(r, c), W + (ok ? static_cast<int64_t>(wrow) * K + k0 + c * 16 : 0), ok);
      }
    };
    // This thread's accumulator rows (j / 2 even, odd) and their sources.
    const int r0 = warp * 16 + (lane >> 2), src0 = s_rows[r0], src1 = s_rows[r0 + 8];
    // The weight scale rows of this warpgroup's columns (up: gate, then up).
    const int sb_row0 = kUp ? n0 / kBK : (n0 + 128 * wg) / kBK;
    const int sb_row1 = kUp ? (I + n0) / kBK : sb_row0;
    float acc[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < kblocks) load(st, st);
      cp_async_commit();
    }
    for (int kt = 0; kt < kblocks; ++kt) {
      cp_async_wait<kStages - 2>();
      fence_proxy_async();
      __syncthreads();
      const uint8_t* stage = smem + (kt % kStages) * kStageBytes;
      const uint64_t da = smem_desc(stage);
      const uint64_t db = smem_desc(stage + kAStage + wg * 128 * kRowBytes);
      fence_operands(part);
      fence();
#pragma unroll
      for (int k32 = 0; k32 < kBK / 32; ++k32) m64n128k32_e4m3(part, da + 2 * k32, db + 2 * k32, k32);
      commit();
      // This block's scales, loaded while the MMAs run.
      const float sa0 = src0 >= 0 ? __ldg(as + kt * as_ld + src0) : 0.0f;
      const float sa1 = src1 >= 0 ? __ldg(as + kt * as_ld + src1) : 0.0f;
      const float sb0 = __ldg(ws + static_cast<int64_t>(sb_row0) * kblocks + kt);
      const float sb1 = __ldg(ws + static_cast<int64_t>(sb_row1) * kblocks + kt);
      wait<0>();
      fence_operands(part);
      // Every warpgroup finished k tile kt - 1 before this iteration's
      // barrier: its stage may be refilled.
      const int next = kt + kStages - 1;
      if (next < kblocks) load(next % kStages, next);
      cp_async_commit();
      // Accumulator j: row r0 + 8 ((j / 2) % 2), column 8 (j / 4) + 2 (lane % 4) + j % 2.
#pragma unroll
      for (int j = 0; j < 64; ++j) {
        const float sa = ((j >> 1) & 1) ? sa1 : sa0;
        const float sb = (kUp && j >= 32) ? sb1 : sb0;
        acc[j] += (part[j] * sa) * sb;
      }
    }
    cp_async_wait<0>();
#pragma unroll
    for (int j = 0; j < (kUp ? 32 : 64); j += 2) {
      const int r = r0 + 8 * ((j >> 1) & 1);
      if (r >= nrows) continue;
      const int c = 8 * (j >> 2) + 2 * (lane & 3);
      const int64_t pos = pos_begin + m0 + r;
      if (kUp) {
        const int col = n0 + 64 * wg + c;  // gate in acc[j], up in acc[j + 32]
        if (col < I) {
          const float h0 = silu(round_bf(acc[j])) * round_bf(acc[j + 32]);
          const float h1 = silu(round_bf(acc[j + 1])) * round_bf(acc[j + 33]);
          *reinterpret_cast<uint32_t*>(p.hidden + pos * p.hidden_ld + col) = pack_bf16(h0, h1);
        }
      } else {
        const int col = n0 + 128 * wg + c;
        if (col < H) *reinterpret_cast<uint32_t*>(p.y + pos * H + col) = pack_bf16(acc[j], acc[j + 1]);
      }
    }
  }
#endif
}

// Block x = slot (routed experts, then the shared expert); its warps take
// (row, 128-column group) items in turn and quantise them as the CPU
// quantiser does (fp8_common.cuh).
__global__ void quantize_hidden_kernel(MoeGroupedGemmParams p) {
  const int s = blockIdx.x;
  if (s >= *p.plan.num_slots) return;
  const int width = p.plan.slot_expert[s] == p.w.experts ? p.w.shared_inter : p.w.inter;
  const int groups = width / kFp8Group;
  const int64_t begin = p.plan.slot_pos[s], items = static_cast<int64_t>(p.plan.slot_rows[s]) * groups;
  Fp8Out o;
  o.q = p.hidden_q;
  o.scale = p.hidden_scale;
  o.group_scales = true;
  o.rows = static_cast<int>(p.hidden_scale_ld);
  o.cols = p.hidden_ld;
  const int warps = blockDim.x / 32;
  for (int64_t item = static_cast<int64_t>(blockIdx.y) * warps + threadIdx.x / 32; item < items;
       item += static_cast<int64_t>(gridDim.y) * warps) {
    const int64_t row = begin + item / groups;
    quantize_group_warp(p.hidden + row * p.hidden_ld, static_cast<int>(item % groups), static_cast<int>(row), o);
  }
}

template <bool kUp>
void launch_grouped_fp8(const MoeGroupedGemmParams& p, int max_items, cudaStream_t stream) {
  allow_dynamic_smem(reinterpret_cast<const void*>(grouped_fp8_kernel<kUp>), kSmem);
  const int grid = p.grid < max_items ? p.grid : max_items;
  if (grid <= 0) return;
  grouped_fp8_kernel<kUp><<<grid, kThreads, kSmem, stream>>>(p);
}

}  // namespace

void launch_moe_up_grouped_fp8(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  launch_grouped_fp8<true>(p, p.max_up_items, stream);
}

void launch_moe_quantize_hidden(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  // Up to 16 blocks per slot: enough to cover a hot expert's rows in one wave.
  quantize_hidden_kernel<<<dim3(p.w.experts + 1, 16), 256, 0, stream>>>(p);
}

void launch_moe_down_grouped_fp8(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  launch_grouped_fp8<false>(p, p.max_down_items, stream);
}

}  // namespace hyllm::cuda
