// The small regime's gate|up projection for block-FP8 experts on sm_90a
// (launch/moe.h launch_moe_up_tma_fp8): the expert weights streamed by the
// tensor memory accelerator into warpgroup MMAs, as fp8_gemv_tma.cu does for
// the dense decode linear.
//
// Why: the register-fed up kernels (moe_small_fp8.cu) are chains of load
// latencies with a few kilobytes in flight per warp, and sm_90 has no e4m3
// mma.sync of its own (ptxas unpacks every code to f16): at decode they read
// the experts well below the copy rate. Here one thread per block asks for
// whole weight boxes, several steps ahead, and one warpgroup multiplies them
// with e4m3 wgmma.
//
// Work: block (x, y) owns intermediate columns [32 x, 32 x + 32) of the
// plan's items y, y + gridDim.y, ... (the launcher picks gridDim.y so that
// the grid is resident at once; at one token every item gets a block of its
// own). Every item is H / 128 steps whatever its expert (K is the hidden
// size), so the blocks of a slice get equal shares. One step = (item, 128-code
// k block): the expert's 32 gate rows and its 32 up rows of the block's
// columns, two 32-row TMA boxes stacked into one 64-row A tile, and the
// item's <= 8 token rows of x codes as the n8 side. A producer warp keeps
// kStages steps in flight across item boundaries.
//
// Token rows: an item's rows are tokens gathered through plan.sorted_token,
// not contiguous rows of x, so TMA cannot bring them as one box, and a box
// per row is not an option (the 128-byte swizzle wants 1024-aligned boxes;
// sm_90 has no TMA gather). The producer warp's lanes copy them with
// cp.async, 16 bytes at a time, straight into the swizzled layout (chunk c
// of row r at chunk c ^ r), as moe_grouped_fp8.cu gathers its A rows; rows
// past the item's are not copied (their products land in accumulator columns
// that are never stored). x is T x H bytes that every block reads: L2 hits.
//
// Products: four m64n8k32 e4m3 MMAs sum a step's 128 codes into a fresh
// accumulator, promoted as ops.h's linear says, acc += (P * s_x) * s_w, in
// ascending K blocks (the CPU reference's order; the register-fed kernels add
// warp partials over K ranges instead). Warp w of the warpgroup holds A rows
// 16 w + g and 16 w + g + 8 (g = lane / 4) of item rows 2 q and 2 q + 1
// (q = lane % 4): warps 0-1 gate rows, warps 2-3 the up rows of the same
// columns, in the same lanes and accumulator slots. The up warps hand their
// sums to the gate warps through shared memory once per item, which then
// write SwiGLU of the bf16-rounded sums as moe_common.cuh's up_store does.
// (Interleaving gate and up rows per warp would spare that exchange but cost
// eight 8-row boxes per step instead of two.)
#include <climits>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/dynamic_smem.cuh"
#include "backend/cuda/moe_common.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma.cuh"

namespace hyllm::cuda {
namespace {

constexpr int kCols = 32;                            // intermediate columns per block: 32 gate + 32 up rows = m64
constexpr int kBoxBytes = 128;                       // one 128-code scale block of K
constexpr int kStages = 8;                           // 64 KiB of weights in flight per block
constexpr int kLag = 4;                              // steps a token gather is waited for after it was asked for
constexpr int kConsumerWarps = 4;                    // one warpgroup
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // + the producer warp
constexpr int kBlocksPerSm = 2;                      // the occupancy the launcher sizes the grid for
constexpr int kHalfBytes = kCols * kBoxBytes;        // the gate (or up) box
constexpr int kWeightBytes = 2 * kHalfBytes;
constexpr int kTokenBytes = kMoeItemRows * kBoxBytes;
constexpr int kStageBytes = kWeightBytes + kTokenBytes;
// Items one block may own (its table in shared memory); the launcher adds
// blocks rather than exceed it.
constexpr int kMaxBlockItems = 64;
// Dynamic shared memory: the ring (1024-aligned, hence the slack), x's block
// scales [H / 128][T] and the weight block scales of the block's items
// [cap][H / 128][gate, up].
size_t smem_bytes(int tokens, int hb, int cap) {
  return 1024 + size_t{kStages} * kStageBytes + size_t(hb) * tokens * 4 + size_t(cap) * hb * 2 * 4;
}
static_assert(kMoeItemRows == 8, "an item's rows are the n8 side of the MMA");
static_assert(kHalfBytes % 1024 == 0 && kStageBytes % 1024 == 0, "boxes start on the swizzle's period");
static_assert(128 % kCols == 0, "a block's gate (or up) rows lie in one 128-row scale block");

// The block's items: expert, first row position, rows, and the token of
// each row (-1 past the item's rows).
struct ItemTable {
  int expert[kMaxBlockItems];
  int pos[kMaxBlockItems];
  int rows[kMaxBlockItems];
  int token[kMaxBlockItems][kMoeItemRows];
};

__device__ __forceinline__ int expert_inter(const MoeSmallParams& p, int e) {
  return e == p.w.experts ? p.w.shared_inter : p.w.inter;
}

// Whether item i has weight rows in the block's columns (a routed expert
// narrower than the shared one has none in the last slices: its hidden
// columns there are zeros).
__device__ __forceinline__ bool has_work(const MoeSmallParams& p, const ItemTable& t, int i, int n0) {
  return n0 < expert_inter(p, t.expert[i]);
}

// Every scale the block's steps need, into shared memory (x's [kb][t], the
// weights' [i][kb][gate, up]): one round of independent loads by the
// consumer warpgroup before its first box. Loaded a step ahead instead, each
// step would wait for a global load's latency, which is longer than a box
// takes to stream.
__device__ __forceinline__ void stage_scales(const MoeSmallParams& p, const ItemTable& t, int n_items, int n0,
                                             float* xs, float* ws_s) {
  constexpr int kBatch = 8;  // loads a thread has in flight before it stores them
  constexpr int kStride = kConsumerWarps * 32;
  const int Hb = p.w.hidden / kBoxBytes, T = p.tokens;
  const int nx = Hb * T, n = nx + n_items * Hb * 2;
  for (int base = threadIdx.x; base < n; base += kBatch * kStride) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int j = base + u * kStride;
      v[u] = 0.0f;
      if (j >= n) continue;
      if (j < nx) {
        v[u] = __ldg(p.xq_scale + static_cast<int64_t>(j / T) * p.xq_scale_ld + j % T);
        continue;
      }
      const int r = j - nx, i = r / (2 * Hb), kb = r / 2 % Hb, up = r % 2;
      const int e = t.expert[i];
      if (!has_work(p, t, i, n0)) continue;
      const float* ws = e == p.w.experts ? p.w.shared_gate_up_scale : p.w.gate_up_scale + e * p.w.gate_up_scale_stride;
      const int wrow = (up ? expert_inter(p, e) : 0) + n0;
      v[u] = __ldg(ws + (wrow / kBoxBytes) * Hb + kb);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int j = base + u * kStride;
      if (j < n) (j < nx ? xs[j] : ws_s[j - nx]) = v[u];
    }
  }
}

#ifdef HYLLM_WGMMA
// A barrier of the consumer warpgroup alone (the producer warp does not take
// part); barrier 0 is __syncthreads'.
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerWarps * 32) : "memory");
}
#endif

// wmap: the routed experts' gate|up codes as one [E * 2I, H] byte matrix;
// smap: the shared expert's [2 Is, H]; both in boxes of 32 rows x 128 bytes.
// cap: entries of the item table this block reads (max_items / gridDim.y,
// rounded up; at most kMaxBlockItems).
//
// A stage is full when its weight boxes have landed (the producer's lane 0
// arrives as it asks for their bytes) and the producer's 32 lanes have
// arrived after their token copies completed and they fenced them for the
// async proxy; it is empty again when the 4 consumer warps have arrived after
// their MMAs on it. Nothing between the item table and the end waits at a
// block barrier; the consumer warpgroup meets at its own barrier once per
// item, for the gate / up exchange.
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    up_tma_fp8_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap smap,
                      const MoeSmallParams p, int cap) {
#ifdef HYLLM_WGMMA
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  float* xs = reinterpret_cast<float*>(ring + kStages * kStageBytes);  // [H / 128][T]
  float* ws_s = xs + (p.w.hidden / kBoxBytes) * p.tokens;             // [cap][H / 128][2]
  __shared__ uint64_t full[kStages], empty[kStages];
  __shared__ ItemTable items;
  __shared__ float xch[2][2][4][32];  // [epilogue parity][gate warp][accumulator][lane]: the up sums
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int n0 = blockIdx.x * kCols, H = p.w.hidden, Hb = H / kBoxBytes, B = gridDim.y;
  const bool producer = warp == kConsumerWarps;
  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 32 + 1);
      mbar_init(&empty[i], kConsumerWarps);
    }
    mbar_init_fence();
  }
  if (producer && lane == 0) {  // kernel parameters: nothing the step writes
    prefetch_tensor_map(&wmap);
    prefetch_tensor_map(&smap);
  }
  __syncthreads();
  // Programmatic launch (as the register-fed up kernels): the plan is
  // complete past the wait; only then may the kernels after this one begin.
  wait_for_prerequisite();
  allow_dependents();

  // The first item's first weight boxes, asked for by the producer as soon as
  // its expert is known, ahead of the item table and the token rows (which the
  // weights do not depend on). The count is read beside the expert id (stale
  // past the count; unused then).
  int early = 0;
  if (producer && lane == 0) {
    const int num_items = *p.plan.num_items, e = p.plan.item_expert[blockIdx.y];
    const int I = expert_inter(p, e);
    if (static_cast<int>(blockIdx.y) < num_items && n0 < I) {
      const bool shared = e == p.w.experts;
      const CUtensorMap* map = shared ? &smap : &wmap;
      const int wrow = shared ? 0 : e * 2 * p.w.inter;
      early = Hb < kStages ? Hb : kStages;
      for (int s = 0; s < early; ++s) {
        uint8_t* stage = ring + s * kStageBytes;
        mbar_expect_bytes(&full[s], kWeightBytes);
        tma_load_box(stage, map, &full[s], s * kBoxBytes, wrow + n0);
        tma_load_box(stage + kHalfBytes, map, &full[s], s * kBoxBytes, wrow + I + n0);
      }
    }
  }

  // The item table: entries read beside the item count, the tokens (which
  // depend on an entry's rows) only for items below it.
  const int num_items = *p.plan.num_items;
  for (int j = tid; j < cap * kMoeItemRows; j += kThreads) {
    const int i = j / kMoeItemRows, r = j % kMoeItemRows, item = blockIdx.y + i * B;
    if (item >= p.plan.max_items) break;
    const int pos0 = p.plan.item_pos[item], rows = p.plan.item_rows[item];
    if (r == 0) {
      items.expert[i] = p.plan.item_expert[item];
      items.pos[i] = pos0;
      items.rows[i] = rows;
    }
    items.token[i][r] = item < num_items && r < rows ? p.plan.sorted_token[pos0 + r] : -1;
  }
  const int n_items = num_items > static_cast<int>(blockIdx.y) ? (num_items - static_cast<int>(blockIdx.y) + B - 1) / B
                                                                : 0;
  __syncthreads();

  if (producer) {
    // Lane l copies chunks 2 (l % 4) and 2 (l % 4) + 1 of token row l / 4.
    // Its copies of step n are waited for at step n + kLag, so that several
    // steps' copies are in flight.
    const int r = lane >> 2, c0 = 2 * (lane & 3);
    int n = 0;  // steps asked for so far
    const wgmma::LaggedCopyArrivals<kStages, kLag> copies{full};
    for (int i = 0; i < n_items; ++i) {
      if (!has_work(p, items, i, n0)) continue;
      const int e = items.expert[i], I = expert_inter(p, e), tok = items.token[i][r];
      const bool shared = e == p.w.experts;
      const CUtensorMap* map = shared ? &smap : &wmap;
      const int wrow = shared ? 0 : e * 2 * p.w.inter;
      const uint8_t* xrow = p.xq + static_cast<int64_t>(tok < 0 ? 0 : tok) * H + c0 * 16;
      for (int kb = 0; kb < Hb; ++kb, ++n) {
        const int st = n % kStages;
        uint8_t* stage = ring + st * kStageBytes;
        // A fresh barrier counts the phase before its first as complete.
        if (n >= kStages) mbar_wait(&empty[st], static_cast<uint32_t>(((n / kStages) & 1) ^ 1));
        if (lane == 0 && n >= early) {
          mbar_expect_bytes(&full[st], kWeightBytes);
          tma_load_box(stage, map, &full[st], kb * kBoxBytes, wrow + n0);
          tma_load_box(stage + kHalfBytes, map, &full[st], kb * kBoxBytes, wrow + I + n0);
        }
        if (tok >= 0) {
          uint8_t* xs = stage + kWeightBytes;
          cp_async16(xs + wgmma::swizzled(r, c0), xrow + kb * kBoxBytes, true);
          cp_async16(xs + wgmma::swizzled(r, c0 + 1), xrow + kb * kBoxBytes + 16, true);
        }
        cp_async_commit();
        copies.step_committed(n);
      }
    }
    copies.finish(n);
    return;
  }

  const int g = lane >> 2, q = lane & 3;
  const bool up = warp >= 2;  // this warp's A rows: up rows (else gate rows) 16 (warp % 2) + g (+ 8)
  stage_scales(p, items, n_items, n0, xs, ws_s);
  consumers_sync();
  int step = 0, done = 0;
  for (int it = 0; it < n_items; ++it) {
    const int pos0 = items.pos[it], rows = items.rows[it];
    if (!has_work(p, items, it, n0)) {
      // Columns [I, hidden_ld) of a narrower expert's rows hold zeros (as
      // moe_common.cuh's zero_hidden_tail): the whole slice lies past I.
      for (int j = tid; j < rows * kCols; j += kConsumerWarps * 32) {
        p.hidden[static_cast<int64_t>(pos0 + j / kCols) * p.hidden_ld + n0 + j % kCols] = 0;
      }
      continue;
    }
    // Item rows 2q and 2q + 1's tokens (-1 past the item's rows: scale zero).
    const int t0 = items.token[it][2 * q], t1 = items.token[it][2 * q + 1];
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int kb = 0; kb < Hb; ++kb, ++step) {
      const float sw = ws_s[(it * Hb + kb) * 2 + (up ? 1 : 0)];
      const float sx0 = t0 >= 0 ? xs[kb * p.tokens + t0] : 0.0f;
      const float sx1 = t1 >= 0 ? xs[kb * p.tokens + t1] : 0.0f;
      const int st = step % kStages;
      mbar_wait(&full[st], static_cast<uint32_t>((step / kStages) & 1));
      const uint8_t* stage = ring + st * kStageBytes;
      const uint64_t da = wgmma::smem_desc(stage);
      const uint64_t db = wgmma::smem_desc(stage + kWeightBytes);
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      wgmma::fence_operands(d);
      wgmma::fence();
#pragma unroll
      for (int k32 = 0; k32 < kBoxBytes / 32; ++k32) wgmma::m64nk32_e4m3<1>(d, da + 2 * k32, db + 2 * k32, k32);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(d);
      // This warp's MMAs have read the stage: hand it back.
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[st]);
      acc[0] += (d[0] * sx0) * sw;
      acc[1] += (d[1] * sx1) * sw;
      acc[2] += (d[2] * sx0) * sw;
      acc[3] += (d[3] * sx1) * sw;
    }
    // The up sums go to the gate warps' lanes. Epilogues alternate buffers:
    // an up warp writes one again only after the next epilogue's barrier,
    // which the gate warps reach after reading it.
    float(&x)[2][4][32] = xch[done & 1];
    ++done;
    if (up) {
#pragma unroll
      for (int v = 0; v < 4; ++v) x[warp - 2][v][lane] = acc[v];
    }
    consumers_sync();
    if (up) continue;
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      // Accumulator v: column n0 + 16 warp + g + 8 (v / 2), item row 2q + v % 2.
      const int col = n0 + 16 * warp + g + 8 * (v >> 1), r = 2 * q + (v & 1);
      if (r < rows) {
        p.hidden[static_cast<int64_t>(pos0 + r) * p.hidden_ld + col] =
            f2bf(silu(round_bf(acc[v])) * round_bf(x[warp][v][lane]));
      }
    }
  }
#endif
}

}  // namespace

bool launch_moe_up_tma_fp8(const MoeSmallParams& p, cudaStream_t stream) {
  const MoeExpertPtrs& w = p.w;
  const int64_t E = w.experts, H = w.hidden, I = w.inter, Is = w.shared_inter;
  const bool shared = w.has_shared();
  // Whole 128-code boxes of K; 32-column slices that never straddle a scale
  // block and tile the hidden rows exactly; the routed experts' codes one
  // matrix of E * 2I rows addressable by int box coordinates; x's rows
  // aligned for 16-byte copies.
  if (H < kBoxBytes || H % kBoxBytes != 0 || I < kCols || I % kCols != 0 || (shared && Is % kCols != 0) ||
      p.hidden_ld % kCols != 0 || w.gate_up_stride != 2 * I * H || E * 2 * I > INT_MAX || p.xq == nullptr ||
      reinterpret_cast<uintptr_t>(p.xq) % 16 != 0 || p.tokens < 1 || p.tokens > kMoeSmallMaxTokens ||
      p.plan.max_items < 1) {
    return false;
  }
  CUtensorMap wmap, smap;
  if (!encode_swizzled_byte_map(&wmap, w.gate_up_q, E * 2 * I, H, kCols, kBoxBytes)) return false;
  if (!shared) {
    smap = wmap;  // no item reads it
  } else if (!encode_swizzled_byte_map(&smap, w.shared_gate_up_q, 2 * Is, H, kCols, kBoxBytes)) {
    return false;
  }
  int device = 0, optin = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      smem_bytes(static_cast<int>(p.tokens), static_cast<int>(H / kBoxBytes), kMaxBlockItems) + sizeof(ItemTable) >
          static_cast<size_t>(optin)) {
    cudaGetLastError();
    return false;
  }
  // Blocks per slice: one per item while the grid stays resident (decode of
  // a sequence or two: every item's rows stream at once), else as many as are
  // resident with the items shared out; more only where a block's table
  // would overflow.
  const int slices = p.hidden_ld / kCols;
  const int resident = kBlocksPerSm * sms / slices > 1 ? kBlocksPerSm * sms / slices : 1;
  int per_slice = p.plan.max_items < resident ? p.plan.max_items : resident;
  if (const int least = ceil_div(p.plan.max_items, kMaxBlockItems); per_slice < least) per_slice = least;
  const int cap = ceil_div(p.plan.max_items, per_slice);
  const size_t smem = smem_bytes(p.tokens, static_cast<int>(H / kBoxBytes), cap);
  allow_dynamic_smem(reinterpret_cast<const void*>(up_tma_fp8_kernel), smem);
  launch_maybe_pdl(up_tma_fp8_kernel, moe_detail::lean(p), dim3(slices, per_slice), kThreads, smem, stream,
                   wmap, smap, p, cap);
  return true;
}

}  // namespace hyllm::cuda
