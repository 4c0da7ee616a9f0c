// Dummy weights: the catalogue of the real configs, sane values, determinism.

#include "model/loader/dummy_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "tiny_model.h"

namespace hyllm {
namespace {

ModelConfig fixture(const std::string& name) {
  return load_model_config(std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/configs" / name);
}

// Parameters of the language model, or of its MTP head (mtp.*).
int64_t total_parameters(const WeightSource& w, bool mtp = false) {
  int64_t n = 0;
  for (const TensorInfo& t : w.tensors()) {
    if (t.name.starts_with("mtp.") == mtp) n += t.shape.numel();
  }
  return n;
}

std::vector<float> read_floats(const WeightSource& w, const std::string& name) {
  const TensorInfo& t = w.info(name);
  std::string bytes(t.nbytes, '\0');
  w.read(name, bytes.data());
  std::vector<float> out(static_cast<size_t>(t.shape.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::kF32: std::memcpy(&out[i], bytes.data() + 4 * i, 4); break;
      case DType::kBF16: {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = bf16_to_f32(h);
        break;
      }
      case DType::kF8E4M3: out[i] = f8e4m3_to_f32(static_cast<uint8_t>(bytes[i])); break;
      default: ADD_FAILURE() << "dtype";
    }
  }
  return out;
}

void expect_matches_catalogue(const DummyWeights& w) {
  ASSERT_EQ(w.tensors().size(), w.specs().size());
  for (size_t i = 0; i < w.specs().size(); ++i) {
    const TensorSpec& s = w.specs()[i];
    const TensorInfo& t = w.tensors()[i];
    ASSERT_EQ(t.name, s.name);
    ASSERT_EQ(t.shape, s.shape) << s.name;
    ASSERT_EQ(t.dtype, s.dtype) << s.name;
    ASSERT_EQ(t.nbytes, static_cast<size_t>(s.shape.numel()) * dtype_size(s.dtype)) << s.name;
  }
}

TEST(DummyWeights, Qwen35_27B) {
  ModelConfig c = fixture("qwen3_5_27b");
  DummyWeights w(c, 0);
  expect_matches_catalogue(w);
  // Per layer: 2 norms + 3 MLP + (GDN 9 | attention 6); plus embed, norm,
  // lm_head; plus the MTP head: fc, 3 norms and one attention layer.
  EXPECT_EQ(w.tensors().size(), 3u + 48 * (5 + 9) + 16 * (5 + 6) + 4 + (5 + 6));
  EXPECT_EQ(w.info("mtp.fc.weight").shape, (Shape{5120, 10240}));
  EXPECT_EQ(w.info("mtp.layers.0.self_attn.q_proj.weight").shape, (Shape{12288, 5120}));
  EXPECT_EQ(w.info("mtp.layers.0.mlp.down_proj.weight").shape, (Shape{5120, 17408}));
  EXPECT_EQ(w.info("embed_tokens.weight").shape, (Shape{248320, 5120}));
  EXPECT_EQ(w.info("lm_head.weight").shape, (Shape{248320, 5120}));
  EXPECT_EQ(w.info("layers.3.self_attn.q_proj.weight").shape, (Shape{12288, 5120}));
  EXPECT_EQ(w.info("layers.3.self_attn.k_proj.weight").shape, (Shape{1024, 5120}));
  EXPECT_EQ(w.info("layers.3.self_attn.o_proj.weight").shape, (Shape{5120, 6144}));
  EXPECT_EQ(w.info("layers.0.linear_attn.in_proj_qkv.weight").shape, (Shape{10240, 5120}));
  EXPECT_EQ(w.info("layers.0.linear_attn.in_proj_z.weight").shape, (Shape{6144, 5120}));
  EXPECT_EQ(w.info("layers.0.linear_attn.in_proj_b.weight").shape, (Shape{48, 5120}));
  EXPECT_EQ(w.info("layers.0.linear_attn.conv1d.weight").shape, (Shape{10240, 1, 4}));
  EXPECT_EQ(w.info("layers.0.linear_attn.A_log").dtype, DType::kF32);
  EXPECT_EQ(w.info("layers.0.linear_attn.norm.weight").shape, (Shape{128}));
  EXPECT_EQ(w.info("layers.0.mlp.down_proj.weight").shape, (Shape{5120, 17408}));
  EXPECT_FALSE(w.contains("layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(w.contains("layers.3.linear_attn.A_log"));
  // The language model of Qwen3.5-27B has about 26.9 B parameters.
  EXPECT_NEAR(static_cast<double>(total_parameters(w)) / 1e9, 26.9, 0.3);
  // Its MTP head: fc 52 M, one attention layer with a dense MLP 372 M.
  EXPECT_NEAR(static_cast<double>(total_parameters(w, /*mtp=*/true)) / 1e6, 424.7, 1.0);
}

TEST(DummyWeights, Qwen35_35B_A3B) {
  ModelConfig c = fixture("qwen3_5_35b_a3b");
  DummyWeights w(c, 0);
  expect_matches_catalogue(w);
  EXPECT_EQ(w.info("layers.0.mlp.gate.weight").shape, (Shape{256, 2048}));
  EXPECT_EQ(w.info("layers.0.mlp.experts.gate_up_proj").shape, (Shape{256, 1024, 2048}));
  EXPECT_EQ(w.info("layers.0.mlp.experts.down_proj").shape, (Shape{256, 2048, 512}));
  EXPECT_EQ(w.info("layers.0.mlp.shared_expert.gate_proj.weight").shape, (Shape{512, 2048}));
  EXPECT_EQ(w.info("layers.0.mlp.shared_expert_gate.weight").shape, (Shape{1, 2048}));
  EXPECT_EQ(w.info("layers.3.self_attn.q_proj.weight").shape, (Shape{8192, 2048}));
  EXPECT_EQ(w.info("layers.0.linear_attn.in_proj_qkv.weight").shape, (Shape{8192, 2048}));
  EXPECT_EQ(w.info("layers.0.linear_attn.in_proj_a.weight").shape, (Shape{32, 2048}));
  EXPECT_NEAR(static_cast<double>(total_parameters(w)) / 1e9, 34.7, 0.5);
  EXPECT_EQ(w.info("mtp.layers.0.mlp.experts.gate_up_proj").shape, (Shape{256, 1024, 2048}));
}

TEST(DummyWeights, Qwen35_35B_A3B_Fp8PerExpert) {
  ModelConfig c = fixture("qwen3_5_35b_a3b_fp8");
  DummyWeights w(c, 0);
  expect_matches_catalogue(w);
  const TensorInfo& e = w.info("layers.5.mlp.experts.255.gate_proj.weight");
  EXPECT_EQ(e.dtype, DType::kF8E4M3);
  EXPECT_EQ(e.shape, (Shape{512, 2048}));
  EXPECT_EQ(w.info("layers.5.mlp.experts.255.gate_proj.weight_scale_inv").shape, (Shape{4, 16}));
  EXPECT_EQ(w.info("layers.5.mlp.experts.0.down_proj.weight_scale_inv").shape, (Shape{16, 4}));
  EXPECT_EQ(w.info("layers.5.mlp.gate.weight").dtype, DType::kBF16);
  EXPECT_EQ(w.info("layers.4.linear_attn.in_proj_b.weight").dtype, DType::kBF16);
  EXPECT_EQ(w.info("layers.4.linear_attn.in_proj_qkv.weight").dtype, DType::kF8E4M3);
  EXPECT_FALSE(w.contains("layers.5.mlp.experts.gate_up_proj"));

  // Dequantized expert weights look like N(0, 0.02).
  std::vector<float> q = read_floats(w, "layers.5.mlp.experts.255.gate_proj.weight");
  std::vector<float> s = read_floats(w, "layers.5.mlp.experts.255.gate_proj.weight_scale_inv");
  double sum2 = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_TRUE(std::isfinite(q[i]));
    double v = q[i] * s[(i / 2048 / 128) * 16 + (i % 2048) / 128];
    sum2 += v * v;
  }
  EXPECT_NEAR(std::sqrt(sum2 / static_cast<double>(q.size())), 0.02, 0.002);
}

TEST(DummyWeights, ModelOptHasScalarScales) {
  ModelConfig c = fixture("qwen3_5_27b_modelopt");
  DummyWeights w(c, 0);
  expect_matches_catalogue(w);
  EXPECT_EQ(w.info("layers.3.self_attn.q_proj.weight").dtype, DType::kF8E4M3);
  EXPECT_EQ(w.info("layers.3.self_attn.q_proj.weight_scale").shape.rank(), 0);
  EXPECT_EQ(w.info("layers.3.self_attn.q_proj.input_scale").shape.rank(), 0);
  EXPECT_TRUE(w.contains("layers.3.self_attn.k_scale"));
  EXPECT_FALSE(w.contains("layers.2.self_attn.k_scale"));
  float input_scale = read_floats(w, "layers.3.self_attn.q_proj.input_scale")[0];
  EXPECT_GT(input_scale, 0.0f);
}

TEST(DummyWeights, ValuesAreSane) {
  ModelConfig c = fixture("qwen3_5_27b");
  DummyWeights w(c, 1);
  for (float a : read_floats(w, "layers.0.linear_attn.A_log")) {
    EXPECT_GE(a, 0.0f);
    EXPECT_LE(a, std::log(16.0f));
  }
  for (float v : read_floats(w, "layers.0.linear_attn.norm.weight")) EXPECT_NEAR(v, 1.0f, 0.1f);
  for (float v : read_floats(w, "layers.0.input_layernorm.weight")) EXPECT_NEAR(v, 0.0f, 0.1f);
  for (float v : read_floats(w, "layers.0.linear_attn.dt_bias")) EXPECT_NEAR(v, 0.0f, 0.11f);
  std::vector<float> b = read_floats(w, "layers.0.linear_attn.in_proj_b.weight");  // 48 x 5120
  double sum = 0, sum2 = 0;
  for (float v : b) {
    sum += v;
    sum2 += static_cast<double>(v) * v;
  }
  double n = static_cast<double>(b.size());
  EXPECT_NEAR(sum / n, 0.0, 0.001);
  EXPECT_NEAR(std::sqrt(sum2 / n), 0.02, 0.001);
}

// The router skew scales each router row by (rank + 1)^-S (RMS 1), in a
// per-layer order; nothing else changes, and skew 0 is the plain router.
TEST(DummyWeights, RouterSkewScalesRouterRows) {
  const auto flat = dummy_router_row_scales(256, 0.0f, 7);
  EXPECT_EQ(flat, std::vector<float>(256, 1.0f));
  const auto s = dummy_router_row_scales(256, 0.5f, 7);
  double sum_sq = 0.0;
  for (float v : s) sum_sq += static_cast<double>(v) * v;
  EXPECT_NEAR(sum_sq / 256.0, 1.0, 1e-4);
  std::vector<float> sorted = s;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int r = 1; r < 256; ++r) EXPECT_NEAR(sorted[r] / sorted[0], std::pow(r + 1.0, -0.5), 1e-5);
  EXPECT_NE(s, dummy_router_row_scales(256, 0.5f, 8));  // another layer, another order

  ModelConfig c = fixture("qwen3_5_35b_a3b");
  DummyWeights plain(c, 3), skewed(c, 3, 0.5f);
  const std::string router = "layers.1.mlp.gate.weight";
  EXPECT_TRUE(plain.generated(router).has_value());
  EXPECT_FALSE(skewed.generated(router).has_value());  // scaled rows come from read()
  const auto a = read_floats(plain, router), b = read_floats(skewed, router);
  const int64_t H = c.hidden_size;
  std::vector<double> ratio(static_cast<size_t>(c.num_experts));
  for (int64_t e = 0; e < c.num_experts; ++e) {
    double num = 0.0, den = 0.0;
    for (int64_t h = 0; h < H; ++h) {
      num += std::fabs(b[e * H + h]);
      den += std::fabs(a[e * H + h]);
    }
    ratio[e] = num / den;
  }
  EXPECT_GT(*std::max_element(ratio.begin(), ratio.end()) / *std::min_element(ratio.begin(), ratio.end()), 10.0);
  const std::string other = "layers.1.mlp.shared_expert_gate.weight";
  EXPECT_EQ(read_floats(plain, other), read_floats(skewed, other));
}

TEST(DummyWeights, DeterministicPerSeedAndName) {
  ModelConfig c = fixture("qwen3_5_0_8b");
  DummyWeights a(c, 5), b(c, 5), other(c, 6);
  EXPECT_FALSE(a.contains("lm_head.weight"));  // tied
  const std::string name = "layers.2.linear_attn.in_proj_a.weight";
  EXPECT_EQ(read_floats(a, name), read_floats(b, name));
  EXPECT_NE(read_floats(a, name), read_floats(other, name));
  EXPECT_NE(read_floats(a, name), read_floats(a, "layers.1.linear_attn.in_proj_a.weight"));
}

TEST(DummyWeights, ParallelGenerationMatchesSerial) {
  // A tensor above the parallel threshold equals what element-wise generation gives.
  ModelConfig c = fixture("qwen3_5_0_8b");
  DummyWeights w(c, 3);
  std::vector<float> big = read_floats(w, "layers.0.mlp.up_proj.weight");  // 3584 x 1024, parallel
  std::vector<float> again = read_floats(w, "layers.0.mlp.up_proj.weight");
  EXPECT_EQ(big, again);
}

TEST(DummyWeights, VisitStreamsEveryTensor) {
  ModelConfig c = parse_model_config(testing::tiny_config_json(true));
  DummyWeights w(c, 0);
  size_t seen = 0;
  uint64_t bytes = 0;
  LoadStats stats = visit_tensors(w, [&](const TensorInfo& t, const void* host) {
    std::string expected(t.nbytes, '\0');
    w.read(t.name, expected.data());
    EXPECT_EQ(std::memcmp(expected.data(), host, t.nbytes), 0) << t.name;
    ++seen;
    bytes += t.nbytes;
  });
  EXPECT_EQ(seen, w.tensors().size());
  EXPECT_EQ(stats.tensors, static_cast<int64_t>(seen));
  EXPECT_EQ(stats.bytes, bytes);
  EXPECT_GT(stats.parameters, 0);
}

}  // namespace
}  // namespace hyllm

namespace hyllm {
namespace {

TEST(LoadProgress, CountsWhatWasAdded) {
  ModelConfig c = parse_model_config(testing::tiny_config_json(false));
  DummyWeights w(c, 0);
  LoadProgress progress(w);
  for (size_t i = 0; i < 3; ++i) progress.add(w.tensors()[i]);
  LoadStats s = progress.finish();
  EXPECT_EQ(s.tensors, 3);
  EXPECT_EQ(s.bytes, w.tensors()[0].nbytes + w.tensors()[1].nbytes + w.tensors()[2].nbytes);
  EXPECT_GE(s.seconds, 0.0);
}

TEST(LoadFormat, ParseAndOpenDummy) {
  EXPECT_EQ(parse_load_format("auto"), LoadFormat::kAuto);
  EXPECT_EQ(parse_load_format("safetensors"), LoadFormat::kSafetensors);
  EXPECT_EQ(parse_load_format("dummy"), LoadFormat::kDummy);
  EXPECT_EQ(testing::expect_error([] { parse_load_format("pt"); }).code(), ErrorCode::kInvalidArgument);
  ModelConfig c = fixture("qwen3_5_35b_a3b");
  // No files are needed (the directory does not even exist).
  auto w = open_weights("/nonexistent/model", c, LoadFormat::kDummy, 42);
  EXPECT_EQ(w->tensors().size(), qwen35_expected_tensors(c).size());
  EXPECT_NE(w->describe().find("seed 42"), std::string::npos);
  EXPECT_FALSE(w->mapped("norm.weight").has_value());
}

}  // namespace
}  // namespace hyllm
