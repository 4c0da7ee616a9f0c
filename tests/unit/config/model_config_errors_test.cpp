// Bad config.json inputs: each gives an hyllm::Error with the right code and a
// message naming the field.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>

#include "model/config/model_config.h"

namespace hyllm {
namespace {

using nlohmann::json;

json base_config() {
  return read_json_file(std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/configs/qwen3_5_35b_a3b/config.json");
}

struct BadCase {
  const char* name;
  std::function<void(json&)> edit;
  ErrorCode code;
  const char* message_part;
};

class ModelConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ModelConfigErrors, GivesTheRightError) {
  const BadCase& c = GetParam();
  json j = base_config();
  c.edit(j);
  try {
    parse_model_config(j, nullptr, "some/dir/config.json");
    FAIL() << "no error for " << c.name;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), c.code) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ModelConfigErrors,
    ::testing::Values(
        BadCase{"unsupported_arch", [](json& j) { j["architectures"] = {"LlamaForCausalLM"}; }, ErrorCode::kUnsupported,
                "Qwen3_5MoeForConditionalGeneration"},
        BadCase{"no_arch", [](json& j) { j.erase("architectures"); }, ErrorCode::kCorruptData, "architectures"},
        BadCase{"no_text_config", [](json& j) { j.erase("text_config"); }, ErrorCode::kCorruptData, "text_config"},
        BadCase{"missing_hidden", [](json& j) { j["text_config"].erase("hidden_size"); }, ErrorCode::kCorruptData,
                "hidden_size"},
        BadCase{"string_hidden", [](json& j) { j["text_config"]["hidden_size"] = "2048"; }, ErrorCode::kCorruptData,
                "hidden_size"},
        BadCase{"zero_layers", [](json& j) { j["text_config"]["num_hidden_layers"] = 0; }, ErrorCode::kInvalidArgument,
                "num_hidden_layers"},
        BadCase{"layer_types_length", [](json& j) { j["text_config"]["layer_types"].erase(0); },
                ErrorCode::kInvalidArgument, "layer_types"},
        BadCase{"layer_type_unknown", [](json& j) { j["text_config"]["layer_types"][0] = "sliding_attention"; },
                ErrorCode::kUnsupported, "sliding_attention"},
        BadCase{"heads_not_dividing", [](json& j) { j["text_config"]["num_key_value_heads"] = 3; },
                ErrorCode::kInvalidArgument, "num_key_value_heads"},
        BadCase{"missing_experts", [](json& j) { j["text_config"].erase("num_experts"); }, ErrorCode::kCorruptData,
                "num_experts"},
        BadCase{"too_many_layers", [](json& j) { j["text_config"]["num_hidden_layers"] = 10000000; },
                ErrorCode::kInvalidArgument, "num_hidden_layers"},
        BadCase{"huge_hidden", [](json& j) { j["text_config"]["hidden_size"] = int64_t{1} << 40; },
                ErrorCode::kInvalidArgument, "hidden_size"},
        BadCase{"huge_heads", [](json& j) { j["text_config"]["num_attention_heads"] = INT64_MAX; },
                ErrorCode::kInvalidArgument, "num_attention_heads"},
        BadCase{"huge_vocab", [](json& j) { j["text_config"]["vocab_size"] = int64_t{1} << 32; },
                ErrorCode::kInvalidArgument, "vocab_size"},
        BadCase{"rope_yarn",
                [](json& j) {
                  j["text_config"]["rope_parameters"]["rope_type"] = "yarn";
                  j["text_config"]["rope_parameters"]["factor"] = 4.0;
                },
                ErrorCode::kUnsupported, "yarn"},
        BadCase{"rope_factor_alone", [](json& j) { j["text_config"]["rope_parameters"]["factor"] = 2.0; },
                ErrorCode::kUnsupported, "factor 2"},
        BadCase{"hidden_act_gelu", [](json& j) { j["text_config"]["hidden_act"] = "gelu"; }, ErrorCode::kUnsupported,
                "hidden_act"},
        BadCase{"attention_bias", [](json& j) { j["text_config"]["attention_bias"] = true; }, ErrorCode::kUnsupported,
                "attention_bias"},
        BadCase{"mrope_negative", [](json& j) { j["text_config"]["rope_parameters"]["mrope_section"] = {-100, 100, 32}; },
                ErrorCode::kInvalidArgument, "negative"},
        BadCase{"huge_positions", [](json& j) { j["text_config"]["max_position_embeddings"] = 4294967301; },
                ErrorCode::kInvalidArgument, "max_position_embeddings"},
        BadCase{"experts_times_layers", [](json& j) { j["text_config"]["num_experts"] = 1 << 19; },
                ErrorCode::kInvalidArgument, "num_experts"},
        BadCase{"topk_over_experts", [](json& j) { j["text_config"]["num_experts_per_tok"] = 300; },
                ErrorCode::kInvalidArgument, "num_experts_per_tok"},
        BadCase{"mrope_sum", [](json& j) { j["text_config"]["rope_parameters"]["mrope_section"] = {8, 8, 8}; },
                ErrorCode::kInvalidArgument, "mrope_section"},
        BadCase{"bad_dtype", [](json& j) { j["text_config"]["dtype"] = "int4"; }, ErrorCode::kUnsupported, "int4"},
        BadCase{"quant_method", [](json& j) { j["quantization_config"] = {{"quant_method", "awq"}}; },
                ErrorCode::kUnsupported, "awq"},
        BadCase{"fp8_no_block",
                [](json& j) { j["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}; },
                ErrorCode::kUnsupported, "weight_block_size"},
        BadCase{"fp8_bad_block",
                [](json& j) { j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128}}}; },
                ErrorCode::kCorruptData, "weight_block_size"},
        BadCase{"fp8_block_64",
                [](json& j) { j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {64, 64}}}; },
                ErrorCode::kUnsupported, "weight_block_size [64, 64] is not supported (only [128, 128])"},
        BadCase{"fp8_block_128_64",
                [](json& j) { j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 64}}}; },
                ErrorCode::kUnsupported, "weight_block_size [128, 64]"},
        BadCase{"modelopt_nvfp4",
                [](json& j) { j["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}; },
                ErrorCode::kUnsupported, "NVFP4"},
        BadCase{"modelopt_bad_ignore",
                [](json& j) {
                  j["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"ignore", 5}};
                },
                ErrorCode::kCorruptData, "ignore"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(ModelConfigErrorsFiles, MissingAndMalformedFiles) {
  auto dir = std::filesystem::temp_directory_path() / "hyllm_config_test_missing";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  try {
    load_model_config(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  {
    std::FILE* f = std::fopen((dir / "config.json").c_str(), "w");
    std::fputs("{\"architectures\": [", f);
    std::fclose(f);
  }
  try {
    load_model_config(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  }
  std::filesystem::remove_all(dir);
}

TEST(ModelConfigErrorsFiles, HfQuantConfigWithoutQuantization) {
  json j = base_config();
  json hf = {{"producer", {{"name", "modelopt"}}}};
  EXPECT_THROW(parse_model_config(j, &hf), Error);
  json other = {{"producer", {{"name", "llm-compressor"}}}, {"quantization", {{"quant_algo", "FP8"}}}};
  EXPECT_THROW(parse_model_config(j, &other), Error);
}

}  // namespace
}  // namespace hyllm
