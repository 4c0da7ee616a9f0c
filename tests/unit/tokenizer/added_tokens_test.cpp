// Added-token flags on the "flags" test tokenizer (variants.json), with the
// expected splits worked out from HF's AddedVocabulary::find_matches: each
// split is encoded on its own, so expectations are concatenations of the
// encodings of the plain pieces and the token ids.

#include <gtest/gtest.h>

#include "tokenizer_fixture.h"

namespace hyllm {
namespace {

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class FlagsTokenizer : public ::testing::Test {
 protected:
  const Tokenizer& t = testing::test_tokenizer("flags");
  std::vector<int32_t> enc(const std::string& s) const { return t.encode(s, false); }
  int32_t id(const std::string& s) const { return t.token_to_id(s).value(); }
};

TEST_F(FlagsTokenizer, IdsFollowTheModelVocabulary) {
  EXPECT_EQ(id("<mask>"), 50257);
  EXPECT_EQ(id("[SEP]"), 50258);
  // Contents already in the vocabulary keep their ids; new ones take the
  // next free id (as HF assigns them, whatever the file's "id" says).
  EXPECT_EQ(id("ab"), 397);
  EXPECT_EQ(id("Hello"), 15496);
  EXPECT_EQ(id("WORLD"), 50259);
  EXPECT_EQ(id("<mask>x"), 50262);
  EXPECT_EQ(t.vocab_size(), 50263);
}

TEST_F(FlagsTokenizer, LstripTakesTheSpacesBefore) {
  EXPECT_EQ(enc("a <mask> b"), cat({enc("a"), {id("<mask>")}, enc(" b")}));
  EXPECT_EQ(enc("a \t <mask>"), cat({enc("a"), {id("<mask>")}}));
}

TEST_F(FlagsTokenizer, RstripTakesTheSpacesAfter) {
  EXPECT_EQ(enc("x [SEP]  y"), cat({enc("x "), {id("[SEP]")}, enc("y")}));
  EXPECT_EQ(enc("p  <both>  q"), cat({enc("p"), {id("<both>")}, enc("q")}));
}

TEST_F(FlagsTokenizer, LstripStopsAtThePreviousMatch) {
  EXPECT_EQ(enc("[SEP] <mask>"), cat({{id("[SEP]")}, {id("<mask>")}}));
}

TEST_F(FlagsTokenizer, SingleWordNeedsWordBoundaries) {
  EXPECT_EQ(enc("ab cab ab."), cat({{397}, enc(" cab "), {397}, enc(".")}));
  EXPECT_EQ(enc("abc"), enc("abc"));
}

TEST_F(FlagsTokenizer, NormalizedTokensMatchTheNormalizedText) {
  // "Hello" and "WORLD" are matched after NFKC + lowercase.
  EXPECT_EQ(enc("Hello WORLD world"), cat({{id("Hello")}, enc(" "), {id("WORLD")}, enc(" "), {id("WORLD")}}));
  EXPECT_EQ(t.id_to_token(id("WORLD")), "world");  // decode uses the normalized form
}

TEST_F(FlagsTokenizer, LongestMatchWinsAndTemplateApplies) {
  EXPECT_EQ(enc("<mask>xy"), cat({{id("<mask>x")}, enc("y")}));
  EXPECT_EQ(t.encode("q", true), cat({{50256}, enc("q"), {id("[SEP]")}}));
}

}  // namespace
}  // namespace hyllm
