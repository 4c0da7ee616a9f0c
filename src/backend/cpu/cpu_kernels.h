#pragma once
// The CPU reference kernels: the Kernels table of the CPU backend. Each op
// family lives in its own file (cpu_<family>.cpp); all run on the global
// thread pool and compute in fp32 (fp64 where exactness needs it).
//
// CPU kernels are batch-invariant: the result for a token (a row of an
// activation) is bit-identical whatever other rows or sequences share the
// step, whatever the step's row count, and whether the token arrives in a
// prefill chunk, a decode step or a recompute after preemption. Every
// reduction runs in an order fixed by the row's own data and sizes: linear
// uses one fixed-order dot per output element (cpu_gemm.h) for every M,
// attention takes each query row over its visible keys in position order, the
// gated delta rule always runs the token-by-token recurrence (cpu_gdn.cpp),
// MoE adds a token's experts in expert order, norms and the conv work per
// row. The engine's greedy outputs therefore do not depend on batching.

#include "backend/kernels.h"

namespace hyllm {

class CpuKernels final : public Kernels {
 public:
  void linear(const LinearArgs& a) override;
  void quantize_fp8(const QuantizeFp8Args& a) override;
  void embedding(const EmbeddingArgs& a) override;
  void gather_rows(const GatherRowsArgs& a) override;
  void fill_random(const FillRandomArgs& a) override;
  void quantize_weight_fp8(const QuantizeWeightFp8Args& a) override;
  void rms_norm(const RmsNormArgs& a) override;
  void gated_rms_norm(const GatedRmsNormArgs& a) override;
  void attention_prep(const AttentionPrepArgs& a) override;
  void paged_attention(const PagedAttentionArgs& a) override;
  void gdn_conv(const GdnConvArgs& a) override;
  void gated_delta_rule(const GatedDeltaRuleArgs& a) override;
  void select_state(const SelectStateArgs& a) override;
  void swiglu(const SwigluArgs& a) override;
  void moe_route(const MoeRouteArgs& a) override;
  void moe(const MoeArgs& a) override;

 protected:
  const char* table_name() const override { return "the cpu backend"; }
};

namespace cpu {
// out[M, N] (bf16 or f32, row stride N) = x[M, K] (bf16, row stride K) W^T,
// with the semantics of ops.h's linear for every weight format. w is a 2-D
// weight (one expert of a fused tensor is sliced by the caller).
void linear_forward(const LinearWeight& w, const uint16_t* x, int64_t M, void* out, DType out_dtype);
}  // namespace cpu

}  // namespace hyllm
