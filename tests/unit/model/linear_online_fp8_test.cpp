// Linear::load for --quantization fp8 (online FP8): each part of a BF16
// checkpoint's linear becomes e4m3 codes of w / s with s = amax / 448, s in
// every cell of the part's rows of the block-scale grid; merged parts keep
// their own scales, and padding (for the block-FP8 merge of unaligned parts)
// changes no output.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/loader/qwen35_catalogue.h"

namespace hyllm {
namespace {

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend();
  ModelConfig cfg;
  std::unique_ptr<WeightSource> src;
  std::unique_ptr<WeightLoader> w;
  Scratch scratch;
  explicit Fixture(const std::string& model) {
    const auto dir = std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / model;
    cfg = load_model_config(dir);
    src = open_weights(dir, cfg, LoadFormat::kSafetensors);
    w = std::make_unique<WeightLoader>(*be, *src);
    const auto modules = qwen35_quantizable_linears(cfg);
    w->set_online_fp8_modules({modules.begin(), modules.end()});
    scratch = Scratch(*be, 8 << 20);
  }
  TensorView input(int64_t rows, int64_t cols) {
    TensorView x = scratch.take(DType::kBF16, Shape{rows, cols});
    auto* p = x.data_as<uint16_t>();
    for (int64_t i = 0; i < rows * cols; ++i) p[i] = f32_to_bf16(std::sin(0.37f * i) * 2.0f);
    return x;
  }
};

std::vector<uint16_t> bits(const ColSlice& s) {
  std::vector<uint16_t> out;
  for (int64_t r = 0; r < s.rows(); ++r)
    for (int64_t c = 0; c < s.width; ++c) out.push_back(s.tensor.data_as<uint16_t>()[r * s.stride() + s.offset + c]);
  return out;
}

TEST(OnlineFp8Linear, PartsAreQuantisedPerTensorAndMergeExactly) {
  Fixture f("dense_flat_aligned");
  const std::vector<std::string> qkv = {"layers.3.self_attn.q_proj", "layers.3.self_attn.k_proj",
                                        "layers.3.self_attn.v_proj"};
  EXPECT_EQ(linear_format(*f.w, qkv[0]), WeightFormat::kFp8Block);
  EXPECT_EQ(linear_format(*f.w, "layers.0.linear_attn.in_proj_a"), WeightFormat::kBf16);  // not quantizable
  Linear merged = Linear::load(*f.w, qkv);
  EXPECT_EQ(merged.num_gemms(), 1);
  EXPECT_EQ(merged.format(), WeightFormat::kFp8Block);
  TensorView x = f.input(5, merged.in_features());
  const auto parts = merged.forward(*f.be, f.scratch, x);
  for (size_t i = 0; i < qkv.size(); ++i) {
    Linear alone = Linear::load(*f.w, {qkv[i]});
    const LinearWeight& lw = alone.weight();
    ASSERT_EQ(lw.format, WeightFormat::kFp8Block);
    // The definition, from the checkpoint's bf16 bytes.
    const TensorInfo& ti = f.src->info(qkv[i] + ".weight");
    std::vector<uint16_t> wb(static_cast<size_t>(ti.shape.numel()));
    f.src->read(ti.name, wb.data());
    float amax = 0;
    for (uint16_t h : wb) amax = std::max(amax, std::fabs(bf16_to_f32(h)));
    const float s = amax / 448.0f;
    const auto* codes = lw.weight.data_as<const uint8_t>();
    for (size_t k = 0; k < wb.size(); ++k)
      ASSERT_EQ(codes[k], f32_to_f8e4m3(bf16_to_f32(wb[k]) / s)) << qkv[i] << " element " << k;
    const auto* scale = lw.weight_scale.data_as<const float>();
    for (int64_t k = 0; k < lw.weight_scale.numel(); ++k) ASSERT_EQ(scale[k], s) << qkv[i] << " cell " << k;
    EXPECT_EQ(bits(parts[i]), bits(alone.forward(*f.be, f.scratch, x)[0])) << qkv[i];
  }
}

TEST(OnlineFp8Linear, PaddingForTheMergeChangesNoOutput) {
  // dense_nested_tied's MLP is 96 wide: gate|up merge after padding each to
  // 128 rows, and down_proj then reads 128 columns, the last 32 zero.
  Fixture f("dense_nested_tied");
  const std::string gate = "layers.0.mlp.gate_proj", up = "layers.0.mlp.up_proj", down = "layers.0.mlp.down_proj";
  LinearLoadOptions pad;
  pad.row_align = kFp8BlockSize;
  Linear gu = Linear::load(*f.w, {gate, up}, pad);
  EXPECT_EQ(gu.num_gemms(), 1);
  EXPECT_EQ(gu.part_width(0), 128);
  TensorView x = f.input(3, gu.in_features());
  const auto padded = gu.forward(*f.be, f.scratch, x);
  for (int i = 0; i < 2; ++i) {
    const auto ref = bits(Linear::load(*f.w, {i == 0 ? gate : up}).forward(*f.be, f.scratch, x)[0]);
    const auto got = bits(padded[i]);
    for (size_t r = 0; r < 3; ++r)
      for (size_t c = 0; c < 128; ++c) {
        if (c < 96)
          ASSERT_EQ(got[r * 128 + c], ref[r * 96 + c]) << "row " << r << " col " << c;
        else
          ASSERT_EQ(got[r * 128 + c], 0) << "padding row " << r << " col " << c;
      }
  }
  LinearLoadOptions wide;
  wide.in_features_padded = 128;
  Linear down_padded = Linear::load(*f.w, {down}, wide);
  Linear down_plain = Linear::load(*f.w, {down});
  EXPECT_EQ(down_padded.in_features(), 128);
  TensorView a = f.input(3, 96), a_wide = f.scratch.take(DType::kBF16, Shape{3, 128});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 128; ++c)
      a_wide.data_as<uint16_t>()[r * 128 + c] = c < 96 ? a.data_as<uint16_t>()[r * 96 + c] : 0;
  EXPECT_EQ(bits(down_padded.forward(*f.be, f.scratch, a_wide)[0]), bits(down_plain.forward(*f.be, f.scratch, a)[0]));
}

TEST(OnlineFp8Linear, ExcludedLinearsStayBf16) {
  Fixture f("moe_nested_per_expert");
  EXPECT_EQ(Linear::load(*f.w, {"layers.0.mlp.gate"}).format(), WeightFormat::kBf16);  // the router
  EXPECT_EQ(Linear::load(*f.w, {"layers.0.mlp.shared_expert_gate"}).format(), WeightFormat::kBf16);
  EXPECT_EQ(Linear::load(*f.w, {"lm_head"}).format(), WeightFormat::kBf16);
  EXPECT_EQ(Linear::load(*f.w, {"layers.0.mlp.experts.2.up_proj"}).format(), WeightFormat::kFp8Block);
  EXPECT_EQ(Linear::load(*f.w, {"layers.0.mlp.shared_expert.down_proj"}).format(), WeightFormat::kFp8Block);
}

}  // namespace
}  // namespace hyllm
