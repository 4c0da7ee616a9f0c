#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "serve/choice_text.h"
#include "serve/response_format.h"
#include "util/status.h"

namespace hyllm::serve {
namespace {

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok =
      Tokenizer::from_model_dir(std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny");
  return tok;
}

// Pushes ids one at a time, as the engine reports them.
std::string push_each(ChoiceText& text, const std::vector<int32_t>& ids, std::optional<std::string>* matched) {
  std::string out;
  for (int32_t id : ids) {
    auto piece = text.push(std::span<const int32_t>(&id, 1));
    out += piece.text;
    if (piece.matched_stop && matched) *matched = piece.matched_stop;
  }
  return out;
}

TEST(ChoiceText, StreamsTheSameTextAsOneDecode) {
  const auto& tok = tiny_tokenizer();
  const std::string text = "The list.sort() method sorts the list in place. ünïcödé ✓";
  auto ids = tok.encode(text, false);
  ChoiceText choice(&tok, true, {}, false);
  std::string out = push_each(choice, ids, nullptr);
  out += choice.finish();
  EXPECT_EQ(out, tok.decode(ids, true));
}

TEST(ChoiceText, StopsBeforeAStopStringSpanningTokens) {
  const auto& tok = tiny_tokenizer();
  auto ids = tok.encode("The value of the list is sorted in place.", false);
  ChoiceText choice(&tok, true, {"sorted in"}, false);
  std::optional<std::string> matched;
  std::string out = push_each(choice, ids, &matched);
  ASSERT_TRUE(matched);
  EXPECT_EQ(*matched, "sorted in");
  EXPECT_EQ(out, "The value of the list is ");
  EXPECT_EQ(choice.finish(), "");
}

TEST(ChoiceText, IncludesTheStopWhenAsked) {
  const auto& tok = tiny_tokenizer();
  auto ids = tok.encode("a function returns None", false);
  ChoiceText choice(&tok, true, {"returns"}, true);
  std::optional<std::string> matched;
  std::string out = push_each(choice, ids, &matched);
  ASSERT_TRUE(matched);
  EXPECT_EQ(out, "a function returns");
}

TEST(ChoiceText, ReleasesHeldBackTextAtTheEnd) {
  const auto& tok = tiny_tokenizer();
  auto ids = tok.encode("print(x)", false);
  // "x)zzz" could still begin after "x)": the tail waits, then comes out at finish.
  ChoiceText choice(&tok, true, {")zzz"}, false);
  std::optional<std::string> matched;
  std::string out = push_each(choice, ids, &matched);
  EXPECT_FALSE(matched);
  out += choice.finish();
  EXPECT_EQ(out, "print(x)");
}

TEST(ChoiceText, IgnoresStopsWithinMinTokens) {
  const auto& tok = tiny_tokenizer();
  auto ids = tok.encode("stop here", false);
  ChoiceText choice(&tok, true, {"stop"}, false);
  std::string out;
  for (int32_t id : ids) out += choice.push(std::span<const int32_t>(&id, 1), /*may_stop=*/false).text;
  out += choice.finish();
  EXPECT_EQ(out, "stop here");
}

TEST(ChoiceText, WithoutATokenizerNothingIsDetokenized) {
  // --skip-tokenizer-init: the ids go to the client as they are.
  ChoiceText choice(nullptr, true, {}, false);
  const int32_t ids[] = {5, 17, 4000};
  auto piece = choice.push(ids);
  EXPECT_EQ(piece.text, "");
  EXPECT_FALSE(piece.matched_stop);
  EXPECT_EQ(choice.finish(), "");
  EXPECT_THROW(ChoiceText(nullptr, true, {"stop"}, false), Error);
}

TEST(TokenizerText, WithoutATokenizerTokensAreSpelledAsIds) {
  TokenizerText none(nullptr);
  EXPECT_EQ(none.text(42), "token_id:42");
  EXPECT_EQ(none.bytes(42), "token_id:42");
  const auto& tok = tiny_tokenizer();
  TokenizerText with(&tok);
  const int32_t id = tok.encode("list", false).at(0);
  EXPECT_EQ(with.text(id), tok.decode(std::span<const int32_t>(&id, 1), false));
  // return_tokens_as_token_ids: ids even with a tokenizer; the bytes stay the token's.
  TokenizerText ids(&tok, true);
  EXPECT_EQ(ids.text(id), fmt::format("token_id:{}", id));
  EXPECT_EQ(ids.bytes(id), tok.token_bytes(id));
}

TEST(RequestText, IsTheEnginesStopHook) {
  const auto& tok = tiny_tokenizer();
  RequestText text(&tok, 2, true, {"END"}, false);
  auto ids = tok.encode("abc END def", false);
  std::string out[2];
  bool stopped[2] = {false, false};
  for (int c = 0; c < 2; ++c) {
    for (int32_t id : ids) {
      if (stopped[c]) break;
      auto check = text.on_tokens(c, std::span<const int32_t>(&id, 1), true);
      out[c] += check.text;
      stopped[c] = check.matched_stop.has_value();
    }
  }
  EXPECT_TRUE(stopped[0] && stopped[1]);
  EXPECT_EQ(out[0], "abc ");
  EXPECT_EQ(out[1], "abc ");
}

}  // namespace
}  // namespace hyllm::serve
