// allowed_token_ids as a constraint: the same mask every step, holding
// exactly the given ids (across bitmask words), accepting exactly them.

#include "engine/allowed_tokens_constraint.h"

#include <gtest/gtest.h>

#include <vector>

#include "util/status.h"

namespace hyllm {
namespace {

TEST(AllowedTokensConstraint, MasksExactlyTheGivenIdsEveryStep) {
  const int vocab = 100;
  const std::vector<int32_t> ids{0, 31, 32, 99, 31};
  auto constraints = make_allowed_tokens_constraints(ids, vocab, 2);
  ASSERT_EQ(constraints.size(), 2u);
  EXPECT_NE(constraints[0].get(), constraints[1].get());  // one per choice
  for (int step = 0; step < 2; ++step) {
    std::vector<uint32_t> mask(static_cast<size_t>(bitmask_words(vocab)), 0xffffffffu);
    ASSERT_TRUE(constraints[0]->fill_next_token_bitmask(mask));
    for (int32_t t = 0; t < vocab; ++t) {
      const bool want = t == 0 || t == 31 || t == 32 || t == 99;
      EXPECT_EQ(bitmask_allows(mask, t), want) << "token " << t;
    }
    EXPECT_TRUE(constraints[0]->accept_token(32));
    EXPECT_FALSE(constraints[0]->accept_token(33));
    EXPECT_FALSE(constraints[0]->accept_token(-1));
    EXPECT_FALSE(constraints[0]->accept_token(100000));
    EXPECT_TRUE(constraints[0]->forced_tokens(4).empty());
  }
  EXPECT_THROW(AllowedTokensConstraint({}, vocab), Error);
  const std::vector<int32_t> outside{100};
  EXPECT_THROW(AllowedTokensConstraint(outside, vocab), Error);
}

}  // namespace
}  // namespace hyllm
