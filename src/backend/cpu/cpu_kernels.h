#pragma once
// The CPU reference kernels: the Kernels table of the CPU backend. Each op
// family lives in its own file (cpu_<family>.cpp); all run on the global
// thread pool and compute in fp32 (fp64 where exactness needs it).

#include "backend/kernels.h"

namespace hyllm {

class CpuKernels final : public Kernels {
 public:
  void linear(const LinearArgs& a) override;
  void embedding(const EmbeddingArgs& a) override;
  void gather_rows(const GatherRowsArgs& a) override;
  void rms_norm(const RmsNormArgs& a) override;
  void gated_rms_norm(const GatedRmsNormArgs& a) override;
  void attention_prep(const AttentionPrepArgs& a) override;
  void paged_attention(const PagedAttentionArgs& a) override;
  void gdn_conv(const GdnConvArgs& a) override;
  void gated_delta_rule(const GatedDeltaRuleArgs& a) override;
  void swiglu(const SwigluArgs& a) override;
  void moe_route(const MoeRouteArgs& a) override;
  void moe_experts(const MoeExpertsArgs& a) override;

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
