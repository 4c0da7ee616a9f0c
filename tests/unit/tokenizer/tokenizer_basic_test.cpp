#include <gtest/gtest.h>

#include <chrono>

#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_fixture.h"
#include "util/status.h"

namespace hyllm {
namespace {

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::from_model_dir(testing::npm_tokenizer_dir("tokenizer-qwen3"));
  return t;
}

TEST(Tokenizer, Qwen3LoadsWithItsSpecialTokens) {
  const Tokenizer& t = qwen3();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_TRUE(t.is_special(151644));
  EXPECT_FALSE(t.is_special(151657));  // <tool_call> is added but not special
  EXPECT_TRUE(t.is_added(151657));
  EXPECT_EQ(t.eos_token(), std::optional<std::string>("<|im_end|>"));
  EXPECT_EQ(t.eos_token_id(), 151645);
  ASSERT_NE(t.chat_template_source(), nullptr);
  EXPECT_NE(t.chat_template_source()->find("im_start"), std::string::npos);
}

TEST(Tokenizer, EncodesAndDecodesRoundTrip) {
  const Tokenizer& t = qwen3();
  const std::string text = "Hello world! The capital of France is Paris, and the 12345 你好 🙂";
  const auto ids = t.encode(text);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(t.decode(ids), text);
}

TEST(Tokenizer, SpecialTokenTextIsControlUnlessSplit) {
  const Tokenizer& t = qwen3();
  const auto ids = t.encode("a<|im_start|>b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 151644);
  const auto split = t.encode("a<|im_start|>b", true, true);
  EXPECT_GT(split.size(), 3u);
  for (int32_t id : split) EXPECT_NE(id, 151644);
  EXPECT_EQ(t.decode(split), "a<|im_start|>b");
}

TEST(Tokenizer, InvalidUtf8IsRejected) {
  try {
    (void)qwen3().encode("abc\xff");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(Tokenizer, LoadsFast) {
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer t = Tokenizer::from_model_dir(testing::npm_tokenizer_dir("tokenizer-qwen3"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(t.vocab_size(), 0);
  std::printf("qwen3 tokenizer load: %.3f s\n", s);
}

}  // namespace
}  // namespace hyllm
