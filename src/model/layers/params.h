#pragma once
// Small layer building blocks: plain parameters, RMSNorm, rotary settings.

#include <string>

#include "backend/ops.h"
#include "model/layers/activation.h"
#include "model/layers/weights.h"

namespace hyllm {

// A plain parameter in the dtype the ops take: f32 stays f32 (A_log and the
// GDN norm weight are stored so), everything else becomes bf16.
inline TensorView load_param(WeightLoader& w, const std::string& name) {
  DType stored = w.info(name).dtype;
  return w.load(name, stored == DType::kF32 ? DType::kF32 : DType::kBF16);
}

// RMSNorm over the hidden size, in Qwen3.5's (1 + w) form unless plus_one is false.
struct RmsNorm {
  TensorView weight;
  float eps = 1e-6f;
  bool plus_one = true;

  static RmsNorm load(WeightLoader& w, const std::string& name, float eps, bool plus_one = true) {
    return {load_param(w, name), eps, plus_one};
  }
  // out = norm(x + residual_in); residual_out = x + residual_in (when given).
  void apply(Backend& be, const TensorView& x, const TensorView& out, const TensorView& residual_in = {},
             const TensorView& residual_out = {}) const {
    rms_norm(be, {x, weight, out, residual_in, residual_out, eps, plus_one});
  }
  // The same, writing every form of the output its consumers read.
  void apply(Backend& be, const TensorView& x, const LayerInput& out, const TensorView& residual_in = {},
             const TensorView& residual_out = {}) const {
    rms_norm(be, {x, weight, out.x, residual_in, residual_out, eps, plus_one, out.xq});
  }
};

// Partial NeoX RoPE on the first rotary_dim dims of each head (text-only
// mRoPE is plain positions, so one position per token suffices).
struct Rotary {
  int64_t rotary_dim = 0;
  float theta = 10000.0f;
};

}  // namespace hyllm
