#pragma once
// A tiny Qwen3.5 checkpoint with an MTP head, made for the speculative
// decoding tests: the dense tiny model's tensors as stored, plus random
// (dummy) mtp.* tensors, written in the flat form ("model.*", "mtp.*") or
// the nested VLM form ("model.language_model.*", "mtp.*"), with
// mtp_num_hidden_layers: 1 added to config.json. Random MTP weights draft
// badly, which is fine: speculation must give the same tokens whatever the
// drafts are. An "echo" head (fc = [0 | I], o_proj and down_proj zero, so
// the head returns the target's hidden state, renormalised) drafts the token
// the target predicted one position earlier: right whenever the tiny model
// repeats a token. A "repeater" target (lm_head = 0.02 x the embeddings: the
// token's own embedding dominates the final hidden state, so the logits
// favour it, but mildly) repeats its last token under greedy decoding and
// often under sampling at temperature 1: with the echo head, greedy drafts
// are all accepted and sampled ones partly.

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine_e2e_util.h"
#include "model/config/model_config.h"
#include "model/loader/dummy_weights.h"
#include "model/loader/weight_source.h"
#include "model/quantize/safetensors_writer.h"
#include "tensor/float_conversions.h"

namespace hyllm::e2e {

inline void make_echo_head(std::vector<OwnedTensor>& tensors, int64_t H) {
  for (OwnedTensor& t : tensors) {
    if (!t.name.starts_with("mtp.")) continue;
    const bool zero = t.name.ends_with("o_proj.weight") || t.name.ends_with("down_proj.weight") ||
                      t.name.ends_with("norm.weight") || t.name.starts_with("mtp.pre_fc_norm_") || t.name == "mtp.fc.weight";
    if (!zero) continue;
    std::fill(t.bytes.begin(), t.bytes.end(), std::byte{0});
    if (t.name != "mtp.fc.weight") continue;
    ASSERT_EQ(t.dtype, DType::kBF16);
    auto* w = reinterpret_cast<uint16_t*>(t.bytes.data());  // [H, 2H]: row i reads hidden column i
    for (int64_t i = 0; i < H; ++i) w[i * 2 * H + H + i] = 0x3f80;  // bf16 1.0
  }
}

inline void make_repeater_target(std::vector<OwnedTensor>& tensors) {
  const OwnedTensor* embed = nullptr;
  for (const OwnedTensor& t : tensors) {
    if (t.name.ends_with("embed_tokens.weight")) embed = &t;
  }
  ASSERT_NE(embed, nullptr);
  ASSERT_EQ(embed->dtype, DType::kBF16);
  for (OwnedTensor& t : tensors) {
    if (t.name != "lm_head.weight") continue;
    t.bytes = embed->bytes;
    auto* w = reinterpret_cast<uint16_t*>(t.bytes.data());
    for (size_t i = 0; i < t.bytes.size() / 2; ++i) w[i] = f32_to_bf16(0.02f * bf16_to_f32(w[i]));
  }
}

inline std::filesystem::path write_mtp_model(const std::string& name, bool nested, bool echo = false,
                                             bool repeater = false,
                                             const std::filesystem::path& base_dir = kModelDir) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hyllm_mtp_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json config = read_json_file(base_dir / "config.json");
  config["mtp_num_hidden_layers"] = 1;
  if (nested) {
    nlohmann::json top;
    const bool moe = load_model_config(base_dir).is_moe;
    top["architectures"] = {moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"};
    top["model_type"] = moe ? "qwen3_5_moe" : "qwen3_5";
    top["tie_word_embeddings"] = config["tie_word_embeddings"];
    config["model_type"] = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
    top["text_config"] = config;
    config = top;
  }
  std::ofstream(dir / "config.json") << config.dump(2);

  const ModelConfig base = load_model_config(base_dir);
  auto stored = open_weights(base_dir, base, LoadFormat::kSafetensors);
  ModelConfig with_mtp = base;
  with_mtp.mtp_num_hidden_layers = 1;
  DummyWeights dummy(with_mtp, 17);
  std::vector<OwnedTensor> tensors;
  auto add = [&](const WeightSource& src, const TensorInfo& t, std::string stored_name) {
    OwnedTensor o{std::move(stored_name), t.dtype, t.shape, std::vector<std::byte>(t.nbytes)};
    src.read(t.name, o.bytes.data());
    tensors.push_back(std::move(o));
  };
  const std::string prefix = nested ? "model.language_model." : "model.";
  for (const TensorInfo& t : stored->tensors()) add(*stored, t, t.name == "lm_head.weight" ? t.name : prefix + t.name);
  for (const TensorInfo& t : dummy.tensors()) {
    if (t.name.starts_with("mtp.")) add(dummy, t, t.name);
  }
  if (echo) make_echo_head(tensors, base.hidden_size);
  if (repeater) make_repeater_target(tensors);
  write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

}  // namespace hyllm::e2e
