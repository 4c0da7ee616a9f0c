#include "engine/allowed_tokens_constraint.h"

#include <algorithm>

#include "util/status.h"

namespace hyllm {

std::vector<uint32_t> token_set_mask(std::span<const int32_t> ids, int vocab_size) {
  std::vector<uint32_t> mask(static_cast<size_t>(bitmask_words(vocab_size)), 0u);
  auto allow = [&](int32_t t) { mask[static_cast<size_t>(t) >> 5] |= 1u << (static_cast<uint32_t>(t) & 31u); };
  if (ids.empty()) {
    for (int32_t t = 0; t < vocab_size; ++t) allow(t);
    return mask;
  }
  for (int32_t t : ids) {
    HYLLM_CHECK(t >= 0 && t < vocab_size, "allowed token id {} is out of vocabulary ({})", t, vocab_size);
    allow(t);
  }
  return mask;
}

AllowedTokensConstraint::AllowedTokensConstraint(std::span<const int32_t> ids, int vocab_size)
    : mask_(token_set_mask(ids, vocab_size)) {
  HYLLM_CHECK(!ids.empty(), "allowed_token_ids is empty");
}

bool AllowedTokensConstraint::fill_next_token_bitmask(std::span<uint32_t> bitmask) {
  HYLLM_CHECK(bitmask.size() >= mask_.size(), "token bitmask of {} words for {}", bitmask.size(), mask_.size());
  std::copy(mask_.begin(), mask_.end(), bitmask.begin());
  return true;
}

bool AllowedTokensConstraint::accept_token(int32_t token) {
  return token >= 0 && static_cast<size_t>(token >> 5) < mask_.size() && bitmask_allows(mask_, token);
}

std::vector<std::shared_ptr<TokenConstraint>> make_allowed_tokens_constraints(std::span<const int32_t> ids,
                                                                              int vocab_size, int n) {
  std::vector<std::shared_ptr<TokenConstraint>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_shared<AllowedTokensConstraint>(ids, vocab_size));
  return out;
}

}  // namespace hyllm
