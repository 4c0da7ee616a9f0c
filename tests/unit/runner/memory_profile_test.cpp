#include "engine/runner/memory_profile.h"

#include <gtest/gtest.h>

#include <numeric>

#include "util/status.h"

namespace hyllm {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

TEST(ProfileStep, WidestBatchAndLongestChunk) {
  // vLLM's H200 defaults: 1024 rows of one token, the rest in one prefill chunk.
  auto l = profile_step_lengths(8192, 1024, 32768);
  ASSERT_EQ(l.size(), 1024u);
  EXPECT_EQ(l[0], 8192 - 1023);
  EXPECT_EQ(l[1], 1);
  EXPECT_EQ(std::accumulate(l.begin(), l.end(), int64_t{0}), 8192);
}

TEST(ProfileStep, ChunksStopAtMaxModelLen) {
  auto l = profile_step_lengths(2048, 4, 600);
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0], 600);
  EXPECT_EQ(l[1], 600);
  EXPECT_EQ(l[2], 600);
  EXPECT_EQ(l[3], 248);
  // Fewer sequences than tokens allow: every sequence is as long as it may be.
  auto short_seqs = profile_step_lengths(100, 2, 10);
  EXPECT_EQ(short_seqs, (std::vector<int64_t>{10, 10}));
  // More sequences than tokens: one token each.
  EXPECT_EQ(profile_step_lengths(3, 8, 100), (std::vector<int64_t>{1, 1, 1}));
}

TEST(KvBudget, UtilizationOfTotalLessWhatIsInUse) {
  KvBudgetInput in;
  in.total_bytes = 140 * kGiB;
  in.used_bytes = 60 * kGiB;
  in.weight_bytes = 50 * kGiB;
  in.activation_bytes = 8 * kGiB;
  in.gpu_memory_utilization = 0.9;
  KvBudget b = kv_cache_budget(in);
  EXPECT_EQ(b.allowed_bytes, static_cast<size_t>(0.9 * 140 * kGiB));
  EXPECT_EQ(b.cache_bytes, b.allowed_bytes - 60 * kGiB);
  EXPECT_EQ(b.other_bytes, 2 * kGiB);
  in.gpu_memory_utilization = 0.5;
  EXPECT_EQ(kv_cache_budget(in).cache_bytes, 10 * kGiB);
}

TEST(KvBudget, NothingLeftIsAnError) {
  KvBudgetInput in;
  in.total_bytes = 100 * kGiB;
  in.used_bytes = 95 * kGiB;
  in.weight_bytes = 90 * kGiB;
  in.gpu_memory_utilization = 0.9;
  try {
    kv_cache_budget(in);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("--gpu-memory-utilization"), std::string::npos);
  }
  in.gpu_memory_utilization = 1.5;
  EXPECT_THROW(kv_cache_budget(in), Error);
}

TEST(KvBudget, AccountingNeverUnderflows) {
  KvBudgetInput in;
  in.total_bytes = 10 * kGiB;
  in.used_bytes = 1 * kGiB;
  in.weight_bytes = 2 * kGiB;  // weights counted larger than what the device reports in use
  EXPECT_EQ(kv_cache_budget(in).other_bytes, 0u);
}

}  // namespace
}  // namespace hyllm
