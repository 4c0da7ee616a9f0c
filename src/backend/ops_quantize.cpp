// Validation and dispatch of the online weight quantisation.
#include "backend/backend.h"
#include "backend/kernels.h"
#include "backend/ops.h"
#include "backend/ops_check.h"

namespace hyllm {

using ops_detail::OpCheck;

void quantize_weight_fp8(Backend& be, const QuantizeWeightFp8Args& a) {
  OpCheck c(be.device(), "quantize_weight_fp8");
  const int64_t n = a.w.numel();
  c.require(a.w.dtype() == DType::kBF16, "w dtype {} is not bf16", dtype_name(a.w.dtype()));
  c.require(a.out.dtype() == DType::kF8E4M3, "out dtype {} is not float8_e4m3fn", dtype_name(a.out.dtype()));
  c.require(a.scale.dtype() == DType::kF32, "scale dtype {} is not f32", dtype_name(a.scale.dtype()));
  c.require(a.out.numel() == n, "out has {} elements, w {}", a.out.numel(), n);
  c.require(a.scale.numel() >= 1, "scale has no element");
  for (const auto& [field, t] : {std::pair{"w", &a.w}, std::pair{"out", &a.out}, std::pair{"scale", &a.scale}}) {
    c.require(t->device() == be.device(), "{} is not on the backend's device", field);
    c.require(t->numel() == 0 || t->data() != nullptr, "{} has no data", field);
  }
  be.kernels().quantize_weight_fp8(a);
}

}  // namespace hyllm
