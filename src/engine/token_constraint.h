#pragma once
// A per-choice constraint on the tokens a sequence may produce next
// (structured output: JSON schemas, regexes, grammars, forced tool calls).
// The engine knows nothing of grammars: it asks for a bitmask of allowed
// tokens before sampling, and reports each token appended to the choice.
//
// Bitmask layout (xgrammar's, also what the samplers read): uint32 words,
// token t is allowed when bit (t % 32) of word (t / 32) is set; words cover
// the model's vocabulary, ceil(vocab / 32) of them.
//
// Threading: the calls for one constraint never overlap and come in step
// order: fill_next_token_bitmask() for a step's sampled row (while the
// forward runs), then accept_token() for the token sampled there, then
// forced_tokens(). They may come from the engine's worker pool, which runs
// different choices' constraints at the same time: an implementation shares
// nothing mutable between constraints. A constraint belongs to exactly one choice.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace hyllm {

inline constexpr int bitmask_words(int vocab_size) { return (vocab_size + 31) / 32; }
inline bool bitmask_allows(std::span<const uint32_t> mask, int32_t token) {
  return (mask[static_cast<size_t>(token) >> 5] >> (static_cast<uint32_t>(token) & 31u)) & 1u;
}

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Writes the allowed tokens for the next sample into `bitmask`
  // (bitmask_words(vocab) words). Returns false when the next token is not
  // constrained (for example while the model is still reasoning); the
  // bitmask is then left as it was and must not be applied.
  virtual bool fill_next_token_bitmask(std::span<uint32_t> bitmask) = 0;
  // A token was appended to the choice. False when the constraint cannot
  // accept it; the engine then fails the request rather than emit text the
  // client was promised would not appear.
  virtual bool accept_token(int32_t token) = 0;
  // Tokens the constraint alone determines after what it accepted
  // (jump-forward): the engine appends them without sampling. At most
  // `max_tokens`; they are already accepted. Empty when nothing is forced.
  virtual std::vector<int32_t> forced_tokens(int max_tokens) = 0;
};

}  // namespace hyllm
