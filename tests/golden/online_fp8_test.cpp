// --quantization fp8 on BF16 checkpoints (online FP8: per-tensor weight
// scales computed at load, activations quantised per token per 128 columns by
// the block-FP8 linear), CPU backend: each model against its own BF16 run.
// The trained default model shows what FP8 costs; the random tiny models
// amplify rounding about tenfold (see fp8_test.cpp), the tied one with its
// small margins most, so for them the bound only separates FP8 noise from a
// broken format (errors of 100% and more). Each model's weights must shrink,
// so the FP8 path is really taken; only moe_nested_per_expert's grow, since
// its experts (intermediate size 24) are padded to 128-row FP8 blocks.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compare_runs.h"

namespace hyllm::testing {
namespace {

struct OnlineCase {
  const char* name;
  double rel_rms;  // bound on the logits' relative RMS error over all steps
  bool shrinks = true;  // false: FP8 block padding outweighs the halved bytes
};

std::filesystem::path dir_of(const std::string& name) {
  if (name == "hyllm-tiny") return std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny";
  return tiny_model_dir(name);
}

std::vector<std::vector<int32_t>> prompts_of(const std::string& name) {
  const std::filesystem::path file = name == "hyllm-tiny"
                                         ? std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/default_model/goldens.json"
                                         : tiny_model_dir(name) / "golden.json";
  std::ifstream f(file);
  const auto j = nlohmann::json::parse(f);
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : j.at("cases")) out.push_back(c.at("prompt_ids").get<std::vector<int32_t>>());
  if (out.size() > 4) out.resize(4);
  return out;
}

class OnlineFp8 : public ::testing::TestWithParam<OnlineCase> {};

TEST_P(OnlineFp8, StaysNearBf16) {
  const OnlineCase& c = GetParam();
  Harness bf16(dir_of(c.name));
  Harness fp8(dir_of(c.name), make_cpu_backend(), 1024, {}, {}, [](ModelOptions& mo) { mo.online_fp8 = true; });
  const size_t bf16_bytes = bf16.runner().model().weight_bytes(), fp8_bytes = fp8.runner().model().weight_bytes();
  if (c.shrinks) EXPECT_LT(fp8_bytes, bf16_bytes) << "no linear was quantised";
  else EXPECT_GT(fp8_bytes, bf16_bytes) << "the padded experts were not quantised";
  constexpr int kSteps = 16;
  RunComparison all;
  for (const auto& prompt : prompts_of(c.name)) {
    const RunComparison r = compare_runs(bf16, fp8, prompt, kSteps);
    EXPECT_EQ(r.mismatches, 0) << c.name << " prompt of " << prompt.size() << " tokens: greedy tokens differ at step "
                               << r.agreed << " where the bf16 margin exceeds twice the logit difference";
    all.add(r);
  }
  EXPECT_LT(all.rel_rms(), c.rel_rms) << c.name;
  EXPECT_GT(all.rel_rms(), 0.0) << c.name << ": identical logits, FP8 not in use";
  std::printf("[online fp8 %s] weights %.2f -> %.2f MB; logits rel RMS err %.4f (bound %.2f), max|d| %.3f; %d/%d "
              "greedy tokens equal\n",
              c.name, bf16_bytes / 1e6, fp8_bytes / 1e6, all.rel_rms(), c.rel_rms, all.max_abs, all.agreed, all.steps);
}

INSTANTIATE_TEST_SUITE_P(Models, OnlineFp8,
                         ::testing::Values(OnlineCase{"hyllm-tiny", 0.05}, OnlineCase{"dense_flat_aligned", 0.3},
                                           OnlineCase{"dense_nested_tied", 0.6},
                                           OnlineCase{"moe_nested_per_expert", 0.3, false}, OnlineCase{"moe_flat_fused", 0.4}),
                         [](const ::testing::TestParamInfo<OnlineCase>& i) {
                           std::string n = i.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace hyllm::testing
