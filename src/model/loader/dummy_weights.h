#pragma once
// Random weights with exactly the catalogue's names, shapes and dtypes, made
// from a seed without any files (`--load-format dummy`). Each tensor is
// generated on demand by read(), so a 27B model never exists on the host all
// at once. The same (config, seed, name) always gives the same bytes, in any
// order and on any number of threads (a counter-based generator).
//
// Magnitudes keep a forward pass finite: linear and embedding weights
// ~N(0, 0.02); (1+w) RMSNorm weights ~N(0, 0.02) (so the scale is ~1); the
// GDN gated-norm weight ~1 + N(0, 0.02); A_log = log(U(1, 16)); dt_bias
// ~U(-0.1, 0.1); conv1d ~U(-0.5, 0.5); FP8 weights are e4m3 codes of
// N(0, 112) with weight scales 0.02/112 (block scales ~U(0.9, 1.1) times
// that), so dequantized weights are ~N(0, 0.02) like the BF16 ones and a
// 64-layer forward pass stays as finite as the BF16 one; ModelOpt input
// scales 0.1 (activations within +-44.8) and KV scales 0.05.
//
// Dummy routers route almost uniformly; real ones do not. A router skew S > 0
// scales router row e of each MoE layer by dummy_router_row_scales: experts
// ranked by a per-layer permutation, the expert of rank r scaled by
// (r + 1)^-S and the scales normalised to a root mean square of 1, so that a
// few experts per layer win most tokens (the hotter, the larger S).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/loader/qwen35_catalogue.h"
#include "model/loader/weight_source.h"

namespace hyllm {

// Row scales of a skewed dummy router of E experts (see above); all 1 for skew 0.
std::vector<float> dummy_router_row_scales(int64_t num_experts, float skew, uint64_t stream);

class DummyWeights : public WeightSource {
 public:
  DummyWeights(const ModelConfig& config, uint64_t seed, float router_skew = 0.0f);
  DummyWeights(const ModelConfig& config, uint64_t seed, ExpertLayout experts, float router_skew = 0.0f);

  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  void read(const std::string& name, void* host_dst) const override;
  // Every tensor but A_log (an affine fill: bf16, f32 and e4m3 alike).
  std::optional<GeneratedFill> generated(const std::string& name) const override;
  std::string describe() const override;

  const std::vector<TensorSpec>& specs() const { return specs_; }

 private:
  std::vector<TensorSpec> specs_;
  std::vector<TensorInfo> tensors_;  // parallel to specs_
  uint64_t seed_;
  float router_skew_ = 0.0f;
};

}  // namespace hyllm
