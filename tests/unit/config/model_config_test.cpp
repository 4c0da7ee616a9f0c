#include "model/config/model_config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace hyllm {
namespace {

using nlohmann::json;

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/configs" / name;
}

std::vector<LayerType> every_fourth_full(int64_t n) {
  std::vector<LayerType> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i % 4 == 3 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  return v;
}

void expect_common_qwen35(const ModelConfig& c) {
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{11, 11, 10}));
  EXPECT_TRUE(c.mrope_interleaved);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.mamba_ssm_dtype, DType::kF32);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{248044}));
  EXPECT_EQ(c.layer_types, every_fourth_full(c.num_hidden_layers));
}

TEST(ModelConfig, Qwen35_0_8B) {
  ModelConfig c = load_model_config(fixture("qwen3_5_0_8b"));
  EXPECT_EQ(c.architecture, "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(c.model_type, "qwen3_5_text");
  EXPECT_FALSE(c.is_moe);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 16);
  EXPECT_EQ(c.intermediate_size, 3584);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.quant.method, QuantMethod::kNone);
  expect_common_qwen35(c);
}

TEST(ModelConfig, Qwen35_27B) {
  ModelConfig c = load_model_config(fixture("qwen3_5_27b"));
  EXPECT_FALSE(c.is_moe);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_hidden_layers, 64);
  EXPECT_EQ(c.num_full_attention_layers(), 16);
  EXPECT_EQ(c.num_linear_attention_layers(), 48);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.linear_num_value_heads, 48);
  EXPECT_EQ(c.intermediate_size, 17408);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.q_proj_rows(), 12288);
  EXPECT_EQ(c.linear_conv_dim(), 10240);
  EXPECT_EQ(c.linear_value_dim(), 6144);
  expect_common_qwen35(c);
}

TEST(ModelConfig, Qwen35_35B_A3B) {
  ModelConfig c = load_model_config(fixture("qwen3_5_35b_a3b"));
  EXPECT_EQ(c.architecture, "Qwen3_5MoeForConditionalGeneration");
  EXPECT_EQ(c.model_type, "qwen3_5_moe_text");
  EXPECT_TRUE(c.is_moe);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.num_full_attention_layers(), 10);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 512);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.intermediate_size, 0);
  expect_common_qwen35(c);
}

TEST(ModelConfig, Describe) {
  EXPECT_EQ(describe(load_model_config(fixture("qwen3_5_35b_a3b_fp8"))),
            "Qwen3_5MoeForConditionalGeneration: 40 layers (30 linear attention, 10 full attention), hidden 2048, "
            "vocab 248320, 256 experts top-8, bfloat16, fp8_block");
  EXPECT_EQ(describe(load_model_config(fixture("qwen3_5_0_8b"))),
            "Qwen3_5ForConditionalGeneration: 24 layers (18 linear attention, 6 full attention), hidden 1024, "
            "vocab 248320, intermediate 3584, bfloat16, tied embeddings, none");
}

TEST(ModelConfig, FlatFormsMatchNested) {
  ModelConfig nested27 = load_model_config(fixture("qwen3_5_27b"));
  ModelConfig flat27 = load_model_config(fixture("qwen3_5_27b_flat"));
  EXPECT_EQ(flat27.architecture, "Qwen3_5ForCausalLM");
  EXPECT_EQ(flat27.layer_types, nested27.layer_types);  // from full_attention_interval
  EXPECT_EQ(flat27.hidden_size, nested27.hidden_size);
  EXPECT_EQ(flat27.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(flat27.rope_theta, 1e7);  // legacy top-level rope_theta
  EXPECT_EQ(flat27.mrope_section, nested27.mrope_section);
  EXPECT_EQ(flat27.dtype, DType::kBF16);  // torch_dtype
  ModelConfig flat35 = load_model_config(fixture("qwen3_5_35b_a3b_flat"));
  EXPECT_EQ(flat35.architecture, "Qwen3_5MoeForCausalLM");
  EXPECT_TRUE(flat35.is_moe);
  EXPECT_EQ(flat35.num_experts, 256);
  EXPECT_EQ(flat35.layer_types, every_fourth_full(40));
}

TEST(ModelConfig, QwenBlockFp8) {
  ModelConfig c = load_model_config(fixture("qwen3_5_27b_fp8"));
  EXPECT_EQ(c.quant.method, QuantMethod::kFp8Block);
  EXPECT_EQ(c.quant.weight_block_size, (std::array<int64_t, 2>{128, 128}));
  EXPECT_EQ(c.quant.activation_scheme, "dynamic");
  EXPECT_FALSE(c.quant.has_kv_cache_scales());
  EXPECT_TRUE(c.is_quantized_module("layers.3.self_attn.q_proj"));
  EXPECT_TRUE(c.is_quantized_module("model.language_model.layers.0.linear_attn.in_proj_qkv"));
  EXPECT_TRUE(c.is_quantized_module("layers.0.mlp.gate_proj"));
  EXPECT_FALSE(c.is_quantized_module("layers.0.linear_attn.in_proj_a"));
  EXPECT_FALSE(c.is_quantized_module("layers.0.linear_attn.in_proj_b"));
  EXPECT_FALSE(c.is_quantized_module("lm_head"));
  EXPECT_FALSE(c.is_quantized_module("embed_tokens"));
  EXPECT_FALSE(c.is_quantized_module("model.visual.blocks.0.attn.qkv"));

  ModelConfig m = load_model_config(fixture("qwen3_5_35b_a3b_fp8"));
  EXPECT_EQ(m.quant.method, QuantMethod::kFp8Block);
  EXPECT_FALSE(m.is_quantized_module("layers.7.mlp.gate"));  // the router
  EXPECT_TRUE(m.is_quantized_module("layers.7.mlp.gate_proj"));  // "mlp.gate" is not a prefix of it
  EXPECT_TRUE(m.is_quantized_module("layers.7.mlp.experts.12.gate_proj"));
  EXPECT_FALSE(m.is_quantized_module("layers.7.mlp.shared_expert_gate"));
  EXPECT_TRUE(m.is_quantized_module("layers.7.mlp.shared_expert.up_proj"));
  EXPECT_FALSE(m.is_quantized_module("layers.6.linear_attn.in_proj_b"));
}

TEST(ModelConfig, ModelOptFp8FromHfQuantConfig) {
  ModelConfig c = load_model_config(fixture("qwen3_5_27b_modelopt"));
  EXPECT_EQ(c.quant.method, QuantMethod::kModelOptFp8);
  EXPECT_EQ(c.quant.activation_scheme, "static");
  EXPECT_TRUE(c.quant.has_kv_cache_scales());
  EXPECT_TRUE(c.is_quantized_module("layers.3.self_attn.o_proj"));
  EXPECT_FALSE(c.is_quantized_module("layers.2.linear_attn.in_proj_a"));
  EXPECT_FALSE(c.is_quantized_module("layers.2.linear_attn.conv1d"));
  EXPECT_TRUE(c.is_quantized_module("layers.2.linear_attn.out_proj"));
  EXPECT_FALSE(c.is_quantized_module("lm_head"));
}

TEST(ModelConfig, ModelOptFp8InConfigJson) {
  ModelConfig c = load_model_config(fixture("qwen3_5_35b_a3b_modelopt"));
  EXPECT_EQ(c.quant.method, QuantMethod::kModelOptFp8);
  EXPECT_FALSE(c.quant.has_kv_cache_scales());
  EXPECT_FALSE(c.is_quantized_module("layers.0.mlp.gate"));
  EXPECT_TRUE(c.is_quantized_module("layers.0.mlp.gate_proj"));
  EXPECT_TRUE(c.is_quantized_module("layers.0.mlp.experts.3.down_proj"));
  EXPECT_FALSE(c.is_quantized_module("layers.0.mlp.shared_expert_gate"));
  EXPECT_FALSE(c.is_quantized_module("layers.0.linear_attn.in_proj_a"));
  EXPECT_FALSE(c.is_quantized_module("mtp.fc"));
}

TEST(ModelConfig, UnquantizedModelQuantizesNothing) {
  ModelConfig c = load_model_config(fixture("qwen3_5_27b"));
  EXPECT_FALSE(c.is_quantized_module("layers.3.self_attn.q_proj"));
}

TEST(ModelConfig, CanonicalNames) {
  EXPECT_EQ(canonical_module_name("model.language_model.layers.3.mlp"), "layers.3.mlp");
  EXPECT_EQ(canonical_module_name("model.layers.3.mlp"), "layers.3.mlp");
  EXPECT_EQ(canonical_module_name("lm_head"), "lm_head");
  EXPECT_EQ(canonical_module_name("model.visual.blocks.0"), "visual.blocks.0");
}

TEST(GenerationConfig, Qwen35Defaults) {
  GenerationConfig g = load_generation_config(fixture("qwen3_5_27b"));
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{248046, 248044}));
  EXPECT_EQ(g.bos_token_id, 248044);
  EXPECT_EQ(g.pad_token_id, 248044);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(g.top_p.value(), 0.95);
  EXPECT_DOUBLE_EQ(g.temperature.value(), 0.6);
  EXPECT_EQ(g.do_sample, true);
  EXPECT_FALSE(g.repetition_penalty.has_value());
  EXPECT_FALSE(g.max_new_tokens.has_value());
}

TEST(GenerationConfig, AbsentFileIsEmpty) {
  GenerationConfig g = load_generation_config(fixture("qwen3_5_27b_flat"));
  EXPECT_TRUE(g.eos_token_ids.empty());
  EXPECT_FALSE(g.temperature.has_value());
}

TEST(GenerationConfig, ScalarEosAndBadTypes) {
  GenerationConfig g = parse_generation_config(json{{"eos_token_id", 7}});
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{7}));
  EXPECT_THROW(parse_generation_config(json{{"eos_token_id", "x"}}), Error);
  EXPECT_THROW(parse_generation_config(json{{"top_k", 2.5}}), Error);
  EXPECT_THROW(parse_generation_config(json::array()), Error);
}

// Values that would fail every request as its defaults are refused at load.
TEST(GenerationConfig, OutOfRangeDefaultsAreRefused) {
  for (const json& bad : {json{{"top_k", -5}}, json{{"top_k", int64_t{1000000000000}}}, json{{"max_new_tokens", 0}},
                          json{{"max_new_tokens", -5}}, json{{"max_new_tokens", int64_t{1} << 40}}}) {
    EXPECT_THROW(parse_generation_config(bad), Error) << bad.dump();
  }
  EXPECT_EQ(parse_generation_config(json{{"top_k", 0}}).top_k, 0);
  EXPECT_EQ(parse_generation_config(json{{"top_k", -1}}).top_k, -1);
  EXPECT_EQ(parse_generation_config(json{{"max_new_tokens", 32768}}).max_new_tokens, 32768);
}

}  // namespace
}  // namespace hyllm
