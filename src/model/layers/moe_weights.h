#pragma once
// Loading a MoE layer's weights in the layout the moe op reads (ops.h
// MoeExpertWeights): every expert's gate and up rows merged into one
// [n, 2I, H] tensor and the down projections into [n, H, I], whether the
// checkpoint stores them fused (the BF16 repos) or one module per expert (the
// FP8 repos); the router with the shared-expert gate row right after it, so
// that one GEMM computes both.
//
// Formats: BF16 (other float types converted), block FP8 (codes and
// 128 x 128 scale blocks concatenated as stored; an intermediate size that is
// not a multiple of 128 is padded with zero rows / columns, which leaves
// every output unchanged), per-tensor FP8 (gate and up re-quantised to the
// larger weight scale and given the larger input scale, as for any merged
// per-tensor projection).

#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/layers/weights.h"

namespace hyllm {

struct StackedExperts {
  LinearWeight gate_up;  // [n, 2I, H]
  LinearWeight down;     // [n, H, I]
  int64_t intermediate = 0;  // I, padding included
};

// <prefix>gate_up_proj [E, 2I, H] and <prefix>down_proj [E, H, I] (BF16).
StackedExperts load_fused_experts(WeightLoader& w, const std::string& prefix);

// Modules <m>gate_proj, <m>up_proj, <m>down_proj for each m of `modules`
// (e.g. "layers.0.mlp.experts.3."), stacked in that order.
StackedExperts load_per_expert(WeightLoader& w, const std::vector<std::string>& modules);

// Expert `e` of a stack as a 2-D linear weight.
LinearWeight unstack(const LinearWeight& stacked, int64_t e);

// The router [E, H] (BF16) followed in the same allocation by the optional
// shared-expert gate row [1, H]; returns the [E (+1), H] tensor.
TensorView load_router(WeightLoader& w, const std::string& router, const std::string& shared_gate);

}  // namespace hyllm
