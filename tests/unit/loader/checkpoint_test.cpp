// Whole checkpoints: name mapping, sharding, catalogue checks, FP8 scale accounting.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "backend/cpu/cpu_backend.h"
#include "model/loader/safetensors_checkpoint.h"
#include "model/qwen3_5.h"
#include "model/loader/tensor_names.h"
#include "model/loader/weight_source.h"
#include "tiny_model.h"

namespace hyllm {
namespace {

using nlohmann::json;
using namespace hyllm::testing;

ModelConfig tiny(bool moe, std::optional<json> quant = std::nullopt) {
  json j = tiny_config_json(moe);
  if (quant) j["quantization_config"] = *quant;
  return parse_model_config(j);
}

// Opens dir as a checkpoint of `config` and returns the error (or a kOk one).
Error open_error(const std::filesystem::path& dir, const ModelConfig& config) {
  try {
    open_weights(dir, config, LoadFormat::kAuto);
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorCode::kOk, "");
}

void expect_same_bytes(const WeightSource& a, const WeightSource& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const TensorInfo& t : a.tensors()) {
    const TensorInfo& u = b.info(t.name);
    ASSERT_EQ(t.dtype, u.dtype) << t.name;
    ASSERT_EQ(t.shape, u.shape) << t.name;
    std::string x(t.nbytes, '\0'), y(t.nbytes, '\0');
    a.read(t.name, x.data());
    b.read(t.name, y.data());
    ASSERT_EQ(x, y) << t.name;
  }
}

TEST(TensorNames, Canonical) {
  EXPECT_EQ(canonical_tensor_name("model.language_model.layers.3.self_attn.q_proj.weight"),
            "layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(canonical_tensor_name("model.embed_tokens.weight"), "embed_tokens.weight");
  EXPECT_EQ(canonical_tensor_name("lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.self_attn.k_proj.k_scale"), "layers.3.self_attn.k_scale");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.self_attn.v_proj.v_scale"), "layers.3.self_attn.v_scale");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.self_attn.attn.k_scale"), "layers.3.self_attn.k_scale");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.self_attn.k_proj.weight_scale"),
            "layers.3.self_attn.k_proj.weight_scale");
  EXPECT_FALSE(canonical_tensor_name("model.visual.blocks.0.attn.qkv.weight"));
  EXPECT_FALSE(canonical_tensor_name("visual.merger.linear_fc1.weight"));
  EXPECT_EQ(canonical_tensor_name("mtp.fc.weight"), "mtp.fc.weight");
  EXPECT_EQ(canonical_tensor_name("model.mtp.norm.weight"), "mtp.norm.weight");
  EXPECT_EQ(canonical_tensor_name("model.language_model.mtp.layers.0.self_attn.q_proj.weight"),
            "mtp.layers.0.self_attn.q_proj.weight");
}

TEST(Checkpoint, DenseNestedRoundTrip) {
  ModelConfig c = tiny(false);
  auto dir = fresh_dir("dense_nested");
  Checkpoint ck = checkpoint_from_dummy(c, ExpertLayout::kFused);
  ck["model.visual.blocks.0.attn.qkv.weight"] = {"model.visual.blocks.0.attn.qkv.weight", "BF16", {2}, "abcd"};
  ck["mtp.fc.weight"] = {"mtp.fc.weight", "BF16", {1}, "ab"};  // no MTP layers in the config: dropped
  write_checkpoint(dir, ck);
  auto w = open_weights(dir, c, LoadFormat::kAuto);
  DummyWeights dummy(c, 7);
  expect_same_bytes(*w, dummy);
  EXPECT_TRUE(w->mapped("layers.3.self_attn.q_proj.weight").has_value());
  EXPECT_EQ(w->info("layers.0.linear_attn.A_log").dtype, DType::kF32);
  EXPECT_NE(w->info("norm.weight").origin.find("model.language_model.norm.weight"), std::string::npos);
  EXPECT_EQ(w->find("layers.9.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(expect_error([&] { w->info("nope"); }).code(), ErrorCode::kNotFound);

  // Visiting hands out the mapped bytes themselves, in file order.
  size_t visited = 0;
  visit_tensors(*w, [&](const TensorInfo& t, const void* host) {
    EXPECT_EQ(host, static_cast<const void*>(w->mapped(t.name)->data())) << t.name;
    ++visited;
  });
  EXPECT_EQ(visited, w->tensors().size());
}

TEST(Checkpoint, MtpHeadIsLoadedWholeOrNotAtAll) {
  ModelConfig c = tiny(false);
  c.mtp_num_hidden_layers = 1;
  ModelConfig without = c;
  without.mtp_num_hidden_layers = 0;
  // The head at the top level (nested form) or under "model." (flat form).
  for (const char* mtp_prefix : {"", "model."}) {
    auto dir = fresh_dir(std::string("mtp_whole") + mtp_prefix);
    Checkpoint ck;
    for (auto& [name, t] : checkpoint_from_dummy(c, ExpertLayout::kFused, "model.")) {
      StTensor moved = t;
      if (name.starts_with("mtp.")) moved.name = mtp_prefix + name;
      ck[moved.name] = moved;
    }
    write_checkpoint(dir, ck);
    auto w = open_weights(dir, c, LoadFormat::kAuto);
    expect_same_bytes(*w, DummyWeights(c, 7));
    EXPECT_EQ(w->info("mtp.fc.weight").shape, (Shape{c.hidden_size, 2 * c.hidden_size}));
    EXPECT_TRUE(w->contains("mtp.layers.0.self_attn.q_norm.weight"));
    // A config without MTP layers drops the head.
    auto plain = open_weights(dir, without, LoadFormat::kAuto);
    EXPECT_FALSE(plain->contains("mtp.fc.weight"));
    expect_same_bytes(*plain, DummyWeights(without, 7));
  }
  // A checkpoint without the head is fine (many repos strip it).
  auto none = fresh_dir("mtp_none");
  write_checkpoint(none, checkpoint_from_dummy(without, ExpertLayout::kFused));
  EXPECT_FALSE(open_weights(none, c, LoadFormat::kAuto)->contains("mtp.fc.weight"));
  // Part of a head is an error that names what is missing.
  auto partial = fresh_dir("mtp_partial");
  Checkpoint ck = checkpoint_from_dummy(c, ExpertLayout::kFused);
  ck.erase("mtp.layers.0.mlp.down_proj.weight");
  write_checkpoint(partial, ck);
  const Error e = open_error(partial, c);
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("mtp.layers.0.mlp.down_proj.weight"), std::string::npos) << e.what();
}

TEST(Checkpoint, FlatNamesAndShards) {
  ModelConfig c = tiny(false);
  auto dir = fresh_dir("flat_sharded");
  write_checkpoint(dir, checkpoint_from_dummy(c, ExpertLayout::kFused, "model."), 3);
  auto w = open_weights(dir, c, LoadFormat::kSafetensors);
  EXPECT_NE(w->describe().find("3 shards"), std::string::npos);
  expect_same_bytes(*w, DummyWeights(c, 7));
}

TEST(Checkpoint, MoeBothExpertLayouts) {
  ModelConfig c = tiny(true);
  for (ExpertLayout layout : {ExpertLayout::kFused, ExpertLayout::kPerExpert}) {
    auto dir = fresh_dir(std::string("moe_") + expert_layout_name(layout));
    write_checkpoint(dir, checkpoint_from_dummy(c, layout), 2);
    auto w = open_weights(dir, c, LoadFormat::kAuto);
    expect_same_bytes(*w, DummyWeights(c, 7, layout));
    if (layout == ExpertLayout::kFused) {
      EXPECT_EQ(w->info("layers.0.mlp.experts.gate_up_proj").shape, (Shape{4, 64, 64}));
      EXPECT_EQ(w->info("layers.0.mlp.experts.down_proj").shape, (Shape{4, 64, 32}));
    } else {
      EXPECT_EQ(w->info("layers.0.mlp.experts.3.gate_proj.weight").shape, (Shape{32, 64}));
    }
  }
}

TEST(Checkpoint, TiedModelIgnoresLmHead) {
  json j = tiny_config_json(false);
  j["tie_word_embeddings"] = true;
  ModelConfig tied = parse_model_config(j);
  auto dir = fresh_dir("tied");
  write_checkpoint(dir, checkpoint_from_dummy(tiny(false), ExpertLayout::kFused));  // has lm_head.weight
  auto w = open_weights(dir, tied, LoadFormat::kAuto);
  EXPECT_FALSE(w->contains("lm_head.weight"));
  EXPECT_TRUE(w->contains("embed_tokens.weight"));
}

TEST(Checkpoint, CatalogueMismatches) {
  ModelConfig c = tiny(false);
  Checkpoint good = checkpoint_from_dummy(c, ExpertLayout::kFused);
  auto check = [&](const char* name, std::function<void(Checkpoint&)> edit, const char* part) {
    Checkpoint ck = good;
    edit(ck);
    auto dir = fresh_dir(std::string("mismatch_") + name);
    write_checkpoint(dir, ck);
    Error e = open_error(dir, c);
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << name << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << name << ": " << e.what();
  };
  check("missing", [](Checkpoint& ck) { ck.erase("model.language_model.layers.2.linear_attn.dt_bias"); },
        "missing tensors (1): layers.2.linear_attn.dt_bias");
  check("shape", [](Checkpoint& ck) {
    auto& t = ck["model.language_model.norm.weight"];
    t.shape = {32, 2};
  }, "norm.weight [32, 2] (expected [64])");
  check("unexpected", [](Checkpoint& ck) {
    ck["model.language_model.layers.0.mlp.bias"] = {"model.language_model.layers.0.mlp.bias", "BF16", {1}, "ab"};
  }, "unexpected tensors (1): layers.0.mlp.bias");
  check("fp8_without_quant_config", [](Checkpoint& ck) {
    auto& t = ck["model.language_model.layers.0.mlp.up_proj.weight"];
    t.dtype = "F8_E4M3";
    t.shape = {128, 128};  // same byte count as [128, 64] bf16
  }, "no quantization_config");
  check("int_param", [](Checkpoint& ck) { ck["model.language_model.norm.weight"].dtype = "I16"; }, "wrong dtype");
  check("unknown_dtype", [](Checkpoint& ck) { ck["model.language_model.norm.weight"].dtype = "F8_E8M0"; },
        "does not know");
}

TEST(Checkpoint, BlockFp8ScaleAccounting) {
  ModelConfig c = tiny(true, block_fp8());
  EXPECT_EQ(c.quant.method, QuantMethod::kFp8Block);
  Checkpoint good = checkpoint_from_dummy(c, ExpertLayout::kPerExpert);
  {
    auto dir = fresh_dir("fp8_block_good");
    write_checkpoint(dir, good, 2);
    auto w = open_weights(dir, c, LoadFormat::kAuto);
    EXPECT_EQ(w->info("layers.3.self_attn.q_proj.weight").dtype, DType::kF8E4M3);
    // q_proj [2 heads * 32 * 2, 64] in 128x128 blocks.
    EXPECT_EQ(w->info("layers.3.self_attn.q_proj.weight_scale_inv").shape, (Shape{1, 1}));
    EXPECT_EQ(w->info("layers.0.mlp.experts.1.down_proj.weight").dtype, DType::kF8E4M3);
    EXPECT_EQ(w->info("layers.0.linear_attn.in_proj_a.weight").dtype, DType::kBF16);
    EXPECT_EQ(w->info("lm_head.weight").dtype, DType::kBF16);
  }
  auto fails = [&](const char* name, std::function<void(Checkpoint&)> edit, std::vector<const char*> parts) {
    Checkpoint ck = good;
    edit(ck);
    auto dir = fresh_dir(std::string("fp8_block_") + name);
    write_checkpoint(dir, ck);
    Error e = open_error(dir, c);
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << name << ": " << e.what();
    for (const char* part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << name << ": " << e.what();
  };
  fails("missing_scale",
        [](Checkpoint& ck) { ck.erase("model.language_model.layers.1.mlp.experts.2.gate_proj.weight_scale_inv"); },
        {"FP8 weights without their scales (1)", "layers.1.mlp.experts.2.gate_proj.weight"});
  fails("two_missing",
        [](Checkpoint& ck) {
          ck.erase("model.language_model.layers.0.linear_attn.in_proj_qkv.weight_scale_inv");
          ck.erase("model.language_model.layers.3.self_attn.o_proj.weight_scale_inv");
        },
        {"FP8 weights without their scales (2)", "in_proj_qkv.weight", "o_proj.weight"});
  fails("orphan_scale",
        [](Checkpoint& ck) {
          std::string n = "model.language_model.layers.0.linear_attn.in_proj_a.weight_scale_inv";
          ck[n] = {n, "F32", {1, 2}, std::string(8, '\0')};
        },
        {"scales without an FP8 weight (1)", "layers.0.linear_attn.in_proj_a.weight_scale_inv"});
  fails("scale_of_missing_weight",
        [](Checkpoint& ck) {
          std::string n = "model.language_model.layers.0.mlp.experts.9.up_proj.weight_scale_inv";
          ck[n] = {n, "F32", {1, 2}, std::string(8, '\0')};
        },
        {"scales without an FP8 weight", "experts.9.up_proj.weight_scale_inv"});
  fails("scale_shape",
        [](Checkpoint& ck) {
          auto& t = ck["model.language_model.layers.3.self_attn.q_proj.weight_scale_inv"];
          t.shape = {2, 4};
          t.bytes.resize(32);
        },
        {"q_proj.weight_scale_inv [2, 4] (expected [1, 1])"});
}

TEST(Checkpoint, Bf16CheckpointUnderFp8ConfigIsRefused) {
  // Linears stored unquantized although the config says FP8: the config
  // misdescribes the checkpoint, and the error names the linears.
  ModelConfig fp8 = tiny(false, block_fp8());
  auto dir = fresh_dir("bf16_under_fp8_config");
  write_checkpoint(dir, checkpoint_from_dummy(tiny(false), ExpertLayout::kFused));
  Error e = open_error(dir, fp8);
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("linear weights stored otherwise than the quantization config says"),
            std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("is bfloat16, FP8 by the config (not in its modules_to_not_convert)"),
            std::string::npos) << e.what();
}

TEST(Checkpoint, ModelOptScalesAndKvScales) {
  ModelConfig c = tiny(false, modelopt_fp8(/*kv=*/true));
  Checkpoint ck = checkpoint_from_dummy(c, ExpertLayout::kFused, "model.");
  // ModelOpt writes KV scales under the projections; the loader remaps them.
  for (const char* kv : {"k", "v"}) {
    std::string canonical = std::string("model.layers.3.self_attn.") + kv + "_scale";
    StTensor t = ck.at(canonical);
    ck.erase(canonical);
    t.name = std::string("model.layers.3.self_attn.") + kv + "_proj." + kv + "_scale";
    ck[t.name] = t;
  }
  auto dir = fresh_dir("modelopt");
  write_checkpoint(dir, ck);
  auto w = open_weights(dir, c, LoadFormat::kAuto);
  EXPECT_EQ(w->info("layers.3.self_attn.k_scale").shape.numel(), 1);
  EXPECT_EQ(w->info("layers.0.mlp.down_proj.weight").dtype, DType::kF8E4M3);
  EXPECT_EQ(w->info("layers.0.mlp.down_proj.input_scale").shape.rank(), 0);

  // A KV scale on a GDN layer has no attention to belong to; a missing input_scale is a missing scale.
  Checkpoint bad = ck;
  bad["model.layers.1.self_attn.k_proj.k_scale"] = {"model.layers.1.self_attn.k_proj.k_scale", "F32", {}, std::string(4, '\0')};
  bad.erase("model.layers.0.mlp.up_proj.input_scale");
  auto bad_dir = fresh_dir("modelopt_bad");
  write_checkpoint(bad_dir, bad);
  Error e = open_error(bad_dir, c);
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("layers.1.self_attn.k_scale"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("no layers.0.mlp.up_proj.input_scale"), std::string::npos) << e.what();
}

// Bad FP8 checkpoints, table-driven: each edit of a good checkpoint gives a
// kCorruptData error naming the tensor, from open_weights (names, shapes,
// dtypes, against the catalogue and the config) or, for the values of the
// scales, from the model load that reads them; nothing crashes.
struct BadFp8Case {
  const char* name;
  bool modelopt;
  std::function<void(Checkpoint&)> edit;
  std::vector<const char*> parts;  // substrings of the error message
  std::vector<std::string> excluded = {};  // the config's exclude list, when it matters
};

std::string f32_bytes(std::initializer_list<float> values) {
  std::string b;
  for (float v : values) b.append(reinterpret_cast<const char*>(&v), 4);
  return b;
}

class BadFp8Checkpoint : public ::testing::TestWithParam<BadFp8Case> {};

// Opens the checkpoint and builds the model from it on the CPU.
void load_whole_model(const std::filesystem::path& dir, const ModelConfig& config) {
  auto weights = open_weights(dir, config, LoadFormat::kAuto);
  auto cpu = make_cpu_backend();
  make_qwen3_5(config, *weights, *cpu, ModelOptions{});
}

TEST_P(BadFp8Checkpoint, IsRefusedNamingTheTensor) {
  const BadFp8Case& c = GetParam();
  json quant = c.modelopt ? modelopt_fp8(/*kv=*/true) : block_fp8();
  if (!c.excluded.empty()) quant[c.modelopt ? "ignore" : "modules_to_not_convert"] = c.excluded;
  // The good checkpoint is written under the standard exclude list.
  ModelConfig good_config = tiny(false, c.modelopt ? modelopt_fp8(true) : block_fp8());
  ModelConfig config = tiny(false, quant);
  Checkpoint ck = checkpoint_from_dummy(good_config, ExpertLayout::kFused, "model.");
  {
    auto dir = fresh_dir(std::string("fp8_good_") + c.name);
    write_checkpoint(dir, ck);
    EXPECT_NO_THROW(load_whole_model(dir, good_config)) << "the unedited checkpoint must load";
  }
  c.edit(ck);
  auto dir = fresh_dir(std::string("fp8_bad_") + c.name);
  write_checkpoint(dir, ck);
  Error e(ErrorCode::kOk, "");
  try {
    load_whole_model(dir, config);
  } catch (const Error& err) {
    e = err;
  }
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << e.what();
  for (const char* part : c.parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
}

// An F32 scale holding `v` (as many values as the tensor has).
std::function<void(Checkpoint&)> set_scale(const std::string& name, float v) {
  return [name, v](Checkpoint& ck) {
    StTensor& t = ck.at(name);
    std::string b;
    for (size_t i = 0; i < t.bytes.size() / 4; ++i) b += f32_bytes({v});
    t.bytes = b;
  };
}

const std::string kQ = "model.layers.3.self_attn.q_proj";
const std::string kUp = "model.layers.0.mlp.up_proj";

INSTANTIATE_TEST_SUITE_P(
    Table, BadFp8Checkpoint,
    ::testing::Values(
        BadFp8Case{"block_missing_scale", false, [](Checkpoint& ck) { ck.erase(kUp + ".weight_scale_inv"); },
                   {"FP8 weights without their scales (1)", "layers.0.mlp.up_proj.weight (no "}},
        BadFp8Case{"block_scale_shape", false,
                   [](Checkpoint& ck) {
                     StTensor& t = ck.at(kQ + ".weight_scale_inv");
                     t.shape = {2, 1};
                     t.bytes = f32_bytes({1, 1});
                   },
                   {"layers.3.self_attn.q_proj.weight_scale_inv [2, 1] (expected [1, 1])"}},
        BadFp8Case{"block_scale_int", false,
                   [](Checkpoint& ck) { ck.at(kQ + ".weight_scale_inv").dtype = "I32"; },
                   {"q_proj.weight_scale_inv int32 (expected a float type)"}},
        BadFp8Case{"block_scale_nan", false, set_scale(kUp + ".weight_scale_inv", NAN),
                   {"layers.0.mlp.up_proj.weight_scale_inv[0] = nan: scales must be finite and positive"}},
        BadFp8Case{"block_scale_inf", false, set_scale(kQ + ".weight_scale_inv", INFINITY),
                   {"layers.3.self_attn.q_proj.weight_scale_inv[0] = inf"}},
        BadFp8Case{"block_scale_zero", false, set_scale(kUp + ".weight_scale_inv", 0.0f),
                   {"layers.0.mlp.up_proj.weight_scale_inv[0] = 0"}},
        BadFp8Case{"block_scale_negative", false, set_scale(kUp + ".weight_scale_inv", -0.5f),
                   {"layers.0.mlp.up_proj.weight_scale_inv[0] = -0.5"}},
        BadFp8Case{"fp8_where_excluded", false, [](Checkpoint&) {},
                   {"linear weights stored otherwise than the quantization config says",
                    "layers.0.mlp.up_proj.weight is float8_e4m3fn, bfloat16 by the config's modules_to_not_convert"},
                   {"lm_head", "in_proj_a", "in_proj_b", "layers.0.mlp.up_proj"}},
        BadFp8Case{"bf16_where_fp8", false,
                   [](Checkpoint& ck) {
                     StTensor& t = ck.at(kUp + ".weight");
                     t.dtype = "BF16";
                     t.bytes += t.bytes;  // two bytes per element now
                     ck.erase(kUp + ".weight_scale_inv");
                   },
                   {"layers.0.mlp.up_proj.weight is bfloat16, FP8 by the config"}},
        BadFp8Case{"fp8_norm_weight", false,
                   [](Checkpoint& ck) {
                     StTensor& t = ck.at("model.norm.weight");
                     t.dtype = "F8_E4M3";
                     t.bytes.resize(t.bytes.size() / 2);
                   },
                   {"norm.weight float8_e4m3fn (expected bf16, fp16 or fp32)"}},
        BadFp8Case{"e4m3_scale_never_used", false,
                   [](Checkpoint& ck) { ck[kUp + ".input_scale"] = {kUp + ".input_scale", "F32", {}, f32_bytes({1})}; },
                   {"scales without an FP8 weight (1): layers.0.mlp.up_proj.input_scale"}},
        BadFp8Case{"modelopt_missing_input_scale", true, [](Checkpoint& ck) { ck.erase(kQ + ".input_scale"); },
                   {"FP8 weights without their scales", "layers.3.self_attn.q_proj.weight (no "}},
        BadFp8Case{"modelopt_vector_weight_scale", true,
                   [](Checkpoint& ck) {
                     StTensor& t = ck.at(kUp + ".weight_scale");
                     t.shape = {2};
                     t.bytes = f32_bytes({1, 1});
                   },
                   {"layers.0.mlp.up_proj.weight_scale [2] (expected [])"}},
        BadFp8Case{"modelopt_nan_input_scale", true, set_scale(kUp + ".input_scale", NAN),
                   {"layers.0.mlp.up_proj.input_scale = nan"}},
        BadFp8Case{"modelopt_negative_weight_scale", true, set_scale(kQ + ".weight_scale", -1.0f),
                   {"layers.3.self_attn.q_proj.weight_scale = -1"}},
        BadFp8Case{"modelopt_zero_kv_scale", true, set_scale("model.layers.3.self_attn.k_scale", 0.0f),
                   {"layers.3.self_attn.k_scale = 0"}},
        BadFp8Case{"modelopt_block_scale_instead", true,
                   [](Checkpoint& ck) {
                     StTensor t = ck.at(kUp + ".weight_scale");
                     ck.erase(kUp + ".weight_scale");
                     t.name = kUp + ".weight_scale_inv";
                     t.shape = {1, 1};
                     ck[t.name] = t;
                   },
                   {"layers.0.mlp.up_proj.weight (no layers.0.mlp.up_proj.weight_scale)",
                    "scales without an FP8 weight (1): layers.0.mlp.up_proj.weight_scale_inv"}}),
    [](const ::testing::TestParamInfo<BadFp8Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace hyllm
