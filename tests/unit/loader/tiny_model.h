#pragma once
// Test helper: a tiny Qwen3.5 config and a checkpoint written from dummy weights.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "model/config/model_config.h"
#include "model/loader/dummy_weights.h"
#include "st_writer.h"

namespace hyllm::testing {

// hidden 64, 4 layers (layer 3 full attention), 2 q heads / 1 kv head of 32,
// GDN 2 key / 4 value heads of 16, vocab 256.
inline nlohmann::json tiny_config_json(bool moe, bool nested = true) {
  nlohmann::json text = {
      {"model_type", moe ? "qwen3_5_moe_text" : "qwen3_5_text"}, {"hidden_size", 64}, {"num_hidden_layers", 4},
      {"vocab_size", 256}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 32},
      {"linear_num_key_heads", 2}, {"linear_num_value_heads", 4}, {"linear_key_head_dim", 16},
      {"linear_value_head_dim", 16}, {"linear_conv_kernel_dim", 4}, {"full_attention_interval", 4},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000000}, {"partial_rotary_factor", 0.25}}},
      {"dtype", "bfloat16"}};
  if (moe) {
    text.update({{"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                 {"shared_expert_intermediate_size", 32}});
  } else {
    text["intermediate_size"] = 128;
  }
  std::string arch = moe ? "Qwen3_5Moe" : "Qwen3_5";
  if (!nested) {
    text["architectures"] = {arch + "ForCausalLM"};
    text["tie_word_embeddings"] = false;
    return text;
  }
  return {{"architectures", {arch + "ForConditionalGeneration"}}, {"tie_word_embeddings", false}, {"text_config", text}};
}

inline nlohmann::json block_fp8(std::vector<std::string> excluded = {"lm_head", "in_proj_a", "in_proj_b"}) {
  return {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
          {"weight_block_size", {128, 128}}, {"modules_to_not_convert", excluded}};
}

inline nlohmann::json modelopt_fp8(bool kv) {
  nlohmann::json q = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"ignore", {"lm_head", "*in_proj_a", "*in_proj_b"}}};
  if (kv) q["kv_cache_quant_algo"] = "FP8";
  return q;
}

// The checkpoint's tensors by their stored names.
using Checkpoint = std::map<std::string, StTensor>;

// The dummy weights of `config` under HF names with `prefix` ("model.language_model."
// or "model."), lm_head and mtp.* at the top level.
inline Checkpoint checkpoint_from_dummy(const ModelConfig& config, ExpertLayout layout,
                                        const std::string& prefix = "model.language_model.") {
  DummyWeights dummy(config, /*seed=*/7, layout);
  Checkpoint out;
  for (const TensorInfo& t : dummy.tensors()) {
    std::string bytes(t.nbytes, '\0');
    dummy.read(t.name, bytes.data());
    // lm_head and the MTP head (mtp.*) sit at the top level, as in the official repos.
    std::string name = t.name == "lm_head.weight" || t.name.starts_with("mtp.") ? t.name : prefix + t.name;
    out[name] = {name, dtype_safetensors_name(t.dtype), {t.shape.begin(), t.shape.end()}, std::move(bytes)};
  }
  return out;
}

// Writes the checkpoint as `shards` files plus an index (one file, no index, when shards == 1).
inline void write_checkpoint(const std::filesystem::path& dir, const Checkpoint& ckpt, int shards = 1) {
  std::vector<std::vector<StTensor>> files(shards);
  nlohmann::json weight_map = nlohmann::json::object();
  int i = 0;
  for (const auto& [name, t] : ckpt) {
    int s = i++ % shards;
    files[s].push_back(t);
    weight_map[name] = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
  }
  if (shards == 1) {
    write_safetensors(dir / "model.safetensors", files[0]);
    return;
  }
  for (int s = 0; s < shards; ++s) {
    write_safetensors(dir / ("model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors"),
                      files[s]);
  }
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"metadata", {{"total_size", 0}}},
                                                                        {"weight_map", weight_map}}.dump(1);
}

}  // namespace hyllm::testing
