#pragma once
// The kernel table a backend implements: one virtual per op of ops.h. The ops
// validate their arguments before they call here, so an implementation may
// assume the invariants documented in ops.h. The base class reports
// kUnsupported for every op, so that a backend can grow op by op.

#include "backend/ops.h"

namespace hyllm {

class Kernels {
 public:
  virtual ~Kernels() = default;

  virtual void linear(const LinearArgs& a);
  virtual void quantize_fp8(const QuantizeFp8Args& a);
  virtual void embedding(const EmbeddingArgs& a);
  virtual void gather_rows(const GatherRowsArgs& a);
  virtual void fill_random(const FillRandomArgs& a);
  virtual void quantize_weight_fp8(const QuantizeWeightFp8Args& a);
  virtual void rms_norm(const RmsNormArgs& a);
  virtual void gated_rms_norm(const GatedRmsNormArgs& a);
  virtual void attention_prep(const AttentionPrepArgs& a);
  virtual void paged_attention(const PagedAttentionArgs& a);
  virtual void gdn_conv(const GdnConvArgs& a);
  virtual void gated_delta_rule(const GatedDeltaRuleArgs& a);
  virtual void select_state(const SelectStateArgs& a);
  virtual void swiglu(const SwigluArgs& a);
  virtual void moe_route(const MoeRouteArgs& a);
  virtual void moe(const MoeArgs& a);

 protected:
  // Throws kUnsupported naming the op and this table.
  [[noreturn]] void unsupported(const char* op) const;
  virtual const char* table_name() const { return "this backend"; }
};

}  // namespace hyllm
