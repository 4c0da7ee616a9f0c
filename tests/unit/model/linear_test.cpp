// Linear merges several checkpoint linears into one GEMM where the format
// allows, and the merged outputs equal the separate ones.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/quantize/quantize.h"

namespace hyllm {
namespace {

std::filesystem::path tiny(const std::string& name) {
  return std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / name;
}

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend();
  ModelConfig cfg;
  std::unique_ptr<WeightSource> src;
  std::unique_ptr<WeightLoader> w;
  Scratch scratch;
  explicit Fixture(const std::filesystem::path& dir) {
    cfg = load_model_config(dir);
    src = open_weights(dir, cfg, LoadFormat::kSafetensors);
    w = std::make_unique<WeightLoader>(*be, *src);
    scratch = Scratch(*be, 8 << 20);
  }
  // Deterministic bf16 input [rows, cols].
  TensorView input(int64_t rows, int64_t cols) {
    TensorView x = scratch.take(DType::kBF16, Shape{rows, cols});
    auto* p = x.data_as<uint16_t>();
    for (int64_t i = 0; i < rows * cols; ++i) p[i] = f32_to_bf16(std::sin(0.37f * i) * 2.0f);
    return x;
  }
};

std::vector<float> column_slice(const ColSlice& s) {
  std::vector<float> out;
  const int64_t rows = s.rows();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < s.width; ++c) {
      const uint16_t* base = s.tensor.data_as<uint16_t>();
      out.push_back(bf16_to_f32(base[r * s.stride() + s.offset + c]));
    }
  return out;
}

void expect_merged_equals_separate(Fixture& f, const std::vector<std::string>& modules, int expect_gemms,
                                   const LinearLoadOptions& opts = {}) {
  Linear merged = Linear::load(*f.w, modules, opts);
  EXPECT_EQ(merged.num_gemms(), expect_gemms) << modules[0];
  TensorView x = f.input(5, merged.in_features());
  auto parts = merged.forward(*f.be, f.scratch, x);
  for (size_t i = 0; i < modules.size(); ++i) {
    Linear alone = Linear::load(*f.w, {modules[i]}, opts);
    auto ref = alone.forward(*f.be, f.scratch, x);
    auto a = column_slice(parts[i]), b = column_slice(ref[0]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], b[k]) << modules[i] << " element " << k;
  }
}

TEST(Linear, Bf16PartsMergeIntoOneGemm) {
  Fixture f(tiny("dense_flat_aligned"));
  expect_merged_equals_separate(f, {"layers.3.self_attn.q_proj", "layers.3.self_attn.k_proj", "layers.3.self_attn.v_proj"}, 1);
  expect_merged_equals_separate(f, {"layers.0.linear_attn.in_proj_qkv", "layers.0.linear_attn.in_proj_z"}, 1);
  expect_merged_equals_separate(f, {"layers.0.mlp.gate_proj", "layers.0.mlp.up_proj"}, 1);
}

// Quantizing a checkpoint into its own directory is refused before anything
// is written: the source keeps its bytes.
TEST(Quantize, RefusesToWriteIntoTheCheckpointItReads) {
  auto cpu = make_cpu_backend();
  const auto dir = std::filesystem::temp_directory_path() / ("hyllm_quantize_self_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(tiny("dense_flat_aligned"), dir);
  const auto weights = dir / "model.safetensors";
  const auto size_before = std::filesystem::file_size(weights);
  QuantizeOptions o;
  o.target = Fp8Target::kFp8Block;
  EXPECT_THROW(quantize_checkpoint(dir, dir / ".", o, *cpu), Error);
  o.dequantized_dir = dir;
  EXPECT_THROW(quantize_checkpoint(dir, dir / "out", o, *cpu), Error);
  EXPECT_EQ(std::filesystem::file_size(weights), size_before);
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
  std::filesystem::remove_all(dir);
}

class QuantizedLinear : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto cpu = make_cpu_backend();
    root_ = std::filesystem::temp_directory_path() / ("hyllm_linear_test_" + std::to_string(::getpid()));
    for (auto [name, target] : {std::pair{"aligned_block", Fp8Target::kFp8Block},
                                std::pair{"aligned_modelopt", Fp8Target::kModelOptFp8}}) {
      QuantizeOptions o;
      o.target = target;
      quantize_checkpoint(tiny("dense_flat_aligned"), root_ / name, o, *cpu);
    }
    QuantizeOptions o;
    o.target = Fp8Target::kFp8Block;
    quantize_checkpoint(tiny("moe_flat_fused"), root_ / "moe_block", o, *cpu);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(root_); }
  static std::filesystem::path root_;
};
std::filesystem::path QuantizedLinear::root_;

TEST_F(QuantizedLinear, BlockFp8AlignedPartsMergeExactly) {
  Fixture f(root_ / "aligned_block");
  EXPECT_EQ(linear_format(*f.w, "layers.3.self_attn.q_proj"), WeightFormat::kFp8Block);
  expect_merged_equals_separate(f, {"layers.3.self_attn.q_proj", "layers.3.self_attn.k_proj", "layers.3.self_attn.v_proj"}, 1);
  expect_merged_equals_separate(f, {"layers.0.linear_attn.in_proj_qkv", "layers.0.linear_attn.in_proj_z"}, 1);
  expect_merged_equals_separate(f, {"layers.0.mlp.gate_proj", "layers.0.mlp.up_proj"}, 1);
}

TEST_F(QuantizedLinear, BlockFp8UnalignedPartsStaySeparateOrPadExactly) {
  Fixture f(root_ / "moe_block");
  // GDN q|k (32 rows each) and the shared expert's 48-row gate/up are not
  // multiples of 128.
  expect_merged_equals_separate(f, {"layers.0.linear_attn.in_proj_qkv", "layers.0.linear_attn.in_proj_z"}, 2);
  LinearLoadOptions pad;
  pad.row_align = 128;
  Linear padded = Linear::load(*f.w, {"layers.0.mlp.shared_expert.gate_proj", "layers.0.mlp.shared_expert.up_proj"}, pad);
  EXPECT_EQ(padded.num_gemms(), 1);
  EXPECT_EQ(padded.part_width(0), 128);
  TensorView x = f.input(3, padded.in_features());
  auto parts = padded.forward(*f.be, f.scratch, x);
  for (int i = 0; i < 2; ++i) {
    const char* m = i == 0 ? "layers.0.mlp.shared_expert.gate_proj" : "layers.0.mlp.shared_expert.up_proj";
    auto ref = column_slice(Linear::load(*f.w, {m}).forward(*f.be, f.scratch, x)[0]);
    auto got = column_slice(parts[i]);
    const size_t width = ref.size() / 3;
    for (size_t r = 0; r < 3; ++r)
      for (size_t c = 0; c < 128; ++c) {
        float v = got[r * 128 + c];
        if (c < width)
          ASSERT_EQ(v, ref[r * width + c]) << m << " row " << r << " col " << c;
        else
          ASSERT_EQ(v, 0.0f) << m << " padding row " << r << " col " << c;
      }
  }
}

TEST_F(QuantizedLinear, ModelOptPartsShareTheLargestScale) {
  Fixture f(root_ / "aligned_modelopt");
  EXPECT_EQ(linear_format(*f.w, "layers.3.self_attn.q_proj"), WeightFormat::kFp8Tensor);
  Linear merged = Linear::load(*f.w, {"layers.3.self_attn.q_proj", "layers.3.self_attn.k_proj", "layers.3.self_attn.v_proj"});
  EXPECT_EQ(merged.num_gemms(), 1);
  EXPECT_EQ(merged.format(), WeightFormat::kFp8Tensor);
  // Re-quantised to the largest weight scale, each part stays within FP8
  // rounding of its own unmerged output.
  TensorView x = f.input(4, merged.in_features());
  auto parts = merged.forward(*f.be, f.scratch, x);
  for (size_t i = 0; i < 3; ++i) {
    const char* names[] = {"layers.3.self_attn.q_proj", "layers.3.self_attn.k_proj", "layers.3.self_attn.v_proj"};
    auto ref = column_slice(Linear::load(*f.w, {names[i]}).forward(*f.be, f.scratch, x)[0]);
    auto got = column_slice(parts[i]);
    double num = 0, den = 0;
    for (size_t k = 0; k < ref.size(); ++k) {
      num += (got[k] - ref[k]) * (got[k] - ref[k]);
      den += ref[k] * ref[k];
    }
    EXPECT_LT(std::sqrt(num / den), 0.08) << names[i];
  }
}

}  // namespace
}  // namespace hyllm
