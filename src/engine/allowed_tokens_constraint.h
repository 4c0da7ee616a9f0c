#pragma once
// vLLM's allowed_token_ids: each step of a choice may sample only these
// tokens. A TokenConstraint with the same mask every step, so that both
// samplers (host and device) apply it as they apply structured output.

#include <memory>
#include <span>
#include <vector>

#include "engine/token_constraint.h"

namespace hyllm {

class AllowedTokensConstraint final : public TokenConstraint {
 public:
  // ids: each in [0, vocab_size) (the caller validates); at least one.
  AllowedTokensConstraint(std::span<const int32_t> ids, int vocab_size);

  bool fill_next_token_bitmask(std::span<uint32_t> bitmask) override;
  bool accept_token(int32_t token) override;
  std::vector<int32_t> forced_tokens(int) override { return {}; }

 private:
  std::vector<uint32_t> mask_;
};

// The bitmask allowing exactly `ids` (each in [0, vocab_size); at least one),
// or every token of the vocabulary when `ids` is empty.
std::vector<uint32_t> token_set_mask(std::span<const int32_t> ids, int vocab_size);

// One constraint per choice.
std::vector<std::shared_ptr<TokenConstraint>> make_allowed_tokens_constraints(std::span<const int32_t> ids,
                                                                              int vocab_size, int n);

}  // namespace hyllm
