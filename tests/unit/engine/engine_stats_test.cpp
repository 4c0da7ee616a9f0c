#include "engine/engine_stats.h"

#include <gtest/gtest.h>

#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "engine/sampler.h"
#include "util/status.h"

namespace hyllm {
namespace {

TEST(Histogram, BucketsAreInclusiveUpperBounds) {
  Histogram h({1.0, 2.0});
  h.observe(0.5);
  h.observe(1.0);
  h.observe(1.5);
  h.observe(7.0);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 1, 1}));
  EXPECT_EQ(h.count, 4u);
  EXPECT_DOUBLE_EQ(h.sum, 10.0);
}

TEST(Histogram, OneTwoFiveBucketsStopAtTheMaximum) {
  EXPECT_EQ(buckets_1_2_5(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(buckets_1_2_5(4), (std::vector<double>{1, 2}));
  EngineStats stats(4096);
  EXPECT_EQ(stats.prompt_tokens_per_request.bounds.back(), 2000);
  EXPECT_EQ(stats.time_to_first_token.bounds.size(), 22u);
}

TEST(FinishReason, NamesAreVllmLabels) {
  EXPECT_EQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_EQ(finish_reason_name(FinishReason::kAbort), "abort");
  EXPECT_EQ(finish_reason_name(FinishReason::kError), "error");
}

TEST(EngineConfig, RefusesUnsupportedCacheOptionsClearly) {
  EngineConfig c;
  EXPECT_NO_THROW(c.validate());
  c.kv_cache_dtype = "fp8";
  try {
    c.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype"), std::string::npos);
  }
  c.kv_cache_dtype = "auto";
  EXPECT_TRUE(c.enable_prefix_caching) << "on by default";
  c.max_num_batched_tokens = 8;
  c.max_num_seqs = 16;
  EXPECT_THROW(c.validate(), Error);
}

}  // namespace
}  // namespace hyllm
