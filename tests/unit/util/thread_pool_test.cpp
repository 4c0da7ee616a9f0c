#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace hyllm {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 3, 17, 1000, 4097}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(0, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, RespectsMinChunk) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(0, 10, [&](int64_t, int64_t) { calls++; }, 100);
  EXPECT_EQ(calls.load(), 1);
}

TEST(ThreadPool, RethrowsOnCaller) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(0, 100, [](int64_t b, int64_t) {
    if (b > 0) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  // The pool stays usable after an exception.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(0, 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, ManyRoundsDoNotDeadlock) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int r = 0; r < 2000; ++r) {
    pool.parallel_for(0, 8, [&](int64_t b, int64_t e) { total += e - b; });
  }
  EXPECT_EQ(total.load(), 16000);
}

}  // namespace hyllm
