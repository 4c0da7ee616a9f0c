#pragma once
// Structured output, per request: the engine's TokenConstraint over one
// compiled grammar (grammar_compiler.h). It fills the allowed-token bitmask
// each step, advances with each appended token, and offers the text the
// grammar forces as tokens (jump-forward).
//
// Reasoning models think before they answer: with a reasoning end token the
// constraint stays inactive (every token allowed) until that token appears,
// and the grammar then governs what follows, as vLLM does with a reasoning
// parser.

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/token_constraint.h"
#include "structured/grammar_compiler.h"

namespace hyllm::structured {

struct ConstraintOptions {
  // The token that ends a reasoning block (e.g. </think>); unset: the
  // grammar governs the whole output.
  std::optional<int32_t> reasoning_end_token;
  // The output begins inside the reasoning block (the prompt opened it).
  bool starts_in_reasoning = false;
  // Otherwise the output may still open a reasoning block with this token
  // as its first token; the grammar's tokens are allowed first as well.
  std::optional<int32_t> reasoning_start_token;
  // Offer forced text as tokens. The last token of a forced piece is left
  // to sampling, so that the model chooses how to cross into free text.
  bool jump_forward = true;
};

std::unique_ptr<TokenConstraint> make_grammar_constraint(std::shared_ptr<const CompiledGrammar> grammar,
                                                         const ConstraintOptions& options);

}  // namespace hyllm::structured
