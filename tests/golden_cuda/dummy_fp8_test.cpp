// --load-format dummy for the real FP8 configs on the GPU: the weights and
// scales are made on the device (fill_random, dummy_weights.h), and a forward
// pass through all the layers of the 27B (64) and 35B-A3B (40) stays finite
// with logits of a sane spread, for both FP8 formats and with the FP8 KV
// cache. Needs about 36 GB of GPU memory per model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "harness.h"

namespace hyllm::testing {
namespace {

class DummyFp8 : public ::testing::TestWithParam<const char*> {};

TEST_P(DummyFp8, RealScaleForwardStaysFinite) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const auto dir = std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/configs" / GetParam();
  Harness h(dir, make_cuda_backend(0), 256, {}, {}, [](ModelOptions& mo) {
    mo.load_format = LoadFormat::kDummy;
    mo.kv_cache_dtype = DType::kF8E4M3;
  });
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back((i * 7919) % 50000);
  const SeqResult r = h.run({SeqRun{prompt, 4, {}, {}}})[0];
  for (size_t s = 0; s < r.logits.size(); ++s) {
    double sum = 0, sum2 = 0;
    size_t bad = 0;
    for (float v : r.logits[s]) {
      if (!std::isfinite(v)) ++bad;
      sum += v;
      sum2 += static_cast<double>(v) * v;
    }
    const double n = static_cast<double>(r.logits[s].size());
    const double sd = std::sqrt(std::max(0.0, sum2 / n - (sum / n) * (sum / n)));
    EXPECT_EQ(bad, 0u) << GetParam() << " step " << s << ": non-finite logits";
    EXPECT_GT(sd, 0.01) << GetParam() << " step " << s << ": logits collapsed";
    EXPECT_LT(sd, 100.0) << GetParam() << " step " << s << ": logits blew up";
    std::printf("[dummy %s] step %zu: logits sd %.3f, mean %.3f, %zu non-finite\n", GetParam(), s, sd, sum / n, bad);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, DummyFp8,
                         ::testing::Values("qwen3_5_27b_fp8", "qwen3_5_27b_modelopt", "qwen3_5_35b_a3b_fp8",
                                           "qwen3_5_35b_a3b_modelopt"));

}  // namespace
}  // namespace hyllm::testing
