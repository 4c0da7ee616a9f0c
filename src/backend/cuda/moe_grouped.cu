// The grouped regime's GEMMs on sm_90a (launch/moe.h): a persistent grid
// walks the plan's work items (expert slot, 128 or 256 output columns, 64 or
// 128 rows); rows of x (gathered by token) or of the hidden activations and
// 256 weight rows are copied into 128-byte-swizzled shared memory with
// cp.async, several k tiles ahead, and multiplied by warpgroup MMAs (wgmma)
// into fp32 registers. The gate_up GEMM puts gate and up columns of the same
// intermediate index in the same thread, so SwiGLU runs in its epilogue.
// Without sm_90a (another architecture in the build) the kernels are empty
// and sm90a_kernels_supported() is false for the device.
#include "backend/cuda/dynamic_smem.cuh"
#include "backend/cuda/moe_common.cuh"
#include "backend/cuda/wgmma.cuh"

namespace hyllm::cuda {
namespace {

using namespace wgmma;

constexpr int kBK = 64;       // bf16 per 128-byte row of a k tile
constexpr int kBRows = 256;   // weight rows per tile: 128 gate + 128 up, or 256 down
static_assert(kMoeUpColTile * 2 == kBRows && kMoeDownColTile == kBRows, "tile shapes");

template <int NWG>
struct Tiles {
  static constexpr int kThreads = NWG * 128;
  static constexpr int kRows = NWG * 64;  // A rows per tile
  static constexpr int kStages = NWG == 1 ? 5 : 4;
  static constexpr int kAStage = kRows * kRowBytes;
  static constexpr int kBStage = kBRows * kRowBytes;
  static constexpr int kStageBytes = kAStage + kBStage;
  static constexpr size_t kStagesBytes = static_cast<size_t>(kStages) * kStageBytes;
  // The stages (1024-aligned, hence the slack), then the slot tables.
  static size_t smem_bytes(int experts) { return kStagesBytes + 1024 + moe_detail::slot_tables_bytes(experts); }
};


// Block = a stream of work items, the copies running kStages - 2 k tiles
// ahead of the MMAs across item boundaries, each item resolved one item
// before its first copy (moe_grouped_fp8.cu says why).
// kUp: A = x rows by token, B = gate rows [n0, n0 + 128) then up rows
// [I + n0, ...), output SwiGLU into hidden. Otherwise A = hidden rows, B =
// down rows [n0, n0 + 256), output y.
template <int NWG, bool kUp>
__global__ void __launch_bounds__(NWG * 128, 1) grouped_gemm_kernel(MoeGroupedGemmParams p) {
#ifdef HYLLM_WGMMA
  using L = Tiles<NWG>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  const MoeGroupedPlan& pl = p.plan;
  const moe_detail::SlotTables tables = moe_detail::stage_slot_tables<kUp>(p, smem + L::kStagesBytes);
  const int total = tables.item_begin[tables.num_slots];
  const int tid = threadIdx.x, wg = tid >> 7, wl = tid & 127, warp = wl >> 5, lane = tid & 31;
  const int H = p.w.hidden;
  const uint16_t* A = kUp ? p.x : p.hidden;
  const int64_t lda = kUp ? H : p.hidden_ld;
  auto item_at = [&](int item) {
    return moe_detail::grouped_item<L::kRows>(p, tables, item);
  };
  auto weights_of = [&](const moe_detail::GroupedItem& it) {
    return kUp ? (it.shared ? p.w.shared_gate_up : p.w.gate_up + it.expert * p.w.gate_up_stride)
               : (it.shared ? p.w.shared_down : p.w.down + it.expert * p.w.down_stride);
  };

  // The loader: item `li`, k tile `lk`. This thread copies 16-byte chunk
  // tid % 8 of A rows tid / 8 + j kARowStep, whose sources it keeps; `next`
  // and next_src are the same for the loader's next item.
  constexpr int kAChunks = L::kRows * 8 / L::kThreads, kARowStep = L::kThreads / 8;
  auto resolve = [&](int item, moe_detail::GroupedItem& it, int (&src)[kAChunks]) {
    if (item >= total) return;
    it = item_at(item);
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) src[j] = it.row_source<kUp>(pl, (tid >> 3) + j * kARowStep);
  };
  int li = blockIdx.x, lk = 0;
  moe_detail::GroupedItem lit = item_at(0), next = lit;
  int a_src[kAChunks], next_src[kAChunks];
#pragma unroll
  for (int j = 0; j < kAChunks; ++j) a_src[j] = next_src[j] = -1;
  resolve(li, lit, a_src);
  resolve(li + gridDim.x, next, next_src);
  // Copies the next k tile into `stage` (nothing past the last item), then
  // advances the loader; one commit group per call either way.
  auto load_next = [&](int stage) {
    if (li < total) {
      uint8_t* sa = smem + stage * L::kStageBytes;
      uint8_t* sb = sa + L::kAStage;
      const int K = kUp ? H : lit.inter, I = lit.inter;
      const int n0 = lit.col_tile * (kUp ? kMoeUpColTile : kMoeDownColTile);
      const uint16_t* W = weights_of(lit);
      const int kc = lk * kBK + (tid & 7) * 8;
#pragma unroll
      for (int j = 0; j < kAChunks; ++j) {
        const int r = (tid >> 3) + j * kARowStep, src = a_src[j];
        const bool ok = src >= 0 && kc < K;
        cp_async16(sa + swizzled(r, tid & 7), A + (ok ? src * lda + kc : 0), ok);
      }
      for (int i = tid; i < kBRows * 8; i += L::kThreads) {
        const int r = i >> 3, c = i & 7, kb = lk * kBK + c * 8;
        int wrow;
        bool ok;
        if (kUp) {
          const int j = n0 + (r & (kMoeUpColTile - 1));
          ok = j < I;
          wrow = (r < kMoeUpColTile ? 0 : I) + j;
        } else {
          wrow = n0 + r;
          ok = wrow < H;
        }
        ok = ok && kb < K;
        cp_async16(sb + swizzled(r, c), W + (ok ? static_cast<int64_t>(wrow) * K + kb : 0), ok);
      }
      if (++lk == (K + kBK - 1) / kBK) {
        lk = 0;
        li += gridDim.x;
        lit = next;
#pragma unroll
        for (int j = 0; j < kAChunks; ++j) a_src[j] = next_src[j];
        resolve(li + gridDim.x, next, next_src);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int st = 0; st < L::kStages - 2; ++st) load_next(st);

  int step = 0;  // this block's k tiles so far: step s's tiles are in stage s % kStages
  for (int item = blockIdx.x; item < total; item += gridDim.x) {
    const moe_detail::GroupedItem it = item_at(item);
    const int I = it.inter, m0 = it.m0, nrows = it.nrows, pos_begin = it.pos_begin;
    const int n0 = it.col_tile * (kUp ? kMoeUpColTile : kMoeDownColTile);
    const int ktiles = ((kUp ? H : I) + kBK - 1) / kBK;
    float acc0[64], acc1[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc0[i] = acc1[i] = 0.0f;
    for (int kt = 0; kt < ktiles; ++kt, ++step) {
      cp_async_wait<L::kStages - 3>();
      fence_proxy_async();
      __syncthreads();
      const uint8_t* stage = smem + (step % L::kStages) * L::kStageBytes;
      const uint64_t da = smem_desc(stage + wg * 64 * kRowBytes);
      const uint64_t db0 = smem_desc(stage + L::kAStage);
      const uint64_t db1 = smem_desc(stage + L::kAStage + 128 * kRowBytes);
      fence_operands(acc0);
      fence_operands(acc1);
      fence();
#pragma unroll
      for (int k16 = 0; k16 < kBK / 16; ++k16) {
        const int sc = (kt > 0 || k16 > 0) ? 1 : 0;  // the item's first MMA overwrites
        m64n128k16_bf16(acc0, da + 2 * k16, db0 + 2 * k16, sc);
        m64n128k16_bf16(acc1, da + 2 * k16, db1 + 2 * k16, sc);
      }
      commit();
      fence_operands(acc0);
      fence_operands(acc1);
      // The MMAs of the previous step are done in this warpgroup, and (after
      // the next barrier) those of the step before it in every warpgroup:
      // that step's stage may be refilled.
      wait<1>();
      load_next((step + L::kStages - 2) % L::kStages);
    }
    wait<0>();
    fence_operands(acc0);
    fence_operands(acc1);
    // Accumulator j: row 16 warp + lane / 4 + 8 ((j / 2) % 2), column 8 (j / 4) + 2 (lane % 4) + j % 2.
    const int row_base = m0 + wg * 64 + warp * 16 + (lane >> 2);
#pragma unroll
    for (int j = 0; j < 64; j += 2) {
      const int r = row_base + 8 * ((j >> 1) & 1);
      const int c = 8 * (j >> 2) + 2 * (lane & 3);
      if (r - m0 >= nrows) continue;
      const int64_t pos = pos_begin + r;
      if (kUp) {
        if (n0 + c < I) {
          const float h0 = silu(round_bf(acc0[j])) * round_bf(acc1[j]);
          const float h1 = silu(round_bf(acc0[j + 1])) * round_bf(acc1[j + 1]);
          *reinterpret_cast<uint32_t*>(p.hidden + pos * p.hidden_ld + n0 + c) = pack_bf16(h0, h1);
        }
      } else {
        if (n0 + c < H) *reinterpret_cast<uint32_t*>(p.y + pos * H + n0 + c) = pack_bf16(acc0[j], acc0[j + 1]);
        if (n0 + 128 + c < H) {
          *reinterpret_cast<uint32_t*>(p.y + pos * H + n0 + 128 + c) = pack_bf16(acc1[j], acc1[j + 1]);
        }
      }
    }
  }
  cp_async_wait<0>();
#endif
}

// Block = token: its routed rows in ascending position (= ascending expert
// id), each weighted, then the shared expert's row scaled by its gate.
__global__ void __launch_bounds__(256) combine_kernel(MoeGroupedGemmParams p) {
  __shared__ int s_pos[kMoeMaxTopK];
  __shared__ float s_w[kMoeMaxTopK + 1];
  const int t = blockIdx.x, k = p.top_k, H = p.w.hidden, P = p.tokens * k;
  const bool shared = p.w.has_shared();
  if (threadIdx.x < k) {
    const int pos = p.plan.token_pos[t * k + threadIdx.x];
    int rank = 0;
    for (int j = 0; j < k; ++j) rank += p.plan.token_pos[t * k + j] < pos ? 1 : 0;
    s_pos[rank] = pos;
    s_w[rank] = p.plan.sorted_weight[pos];
  }
  if (threadIdx.x == 0) s_w[k] = shared ? p.plan.sorted_weight[P + t] : 0.0f;
  __syncthreads();
  for (int c = threadIdx.x; c < H / 8; c += blockDim.x) {
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = 0.0f;
    auto add = [&](int64_t row, float w) {
      const uint4 v = *reinterpret_cast<const uint4*>(p.y + row * H + c * 8);
      const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[2 * i] = __fadd_rn(acc[2 * i], __fmul_rn(w, __uint_as_float(u[i] << 16)));
        acc[2 * i + 1] = __fadd_rn(acc[2 * i + 1], __fmul_rn(w, __uint_as_float(u[i] & 0xffff0000u)));
      }
    };
    for (int i = 0; i < k; ++i) add(s_pos[i], s_w[i]);
    if (shared) add(P + t, s_w[k]);
    uint4 o;
    o.x = pack_bf16(acc[0], acc[1]);
    o.y = pack_bf16(acc[2], acc[3]);
    o.z = pack_bf16(acc[4], acc[5]);
    o.w = pack_bf16(acc[6], acc[7]);
    *reinterpret_cast<uint4*>(p.out + static_cast<int64_t>(t) * H + c * 8) = o;
  }
}

template <int NWG, bool kUp>
void launch_grouped(const MoeGroupedGemmParams& p, int max_items, cudaStream_t stream) {
  const size_t smem = Tiles<NWG>::smem_bytes(p.w.experts);
  allow_dynamic_smem(reinterpret_cast<const void*>(grouped_gemm_kernel<NWG, kUp>), smem);
  const int grid = p.grid < max_items ? p.grid : max_items;
  if (grid <= 0) return;
  grouped_gemm_kernel<NWG, kUp><<<grid, Tiles<NWG>::kThreads, smem, stream>>>(p);
}

}  // namespace

void launch_moe_up_grouped(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  if (p.tile_rows == 128) launch_grouped<2, true>(p, p.max_up_items, stream);
  else launch_grouped<1, true>(p, p.max_up_items, stream);
}

void launch_moe_down_grouped(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  if (p.tile_rows == 128) launch_grouped<2, false>(p, p.max_down_items, stream);
  else launch_grouped<1, false>(p, p.max_down_items, stream);
}

void launch_moe_combine(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  combine_kernel<<<p.tokens, 256, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
