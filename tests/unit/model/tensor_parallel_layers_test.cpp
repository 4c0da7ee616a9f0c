// The feed-forward layers split over tensor-parallel ranks (CPU backends on
// threads, the in-process communicator) against the same layers whole, on
// the same input: the ranks' summed partials must be the unsplit output up
// to bf16 rounding. This pins the weight cuts and the reductions down without
// the engine's noise (a MoE router that flips on a near tie changes a token
// a lot; here every rank routes the very same x).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <vector>

#include "../ops/rank_threads.h"
#include "model/layers/mlp.h"
#include "model/layers/moe.h"
#include "model/loader/tensor_parallel.h"

namespace hyllm {
namespace {

namespace fs = std::filesystem;

fs::path tiny(const std::string& name) { return fs::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / name; }

// Deterministic bf16 input [rows, cols] in host memory (the CPU backend's).
std::vector<uint16_t> input(int64_t rows, int64_t cols) {
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = f32_to_bf16(std::sin(0.37f * static_cast<float>(i)) * 1.5f);
  return x;
}

std::vector<float> floats(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(t.data_as<uint16_t>()[i]);
  return out;
}

// Runs `layer(loader, backend, scratch, x)` whole (size 1) or split over
// `size` ranks, and returns rank 0's output.
using Layer = std::function<TensorView(WeightLoader&, Backend&, Scratch&, const TensorView&)>;

std::vector<float> run(const fs::path& dir, int size, const std::vector<uint16_t>& x_host, int64_t rows,
                       const Layer& layer) {
  const ModelConfig full = load_model_config(dir);
  auto weights = open_weights(dir, full, LoadFormat::kSafetensors);
  std::vector<std::vector<float>> outs(static_cast<size_t>(size));
  test::RankGroup group(size);
  test::expect_all_ok(group.run([&](int r, Backend& be) {
    auto shard = size > 1 ? shard_weights(*weights, full, {r, size}) : nullptr;
    WeightLoader w(be, shard ? *shard : *weights);
    Scratch s(be, 4 << 20);
    std::vector<uint16_t> x_copy = x_host;  // each rank its own input, as on separate devices
    TensorView x(x_copy.data(), DType::kBF16, Shape{rows, full.hidden_size}, be.device());
    outs[static_cast<size_t>(r)] = floats(layer(w, be, s, x));
  }));
  for (int r = 1; r < size; ++r) EXPECT_EQ(outs[static_cast<size_t>(r)], outs[0]) << "rank " << r << " differs";
  return outs[0];
}

// Largest |a - b| relative to the largest |a|.
float relative_max_error(const std::vector<float>& a, const std::vector<float>& b) {
  float err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(a[i]));
  }
  return err / scale;
}

TEST(TensorParallelLayers, DenseMlpSplitSumsToTheWholeMlp) {
  const fs::path dir = tiny("dense_flat_ratio3");  // intermediate 160: 80 per rank
  const int64_t rows = 7;
  const auto x = input(rows, load_model_config(dir).hidden_size);
  Layer mlp = [](WeightLoader& w, Backend& be, Scratch& s, const TensorView& in) {
    return Mlp::load(w, "layers.0.mlp").forward(be, s, LayerInput{in, {}});
  };
  const auto whole = run(dir, 1, x, rows, mlp);
  const auto split = run(dir, 2, x, rows, mlp);
  ASSERT_EQ(split.size(), whole.size());
  // f32 partials added once: at most a bf16 ulp apart, and rarely.
  int differ = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_LE(std::fabs(split[i] - whole[i]), std::fabs(whole[i]) * (1.0f / 128)) << i;
    differ += split[i] != whole[i];
  }
  EXPECT_LE(differ, static_cast<int>(whole.size()) / 20);
}

TEST(TensorParallelLayers, MoeSplitSumsToTheWholeMoe) {
  for (const auto& [model, sizes] : std::vector<std::pair<std::string, std::vector<int>>>{
           {"moe_flat_fused", {2, 4}}, {"moe_flat_per_expert_tied", {2}}}) {
    const fs::path dir = tiny(model);
    const ModelConfig cfg = load_model_config(dir);
    const int64_t rows = 9;
    const auto x = input(rows, cfg.hidden_size);
    Layer moe = [&](WeightLoader& w, Backend& be, Scratch& s, const TensorView& in) {
      const ModelConfig local = tensor_parallel_config(cfg, TensorParallelGroup::of(be).split()
                                                                ? TensorParallel{TensorParallelGroup::of(be).rank,
                                                                                 TensorParallelGroup::of(be).size}
                                                                : TensorParallel{});
      return MoeBlock::load(w, local, "layers.1.mlp").forward(be, s, LayerInput{in, {}});
    };
    const auto whole = run(dir, 1, x, rows, moe);
    for (int size : sizes) {
      const auto split = run(dir, size, x, rows, moe);
      // Each rank's bf16 partial rounds once more than the whole output.
      EXPECT_LT(relative_max_error(whole, split), 0.02f) << model << " over " << size << " ranks";
    }
  }
}

}  // namespace
}  // namespace hyllm
