// The CUDA kernel table's MoE ops: moe_route, and the whole MoE block in the
// small or the grouped regime (launch/moe.h), all on the stream with no host
// read of the routing.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/launch/fp8.h"
#include "backend/cuda/launch/moe.h"

namespace hyllm {

using namespace cuda_detail;

namespace {

// Hands out 256-byte-aligned pieces of one scratch allocation.
class ScratchCarver {
 public:
  template <typename T>
  ScratchCarver& add(T** slot, int64_t count) {
    entries_.push_back({reinterpret_cast<void**>(slot), offset_});
    offset_ += (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T) + 255) & ~size_t{255};
    return *this;
  }
  size_t bytes() const { return offset_; }
  void assign(void* base) {
    for (auto& [slot, off] : entries_) *slot = static_cast<char*>(base) + off;
  }

 private:
  std::vector<std::pair<void**, size_t>> entries_;
  size_t offset_ = 0;
};

// The small regime's x staging limit (route_small keeps T rows of x in shared memory).
constexpr size_t kSmallXBytes = size_t{160} << 10;

}  // namespace

void CudaKernels::moe_route(const MoeRouteArgs& a) {
  const int64_t E = a.logits.dim(1);
  if (E > cuda::kMoeMaxExperts || a.top_k > cuda::kMoeMaxTopK) {
    fail(ErrorCode::kUnsupported, "moe_route: {} experts / top_k {} exceed the cuda kernel's {} / {}", E, a.top_k,
         cuda::kMoeMaxExperts, cuda::kMoeMaxTopK);
  }
  cuda::MoeRouteParams p;
  p.logits = a.logits.data();
  p.logits_f32 = is_f32(a.logits);
  p.topk_ids = a.topk_ids.data_as<int32_t>();
  p.topk_weights = a.topk_weights.data_as<float>();
  p.tokens = to_int(a.logits.dim(0), "tokens");
  p.experts = static_cast<int>(E);
  p.top_k = static_cast<int>(a.top_k);
  cuda::launch_moe_route(p, stream_);
  check_launch("moe_route");
}

void CudaKernels::moe(const MoeArgs& a) {
  const MoeExpertWeights& w = a.experts;
  const bool has_shared = !a.shared.empty();
  const WeightFormat format = w.gate_up.format;
  const bool fp8 = format == WeightFormat::kFp8Block;
  if ((format != WeightFormat::kBf16 && !fp8) || (has_shared && a.shared.gate_up.format != format)) {
    fail(ErrorCode::kUnsupported, "moe: {} experts with a {} shared expert are not implemented on the cuda backend",
         weight_format_name(format), has_shared ? weight_format_name(a.shared.gate_up.format) : "no");
  }
  if (fp8 && a.xq.empty()) {
    fail(ErrorCode::kUnsupported, "moe: block-fp8 experts on cuda read the input quantised by its producer (xq)");
  }
  const int64_t T = a.x.dim(0), H = a.x.dim(1), E = w.num_experts(), k = a.top_k, I = w.intermediate();
  const int64_t Is = has_shared ? a.shared.intermediate() : 0;
  if (E > cuda::kMoeMaxExperts || k > cuda::kMoeMaxTopK) {
    fail(ErrorCode::kUnsupported, "moe: {} experts / top_k {} exceed the cuda kernels' {} / {}", E, k,
         cuda::kMoeMaxExperts, cuda::kMoeMaxTopK);
  }
  // Block FP8 adds: K and the intermediate sizes in whole 128-column blocks.
  const int64_t align = fp8 ? kFp8BlockSize : 8;
  if (H % align != 0 || I % align != 0 || Is % align != 0) {
    fail(ErrorCode::kUnsupported, "moe: hidden {} and intermediate sizes {} / {} must be multiples of {} on cuda", H,
         I, Is, align);
  }
  if (T == 0) return;
  cuda::MoeExpertPtrs ptrs;
  ptrs.gate_up_stride = 2 * I * H;
  ptrs.down_stride = H * I;
  if (fp8) {
    ptrs.gate_up_q = w.gate_up.weight.data_as<const uint8_t>();
    ptrs.gate_up_scale = w.gate_up.weight_scale.data_as<const float>();
    ptrs.gate_up_scale_stride = w.gate_up.weight_scale.numel() / E;
    ptrs.down_q = w.down.weight.data_as<const uint8_t>();
    ptrs.down_scale = w.down.weight_scale.data_as<const float>();
    ptrs.down_scale_stride = w.down.weight_scale.numel() / E;
    if (has_shared) {
      ptrs.shared_gate_up_q = a.shared.gate_up.weight.data_as<const uint8_t>();
      ptrs.shared_gate_up_scale = a.shared.gate_up.weight_scale.data_as<const float>();
      ptrs.shared_down_q = a.shared.down.weight.data_as<const uint8_t>();
      ptrs.shared_down_scale = a.shared.down.weight_scale.data_as<const float>();
    }
  } else {
    ptrs.gate_up = bf(w.gate_up.weight);
    ptrs.down = bf(w.down.weight);
    ptrs.shared_gate_up = has_shared ? bf(a.shared.gate_up.weight) : nullptr;
    ptrs.shared_down = has_shared ? bf(a.shared.down.weight) : nullptr;
  }
  ptrs.experts = static_cast<int>(E);
  ptrs.hidden = to_int(H, "hidden size");
  ptrs.inter = to_int(I, "intermediate size");
  ptrs.shared_inter = static_cast<int>(Is);

  const int64_t small_max = std::min<int64_t>(cuda::kMoeSmallMaxTokens, static_cast<int64_t>(kSmallXBytes / (H * 2)));
  if (small_max < 1) fail(ErrorCode::kUnsupported, "moe: hidden size {} is too large for the cuda kernels", H);
  if (T > small_max && sm90a_) {
    ++moe_counts_.grouped;
    moe_grouped(a, ptrs);
    return;
  }
  // The small regime, in chunks of tokens where no grouped GEMM fits (another GPU).
  if (T > small_max) ++moe_counts_.chunked;
  for (int64_t t0 = 0; t0 < T; t0 += small_max) {
    const int64_t n = std::min(small_max, T - t0);
    MoeArgs c = a;
    c.x = a.x.slice_rows(t0, t0 + n);
    c.out = a.out.slice_rows(t0, t0 + n);
    if (!a.topk_ids.empty()) c.topk_ids = a.topk_ids.slice_rows(t0, t0 + n);
    if (!a.topk_weights.empty()) c.topk_weights = a.topk_weights.slice_rows(t0, t0 + n);
    ++moe_counts_.small;
    moe_small(c, ptrs, t0);
  }
}

void CudaKernels::moe_small(const MoeArgs& a, const cuda::MoeExpertPtrs& ptrs, int64_t t0) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1), E = ptrs.experts, k = a.top_k, P = T * k;
  const bool fp8 = ptrs.gate_up_q != nullptr;
  const bool has_shared = ptrs.has_shared();
  const int64_t rows = P + (has_shared ? T : 0);
  const int64_t hidden_ld = std::max(ptrs.inter, ptrs.shared_inter);
  const int64_t max_items = (rows + cuda::kMoeItemRows - 1) / cuda::kMoeItemRows + std::min(E, P) + 1;
  float* logits = nullptr;
  cuda::MoeSmallPlan plan;
  uint16_t* hidden = nullptr;
  uint8_t* hidden_q = nullptr;
  float* hidden_scale = nullptr;
  ScratchCarver sc;
  sc.add(&logits, T * (E + 1))
      .add(&plan.num_items, 1)
      .add(&plan.item_expert, max_items)
      .add(&plan.item_pos, max_items)
      .add(&plan.item_rows, max_items)
      .add(&plan.sorted_token, rows)
      .add(&plan.sorted_weight, rows)
      .add(&plan.token_pos, P)
      .add(&hidden, rows * hidden_ld);
  if (fp8) sc.add(&hidden_q, rows * hidden_ld).add(&hidden_scale, rows * (hidden_ld / kFp8BlockSize));
  sc.assign(scratch(sc.bytes()));
  plan.max_items = static_cast<int>(max_items);

  cuda::MoeRouteSmallParams r;
  r.x = bf(a.x);
  r.router = bf(a.router);
  r.gate = has_shared && !a.shared.gate.empty() ? bf(a.shared.gate) : nullptr;
  r.logits = logits;
  r.counter = moe_counter_;
  r.topk_ids = a.topk_ids.empty() ? nullptr : a.topk_ids.data_as<int32_t>();
  r.topk_weights = a.topk_weights.empty() ? nullptr : a.topk_weights.data_as<float>();
  r.expert_load = a.expert_load.empty() ? nullptr : a.expert_load.data_as<int32_t>();
  r.plan = plan;
  r.tokens = static_cast<int>(T);
  r.hidden = static_cast<int>(H);
  r.experts = static_cast<int>(E);
  r.top_k = static_cast<int>(k);
  r.shared = has_shared;
  cuda::launch_moe_route_small(r, stream_);
  check_launch("moe (route)");

  cuda::MoeSmallParams m;
  m.x = bf(a.x);
  if (fp8) {  // rows [t0, t0 + T) of the producer's codes and group-major scales
    m.xq = a.xq.q.data_as<const uint8_t>() + t0 * H;
    m.xq_scale = a.xq.scale.data_as<const float>() + t0;
    m.xq_scale_ld = a.xq.rows();
  }
  m.w = ptrs;
  m.plan = plan;
  m.hidden = hidden;
  m.hidden_ld = static_cast<int>(hidden_ld);
  m.out = bf_mut(a.out);
  m.tokens = static_cast<int>(T);
  m.top_k = static_cast<int>(k);
  if (fp8) {
    // Block-FP8 gate|up projection on TMA (launch/moe.h kMoeUpTmaMinTokens).
    if (sm90a_ && moe_small_tma_ && T >= cuda::kMoeUpTmaMinTokens && cuda::launch_moe_up_tma_fp8(m, stream_)) {
      ++moe_counts_.small_up_tma;
    } else {
      cuda::launch_moe_up_small_fp8(m, stream_);
    }
    check_launch("moe (fp8 experts gate_up)");
    // The down projection's input quantised once for every block that reads
    // it (ops.h's quantisation of the SwiGLU rows, as the CPU does).
    cuda::QuantizeFp8Params q;
    q.x = hidden;
    q.x_stride = hidden_ld;
    q.out.q = hidden_q;
    q.out.scale = hidden_scale;
    q.out.group_scales = true;
    q.out.rows = static_cast<int>(rows);
    q.out.cols = static_cast<int>(hidden_ld);
    cuda::launch_quantize_fp8(q, stream_);
    check_launch("moe (fp8 hidden quantisation)");
    m.hidden_q = hidden_q;
    m.hidden_scale = hidden_scale;
    m.hidden_rows = static_cast<int>(rows);
    cuda::launch_moe_down_small_fp8(m, stream_);
    check_launch("moe (fp8 experts down)");
    return;
  }
  cuda::launch_moe_up_small(m, stream_);
  check_launch("moe (experts gate_up)");
  cuda::launch_moe_down_small(m, stream_);
  check_launch("moe (experts down)");
}

void CudaKernels::moe_grouped(const MoeArgs& a, const cuda::MoeExpertPtrs& ptrs) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1), E = ptrs.experts, k = a.top_k, P = T * k;
  const bool fp8 = ptrs.gate_up_q != nullptr;
  const bool has_shared = ptrs.has_shared();
  const bool gated = has_shared && !a.shared.gate.empty();
  const int64_t rows = P + (has_shared ? T : 0);
  const int64_t hidden_ld = std::max(ptrs.inter, ptrs.shared_inter);
  // Rows per tile: bf16 experts take 128 once the experts average that many
  // rows; the FP8 kernels always take 64 (moe_grouped_fp8.cu says why).
  const int tile_rows = !fp8 && P >= 96 * E ? 128 : 64;
  const int64_t slots = std::min(E, P) + 1;
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows + slots;
  const int64_t up_cols = (hidden_ld + cuda::kMoeUpColTile - 1) / cuda::kMoeUpColTile;
  const int64_t down_cols = (H + cuda::kMoeDownColTile - 1) / cuda::kMoeDownColTile;

  uint16_t *logits = nullptr, *gate_logits = nullptr, *hidden = nullptr, *y = nullptr;
  cuda::MoeGroupedPlan plan;
  ScratchCarver sc;
  sc.add(&logits, T * E)
      .add(&gate_logits, gated ? T : 0)
      .add(&plan.counts, E)
      .add(&plan.pair_rank, P)
      .add(&plan.topk_ids, P)
      .add(&plan.topk_weights, P)
      .add(&plan.sorted_token, rows)
      .add(&plan.sorted_weight, rows)
      .add(&plan.token_pos, P)
      .add(&plan.num_slots, 1)
      .add(&plan.slot_expert, E + 1)
      .add(&plan.slot_pos, E + 1)
      .add(&plan.slot_rows, E + 1)
      .add(&plan.up_item_begin, E + 2)
      .add(&plan.down_item_begin, E + 2)
      .add(&hidden, fp8 ? 0 : rows * hidden_ld)
      .add(&y, rows * H);
  // Block-FP8 experts: the hidden rows as codes and scales only.
  uint8_t* hidden_q = nullptr;
  float* hidden_scale = nullptr;
  if (fp8) sc.add(&hidden_q, rows * hidden_ld).add(&hidden_scale, hidden_ld / kFp8BlockSize * rows);
  sc.assign(scratch(sc.bytes()));

  const uint16_t* x = bf(a.x);
  // The router and the shared-expert gate as two GEMMs: a merged [E + 1]
  // output row would not keep the alignment cuBLASLt's fast kernels need.
  gemm_.run(x, bf(a.router), logits, false, T, E, H, stream_);
  if (gated) gemm_.run(x, bf(a.shared.gate), gate_logits, false, T, 1, H, stream_);
  HYLLM_CUDA_CHECK(cudaMemsetAsync(plan.counts, 0, static_cast<size_t>(E) * 4, stream_));

  cuda::MoeRouteGroupedParams r;
  r.logits = logits;
  r.logits_ld = E;
  r.gate_logits = gated ? gate_logits : nullptr;
  r.gate_ld = 1;
  r.user_ids = a.topk_ids.empty() ? nullptr : a.topk_ids.data_as<int32_t>();
  r.user_weights = a.topk_weights.empty() ? nullptr : a.topk_weights.data_as<float>();
  r.plan = plan;
  r.tokens = to_int(T, "tokens");
  r.experts = static_cast<int>(E);
  r.top_k = static_cast<int>(k);
  r.shared = has_shared;
  cuda::launch_moe_route_grouped(r, stream_);
  check_launch("moe (route)");

  cuda::MoePlanGroupedParams pp;
  pp.plan = plan;
  pp.expert_load = a.expert_load.empty() ? nullptr : a.expert_load.data_as<int32_t>();
  pp.tokens = static_cast<int>(T);
  pp.experts = static_cast<int>(E);
  pp.top_k = static_cast<int>(k);
  pp.shared = has_shared;
  pp.tile_rows = tile_rows;
  pp.up_col_tile = cuda::kMoeUpColTile;
  pp.down_col_tile = cuda::kMoeDownColTile;
  pp.inter = ptrs.inter;
  pp.shared_inter = ptrs.shared_inter;
  pp.hidden = ptrs.hidden;
  cuda::launch_moe_plan_grouped(pp, stream_);
  check_launch("moe (plan)");

  cuda::MoeGroupedGemmParams g;
  g.x = x;
  g.w = ptrs;
  g.plan = plan;
  g.hidden = hidden;
  g.hidden_ld = static_cast<int>(hidden_ld);
  g.y = y;
  g.out = bf_mut(a.out);
  g.tokens = static_cast<int>(T);
  g.top_k = static_cast<int>(k);
  g.tile_rows = tile_rows;
  g.grid = num_sms_;
  g.max_up_items = to_int(tiles * up_cols, "moe work items");
  g.max_down_items = to_int(tiles * down_cols, "moe work items");
  if (fp8) {
    g.xq = a.xq.q.data_as<const uint8_t>();
    g.x_scale = a.xq.scale.data_as<const float>();
    g.x_scale_ld = a.xq.rows();
    g.hidden_q = hidden_q;
    g.hidden_scale = hidden_scale;
    g.hidden_scale_ld = rows;
    if (!cuda::launch_moe_up_grouped_fp8(g, stream_) || !cuda::launch_moe_down_grouped_fp8(g, stream_))
      fail(ErrorCode::kUnsupported, "moe: the driver cannot map the FP8 experts' weights for TMA");
    check_launch("moe (grouped fp8)");
  } else {
    cuda::launch_moe_up_grouped(g, stream_);
    check_launch("moe (grouped gate_up)");
    cuda::launch_moe_down_grouped(g, stream_);
    check_launch("moe (grouped down)");
  }
  cuda::launch_moe_combine(g, stream_);
  check_launch("moe (combine)");
}

}  // namespace hyllm
