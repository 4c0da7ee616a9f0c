#include "backend/kernels.h"

#include "backend/backend.h"

namespace hyllm {

void Kernels::unsupported(const char* op) const {
  fail(ErrorCode::kUnsupported, "op {} is not implemented on {}", op, table_name());
}

void Kernels::linear(const LinearArgs&) { unsupported("linear"); }
void Kernels::quantize_fp8(const QuantizeFp8Args&) { unsupported("quantize_fp8"); }
void Kernels::embedding(const EmbeddingArgs&) { unsupported("embedding"); }
void Kernels::gather_rows(const GatherRowsArgs&) { unsupported("gather_rows"); }
void Kernels::fill_random(const FillRandomArgs&) { unsupported("fill_random"); }
void Kernels::quantize_weight_fp8(const QuantizeWeightFp8Args&) { unsupported("quantize_weight_fp8"); }
void Kernels::rms_norm(const RmsNormArgs&) { unsupported("rms_norm"); }
void Kernels::gated_rms_norm(const GatedRmsNormArgs&) { unsupported("gated_rms_norm"); }
void Kernels::attention_prep(const AttentionPrepArgs&) { unsupported("attention_prep"); }
void Kernels::paged_attention(const PagedAttentionArgs&) { unsupported("paged_attention"); }
void Kernels::gdn_conv(const GdnConvArgs&) { unsupported("gdn_conv"); }
void Kernels::gated_delta_rule(const GatedDeltaRuleArgs&) { unsupported("gated_delta_rule"); }
void Kernels::select_state(const SelectStateArgs&) { unsupported("select_state"); }
void Kernels::swiglu(const SwigluArgs&) { unsupported("swiglu"); }
void Kernels::moe_route(const MoeRouteArgs&) { unsupported("moe_route"); }
void Kernels::moe(const MoeArgs&) { unsupported("moe"); }

Kernels& Backend::kernels() {
  static Kernels none;
  return none;
}

}  // namespace hyllm
