// The CUDA kernel table's MoE ops: routing, and the routed experts as
// permute -> grouped gate/up GEMM -> SwiGLU -> grouped down GEMM -> combine,
// all on the stream with no host read of the routing.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/launch/dense.h"
#include "backend/cuda/launch/moe.h"

namespace hyllm {

using namespace cuda_detail;

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

const uint16_t* const* CudaKernels::expert_table(const std::vector<LinearWeight>& ws) {
  const void* key = ws.front().weight.data();
  auto it = expert_tables_.find(key);
  if (it != expert_tables_.end()) return static_cast<const uint16_t* const*>(it->second);
  std::vector<const void*> ptrs;
  ptrs.reserve(ws.size());
  for (const LinearWeight& w : ws) ptrs.push_back(w.weight.data());
  void* table = nullptr;
  HYLLM_CUDA_CHECK(cudaMalloc(&table, ptrs.size() * sizeof(void*)));
  // Built once per weight set (at the first forward), not per step.
  HYLLM_CUDA_CHECK(cudaMemcpy(table, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice));
  expert_tables_.emplace(key, table);
  return static_cast<const uint16_t* const*>(table);
}

void CudaKernels::moe_experts(const MoeExpertsArgs& a) {
  const MoeExpertWeights& w = a.experts;
  const bool fused = w.fused();
  if ((fused && w.gate_up.format != WeightFormat::kBf16) ||
      (!fused && (w.expert_gate[0].format != WeightFormat::kBf16 || w.expert_down[0].format != WeightFormat::kBf16))) {
    fail(ErrorCode::kUnsupported, "moe_experts: fp8 expert weights are not implemented on the cuda backend yet");
  }
  const int64_t T = a.x.dim(0), H = a.x.dim(1), k = a.topk_ids.dim(1);
  const int64_t E = w.num_experts();
  const int64_t I = fused ? w.gate_up.weight.dim(1) / 2 : w.expert_gate[0].out_features();
  if (E > cuda::kMoeMaxExperts || k > cuda::kMoeMaxTopK) {
    fail(ErrorCode::kUnsupported, "moe_experts: {} experts / top_k {} exceed the cuda kernels' {} / {}", E, k,
         cuda::kMoeMaxExperts, cuda::kMoeMaxTopK);
  }
  if (H % 8 != 0 || I % 8 != 0) {
    fail(ErrorCode::kUnsupported, "moe_experts: hidden {} and intermediate {} must be multiples of 8 on cuda", H, I);
  }
  if (T == 0) return;
  const int64_t P = T * k;
  // Scratch: offsets [E+1], active [E+1], sorted_token [P], row_of [P], gate_up [P, 2I], hidden [P, I], y [P, H].
  auto align = [](size_t b) { return (b + 255) & ~size_t{255}; };
  const size_t b_off = align((E + 1) * 4), b_idx = align(P * 4), b_gu = align(P * 2 * I * 2),
               b_hid = align(P * I * 2), b_y = align(P * H * 2);
  char* s = static_cast<char*>(scratch(2 * b_off + 2 * b_idx + b_gu + b_hid + b_y));
  int32_t* offsets = reinterpret_cast<int32_t*>(s);
  int32_t* active = reinterpret_cast<int32_t*>(s + b_off);
  s += b_off;
  int32_t* sorted_token = reinterpret_cast<int32_t*>(s + b_off);
  int32_t* row_of = reinterpret_cast<int32_t*>(s + b_off + b_idx);
  uint16_t* gate_up = reinterpret_cast<uint16_t*>(s + b_off + 2 * b_idx);
  uint16_t* hidden = reinterpret_cast<uint16_t*>(s + b_off + 2 * b_idx + b_gu);
  uint16_t* y = reinterpret_cast<uint16_t*>(s + b_off + 2 * b_idx + b_gu + b_hid);

  cuda::MoePermuteParams pp;
  pp.topk_ids = i32(a.topk_ids);
  pp.tokens = to_int(T, "tokens");
  pp.top_k = static_cast<int>(k);
  pp.experts = static_cast<int>(E);
  pp.offsets = offsets;
  pp.sorted_token = sorted_token;
  pp.row_of = row_of;
  pp.active = active;
  cuda::launch_moe_permute(pp, stream_);
  // Blocks only for experts that can have rows: at most one per routed row.
  const int grid_groups = static_cast<int>(std::min<int64_t>(E, P));

  cuda::GroupedGemmParams g1;
  g1.x = bf(a.x);
  g1.x_stride = H;
  g1.row_index = sorted_token;
  g1.offsets = offsets;
  g1.active = active;
  g1.grid_groups = grid_groups;
  g1.groups = static_cast<int>(E);
  g1.k = static_cast<int>(H);
  g1.out_stride = 2 * I;
  if (fused) {
    g1.w = bf(w.gate_up.weight);
    g1.w_expert_stride = 2 * I * H;
    g1.n = to_int(2 * I, "2 * intermediate");
    g1.out = gate_up;
    cuda::launch_grouped_gemm(g1, stream_);
  } else {
    g1.n = static_cast<int>(I);
    g1.w_table = expert_table(w.expert_gate);
    g1.out = gate_up;
    cuda::launch_grouped_gemm(g1, stream_);
    g1.w_table = expert_table(w.expert_up);
    g1.out = gate_up + I;
    cuda::launch_grouped_gemm(g1, stream_);
  }

  cuda::SwigluParams sp;
  sp.x = gate_up;
  sp.x_stride = 2 * I;
  sp.out = hidden;
  sp.rows = to_int(P, "routed rows");
  sp.inter = static_cast<int>(I);
  cuda::launch_swiglu(sp, stream_);

  cuda::GroupedGemmParams g2;
  g2.x = hidden;
  g2.x_stride = I;
  g2.offsets = offsets;
  g2.active = active;
  g2.grid_groups = grid_groups;
  g2.groups = static_cast<int>(E);
  g2.k = static_cast<int>(I);
  g2.n = static_cast<int>(H);
  g2.out = y;
  g2.out_stride = H;
  if (fused) {
    g2.w = bf(w.down.weight);
    g2.w_expert_stride = H * I;
  } else {
    g2.w_table = expert_table(w.expert_down);
  }
  cuda::launch_grouped_gemm(g2, stream_);

  cuda::MoeCombineParams cp;
  cp.y = y;
  cp.row_of = row_of;
  cp.topk_ids = i32(a.topk_ids);
  cp.topk_weights = a.topk_weights.data_as<const float>();
  cp.shared = a.shared.empty() ? nullptr : bf(a.shared);
  cp.shared_gate = a.shared_gate.empty() ? nullptr : a.shared_gate.data();
  cp.shared_gate_f32 = !a.shared_gate.empty() && is_f32(a.shared_gate);
  cp.out = bf_mut(a.out);
  cp.tokens = static_cast<int>(T);
  cp.top_k = static_cast<int>(k);
  cp.hidden = static_cast<int>(H);
  cuda::launch_moe_combine(cp, stream_);
  check_launch("moe_experts");
}

}  // namespace hyllm
