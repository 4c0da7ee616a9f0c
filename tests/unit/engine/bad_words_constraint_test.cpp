// bad_words as a constraint: a one-token word is masked every step; a longer
// word's last token only right after the rest of it; within
// allowed_token_ids' mask when given; a banned token is not accepted.

#include "engine/bad_words_constraint.h"

#include <gtest/gtest.h>

#include <vector>

#include "util/status.h"

namespace hyllm {
namespace {

constexpr int kVocab = 70;

std::vector<uint32_t> fill(TokenConstraint& c) {
  std::vector<uint32_t> mask(static_cast<size_t>(bitmask_words(kVocab)), 0u);
  EXPECT_TRUE(c.fill_next_token_bitmask(mask));
  return mask;
}

TEST(BadWordsConstraint, MasksAWordsLastTokenRightAfterTheRestOfIt) {
  const std::vector<std::vector<int32_t>> words{{5}, {10, 11, 40}, {63, 64}};
  auto constraints = make_bad_words_constraints(words, {}, kVocab, 2);
  ASSERT_EQ(constraints.size(), 2u);
  TokenConstraint& c = *constraints[0];
  auto allowed_except = [&](std::vector<int32_t> banned) {
    const std::vector<uint32_t> mask = fill(c);
    for (int32_t t = 0; t < kVocab; ++t) {
      const bool want = std::find(banned.begin(), banned.end(), t) == banned.end();
      EXPECT_EQ(bitmask_allows(mask, t), want) << "token " << t;
    }
  };
  allowed_except({5});
  EXPECT_TRUE(c.accept_token(10));
  allowed_except({5});  // 10 alone is not 10 11
  EXPECT_TRUE(c.accept_token(11));
  allowed_except({5, 40});
  EXPECT_FALSE(c.accept_token(40)) << "the banned completion is refused";
  allowed_except({5});
  EXPECT_TRUE(c.accept_token(63));
  allowed_except({5, 64});  // across a bitmask word boundary
  EXPECT_TRUE(c.accept_token(7));
  allowed_except({5});
  EXPECT_FALSE(c.accept_token(5));
  // The other choice has its own output.
  std::vector<uint32_t> other = fill(*constraints[1]);
  EXPECT_TRUE(bitmask_allows(other, 40) && bitmask_allows(other, 64) && !bitmask_allows(other, 5));
}

TEST(BadWordsConstraint, StaysWithinAllowedTokenIds) {
  const std::vector<int32_t> allowed{1, 2, 3};
  auto c = make_bad_words_constraints({{2}, {1, 3}}, allowed, kVocab, 1).front();
  std::vector<uint32_t> mask = fill(*c);
  for (int32_t t = 0; t < kVocab; ++t) EXPECT_EQ(bitmask_allows(mask, t), t == 1 || t == 3) << t;
  EXPECT_FALSE(c->accept_token(9)) << "outside allowed_token_ids";
  EXPECT_TRUE(c->accept_token(1));
  mask = fill(*c);
  for (int32_t t = 0; t < kVocab; ++t) EXPECT_EQ(bitmask_allows(mask, t), t == 1) << t;
  EXPECT_THROW(BadWordsConstraint({{}}, std::vector<uint32_t>(3, ~0u)), Error);
}

}  // namespace
}  // namespace hyllm
