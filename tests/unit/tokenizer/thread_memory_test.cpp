// Encoding on many threads, as the server does on its connection threads:
// one BPE cache shared by all of them (answers stay exact while threads fill
// it together), and little memory left behind on each thread.

#include <gtest/gtest.h>

#include <malloc.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

#if defined(__SANITIZE_ADDRESS__)
#define HYLLM_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HYLLM_TEST_UNDER_ASAN 1
#endif
#endif

namespace hyllm {
namespace {

Tokenizer fresh_qwen3() { return Tokenizer::from_model_dir(testing::npm_tokenizer_dir("tokenizer-qwen3")); }

std::string mixed_text(int seed) {
  std::string s;
  for (int i = 0; i < 300; ++i) {
    s += "word" + std::to_string((i * 7 + seed) % 97) + " 你好 мир" + std::to_string(i % 13) + ", ";
  }
  return s;
}

TEST(TokenizerThreads, ColdSharedCacheAgreesWithOneThread) {
  // Both tokenizers start with an empty cache: here the threads race to fill
  // one, there a single thread fills it.
  const Tokenizer racing = fresh_qwen3();
  const Tokenizer alone = fresh_qwen3();
  constexpr int kThreads = 4;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> want;
  for (int k = 0; k < kThreads; ++k) {
    texts.push_back(mixed_text(k % 2));  // overlapping words across threads
    want.push_back(alone.encode(texts.back(), false));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (int r = 0; r < 3; ++r) {
        if (racing.encode(texts[k], false) != want[k]) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

#if defined(__GLIBC__)
size_t heap_bytes_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // arena chunks in use + mapped blocks
}
#endif

TEST(TokenizerThreads, LittleMemoryStaysWithEachThread) {
#if !defined(__GLIBC__) || defined(HYLLM_TEST_UNDER_ASAN)
  GTEST_SKIP() << "counts glibc's heap (the sanitizer's allocator keeps its own books)";
#else
  const Tokenizer tok = fresh_qwen3();
  const std::string text = mixed_text(0);
  // One long word grows the per-thread scratch buffers far past what they keep.
  const std::string long_word(256 << 10, 'x');
  const std::vector<int32_t> want = tok.encode(text, false);
  const size_t want_long = tok.encode(long_word, false).size();

  constexpr int kThreads = 8;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  bool release = false;
  std::atomic<int> mismatches{0};
  const size_t before = heap_bytes_in_use();
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&] {
      if (tok.encode(text, false) != want) ++mismatches;
      if (tok.encode(long_word, false).size() != want_long) ++mismatches;
      std::unique_lock lock(mu);
      ++done;
      cv.notify_all();
      // Stays alive, as a connection thread does, while the heap is counted.
      cv.wait(lock, [&] { return release; });
    });
  }
  size_t after = 0;
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == kThreads; });
    after = heap_bytes_in_use();
    release = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  const double per_thread = (static_cast<double>(after) - static_cast<double>(before)) / kThreads;
  EXPECT_LT(per_thread, 256.0 * 1024) << "bytes held per thread after encoding";
#endif
}

}  // namespace
}  // namespace hyllm
