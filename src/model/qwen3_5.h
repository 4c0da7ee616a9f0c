#pragma once
// Qwen3.5 / Qwen3.6, dense and MoE, from the shared layers: embed ->
// [GDN | gated attention] + [MLP | MoE] per layer as layer_types says ->
// final RMSNorm and lm_head at the sampled rows only.

#include <memory>

#include "model/model.h"

namespace hyllm {

std::unique_ptr<Model> make_qwen3_5(const ModelConfig& config, const WeightSource& weights, Backend& backend,
                                    const ModelOptions& options);

}  // namespace hyllm
