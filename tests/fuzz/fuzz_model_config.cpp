// config.json and the quantization configs: the input is config.json, then
// optionally a NUL and hf_quant_config.json. A config that parses must be
// usable: its derived sizes, its description, the quantization decisions
// and the tensor catalogue built from it either work or fail cleanly.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

#include "fuzz_util.h"
#include "model/config/model_config.h"
#include "model/loader/qwen35_catalogue.h"

using namespace hyllm;
using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = fuzz::split_nul(fuzz::as_text(data, size), 2);
  json config = json::parse(parts[0], nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  json hf_quant;
  if (parts.size() == 2) {
    hf_quant = json::parse(parts[1], nullptr, /*allow_exceptions=*/false);
    if (hf_quant.is_discarded()) return 0;
  }
  fuzz::expect_clean_errors([&] { (void)parse_generation_config(config); });
  fuzz::expect_clean_errors([&] {
    ModelConfig c = parse_model_config(config, parts.size() == 2 ? &hf_quant : nullptr);
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) fuzz::finding("layer_types length");
    (void)describe(c);
    (void)c.num_full_attention_layers();
    (void)c.q_proj_rows();
    (void)c.linear_conv_dim();
    for (const char* module : {"lm_head", "layers.0.self_attn.q_proj", "layers.3.mlp.experts.7.down_proj",
                               "layers.1.linear_attn.in_proj_qkv", "layers.2.mlp.shared_expert.gate_proj"}) {
      (void)c.is_quantized_module(module);
    }
    // The catalogue lists every expert of every layer (a real 35B-A3B config:
    // 30,000 tensors, a second under ASan); it is built for configs up to a
    // few thousand layer-experts so that the fuzzer keeps its pace.
    if (c.num_hidden_layers <= 4096 / std::max<int64_t>(1, c.num_experts)) {
      for (ExpertLayout layout : {ExpertLayout::kFused, ExpertLayout::kPerExpert}) {
        fuzz::expect_clean_errors([&] {
          for (const TensorSpec& t : qwen35_expected_tensors(c, layout)) (void)t.shape.numel();
        });
      }
    }
  });
  return 0;
}
