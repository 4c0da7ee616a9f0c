#include "engine/bad_words_constraint.h"

#include <algorithm>

#include "engine/allowed_tokens_constraint.h"
#include "util/status.h"

namespace hyllm {

BadWordsConstraint::BadWordsConstraint(std::vector<std::vector<int32_t>> words, std::vector<uint32_t> allowed)
    : words_(std::move(words)), allowed_(std::move(allowed)) {
  for (const auto& w : words_) {
    HYLLM_CHECK(!w.empty(), "an empty bad word");
    for (int32_t t : w) {
      HYLLM_CHECK(t >= 0 && static_cast<size_t>(t) < allowed_.size() * 32, "bad word token id {} is out of range", t);
    }
  }
}

bool BadWordsConstraint::completes(const std::vector<int32_t>& word) const {
  const size_t prefix = word.size() - 1;
  return prefix <= output_.size() &&
         std::equal(word.begin(), word.end() - 1, output_.end() - static_cast<std::ptrdiff_t>(prefix));
}

void BadWordsConstraint::mask_banned(std::span<uint32_t> bitmask) const {
  for (const auto& w : words_) {
    if (!completes(w)) continue;
    const auto last = static_cast<uint32_t>(w.back());
    bitmask[last >> 5] &= ~(1u << (last & 31u));
  }
}

bool BadWordsConstraint::fill_next_token_bitmask(std::span<uint32_t> bitmask) {
  HYLLM_CHECK(bitmask.size() >= allowed_.size(), "token bitmask of {} words for {}", bitmask.size(), allowed_.size());
  std::copy(allowed_.begin(), allowed_.end(), bitmask.begin());
  mask_banned(bitmask);
  return true;
}

bool BadWordsConstraint::accept_token(int32_t token) {
  bool ok = token >= 0 && static_cast<size_t>(token >> 5) < allowed_.size() && bitmask_allows(allowed_, token);
  for (const auto& w : words_) ok = ok && !(w.back() == token && completes(w));
  output_.push_back(token);
  return ok;
}

std::vector<std::shared_ptr<TokenConstraint>> make_bad_words_constraints(
    const std::vector<std::vector<int32_t>>& words, std::span<const int32_t> allowed_token_ids, int vocab_size, int n) {
  const std::vector<uint32_t> allowed = token_set_mask(allowed_token_ids, vocab_size);
  std::vector<std::shared_ptr<TokenConstraint>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_shared<BadWordsConstraint>(words, allowed));
  return out;
}

}  // namespace hyllm
