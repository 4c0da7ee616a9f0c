#pragma once
// vLLM's bad_words: each banned word is a token sequence (the server
// tokenizes it, with and without a leading space). Its last token is masked
// whenever the choice's output so far ends with the rest of it; a one-token
// word is masked always. Only the choice's own output counts, not the
// prompt. A TokenConstraint, so that both samplers apply it as they apply
// structured output; within allowed_token_ids' mask when both are given.

#include <memory>
#include <span>
#include <vector>

#include "engine/token_constraint.h"

namespace hyllm {

class BadWordsConstraint final : public TokenConstraint {
 public:
  // words: non-empty sequences of ids in [0, vocab_size) (the caller
  // validates); allowed: token_set_mask() of allowed_token_ids, or of none.
  BadWordsConstraint(std::vector<std::vector<int32_t>> words, std::vector<uint32_t> allowed);

  bool fill_next_token_bitmask(std::span<uint32_t> bitmask) override;
  bool accept_token(int32_t token) override;
  std::vector<int32_t> forced_tokens(int) override { return {}; }

 private:
  // Whether the output ends with all of `word` but its last token.
  bool completes(const std::vector<int32_t>& word) const;
  // Clears the bit of every word's last token that the output completes.
  void mask_banned(std::span<uint32_t> bitmask) const;

  std::vector<std::vector<int32_t>> words_;
  std::vector<uint32_t> allowed_;
  std::vector<int32_t> output_;
};

// One constraint per choice.
std::vector<std::shared_ptr<TokenConstraint>> make_bad_words_constraints(
    const std::vector<std::vector<int32_t>>& words, std::span<const int32_t> allowed_token_ids, int vocab_size, int n);

}  // namespace hyllm
