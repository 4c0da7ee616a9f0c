#include <gtest/gtest.h>

#include "text/detokenizer.h"
#include "tokenizer_fixture.h"

namespace hyllm {
namespace {

const Tokenizer& qwen3() { return testing::test_tokenizer("qwen3"); }

TEST(IncrementalDetokenizer, HoldsBackIncompleteUtf8) {
  const Tokenizer& t = qwen3();
  // U+1F642 is four bytes; byte-level tokens of single bytes split it.
  const std::string emoji = "\xF0\x9F\x99\x82";
  std::vector<int32_t> byte_ids;
  for (unsigned char b : emoji) {
    bool found = false;
    for (int32_t id = 0; id < 512 && !found; ++id) {
      if (t.token_bytes(id) == std::string(1, static_cast<char>(b))) {
        byte_ids.push_back(id);
        found = true;
      }
    }
    ASSERT_TRUE(found);
  }
  IncrementalDetokenizer d(t);
  EXPECT_EQ(d.push(byte_ids[0]), "");
  EXPECT_EQ(d.push(byte_ids[1]), "");
  EXPECT_EQ(d.push(byte_ids[2]), "");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.push(byte_ids[3]), emoji);
  EXPECT_EQ(d.finish(), "");
  // Cut short: finish() gives what a full decode gives (U+FFFD).
  IncrementalDetokenizer cut(t);
  EXPECT_EQ(cut.push(std::span<const int32_t>(byte_ids).first(2)), "");
  const std::string tail = cut.finish();
  EXPECT_EQ(tail, t.decode(std::span<const int32_t>(byte_ids).first(2)));
  EXPECT_EQ(tail, "\xEF\xBF\xBD");
  // An invalid byte is replaced at once, not held.
  IncrementalDetokenizer bad(t);
  EXPECT_EQ(bad.push(byte_ids[1]), "\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, SkipsSpecialTokens) {
  const Tokenizer& t = qwen3();
  const auto ids = t.encode("<|im_start|>user\nhi<|im_end|>");
  IncrementalDetokenizer keep(t, false), skip(t, true);
  std::string a, b;
  for (int32_t id : ids) {
    a += keep.push(id);
    b += skip.push(id);
  }
  EXPECT_EQ(a + keep.finish(), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(b + skip.finish(), "user\nhi");
}

TEST(StopStringMatcher, StopsAcrossDeltasAndExcludesTheStop) {
  StopStringMatcher m({"STOP", "\n\n"});
  auto s1 = m.push("Hello ST");
  EXPECT_EQ(s1.text, "Hello ");  // "ST" may begin "STOP": held back
  EXPECT_FALSE(s1.stopped);
  auto s2 = m.push("O");
  EXPECT_EQ(s2.text, "");
  auto s3 = m.push("P and more");
  EXPECT_TRUE(s3.stopped);
  EXPECT_EQ(s3.text, "");
  EXPECT_EQ(s3.stop_index, 0u);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("ignored").text, "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopStringMatcher, ReleasesHeldTextWhenItIsNotAStop) {
  StopStringMatcher m({"</answer>"});
  EXPECT_EQ(m.push("a </ans").text, "a ");
  EXPECT_EQ(m.push("wer").text, "");
  EXPECT_EQ(m.push("!").text, "</answer!");
  EXPECT_EQ(m.push("x<").text, "x");
  EXPECT_EQ(m.finish(), "<");
}

TEST(StopStringMatcher, EarliestStopWinsAndIncludeOption) {
  StopStringMatcher m({"world", "lo w"}, true);
  const auto s = m.push("hello world");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_index, 1u);
  EXPECT_EQ(s.text, "hello w");
}

TEST(StopStringMatcher, StopInsideOneDeltaAndUtf8) {
  StopStringMatcher m({"。"});
  const auto s = m.push("你好。再见");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "你好");
  StopStringMatcher none({});
  EXPECT_EQ(none.push("abc").text, "abc");
  StopStringMatcher empty({""});
  EXPECT_FALSE(empty.push("abc").stopped);
}

TEST(StopStringMatcher, WithDetokenizerAcrossTokens) {
  const Tokenizer& t = qwen3();
  const auto ids = t.encode("The answer is 42. Done. More text follows", false);
  IncrementalDetokenizer d(t);
  StopStringMatcher m({"Done."});
  std::string out;
  bool stopped = false;
  for (int32_t id : ids) {
    const auto step = m.push(d.push(id));
    out += step.text;
    if (step.stopped) {
      stopped = true;
      break;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "The answer is 42. ");
}

}  // namespace
}  // namespace hyllm
