// The FP8 KV cache (--kv-cache-dtype fp8) on the default model, CPU backend:
// e4m3 K/V with scale 1.0 (the model has no calibrated scales) against the
// bf16 cache, over the prompts of the default model's goldens (3 to 300
// tokens, 48 generated). What it costs is printed and bounded here, and
// recorded in docs/fp8.md.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compare_runs.h"

namespace hyllm::testing {
namespace {

std::filesystem::path default_model() { return std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny"; }

std::vector<std::vector<int32_t>> default_model_prompts() {
  std::ifstream f(std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/default_model/goldens.json");
  const auto j = nlohmann::json::parse(f);
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : j.at("cases")) out.push_back(c.at("prompt_ids").get<std::vector<int32_t>>());
  return out;
}

TEST(KvCacheFp8, DefaultModelStaysCloseToBf16) {
  Harness bf16(default_model());
  Harness fp8(default_model(), make_cpu_backend(), 1024, {}, {},
              [](ModelOptions& mo) { mo.kv_cache_dtype = DType::kF8E4M3; });
  EXPECT_EQ(bf16.runner().model().kv_bytes_per_token(), 2 * fp8.runner().model().kv_bytes_per_token());
  constexpr int kSteps = 48;
  RunComparison all;
  int prompts = 0;
  for (const auto& prompt : default_model_prompts()) {
    const RunComparison c = compare_runs(bf16, fp8, prompt, kSteps);
    EXPECT_EQ(c.mismatches, 0) << "prompt of " << prompt.size() << " tokens: greedy tokens differ at step " << c.agreed
                               << " where the bf16 margin exceeds twice the logit difference";
    std::printf("[kv fp8] prompt %zu: logits rel RMS err %.4f, max|d| %.3f; %d/%d greedy tokens equal\n", prompt.size(),
                c.rel_rms(), c.max_abs, c.agreed, kSteps);
    all.add(c);
    ++prompts;
  }
  std::printf("[kv fp8] %d prompts: logits rel RMS err %.4f, max|d| %.3f; %d/%d greedy tokens equal\n", prompts,
              all.rel_rms(), all.max_abs, all.agreed, all.steps);
  EXPECT_LT(all.rel_rms(), 0.025);
  EXPECT_GT(all.rel_rms(), 0.0) << "the FP8 cache changed nothing: is it in use?";
}

}  // namespace
}  // namespace hyllm::testing
