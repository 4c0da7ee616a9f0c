#pragma once
// The structured-output fields of a request, validated: response_format
// (json_object, json_schema, structural_tag) and vLLM's structured_outputs
// (json, regex, choice, grammar, json_object, structural_tag), and the
// grammar that tool_choice "required" or a named tool forces. Compiled in
// the request's thread, so a bad grammar is a 400 before anything queues.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/token_constraint.h"
#include "serve/json.h"
#include "serve/json_fields.h"
#include "structured/grammar_compiler.h"
#include "structured/grammar_constraint.h"
#include "text/tokenizer.h"

namespace hyllm::serve {

// What the request asks to constrain, or nullopt. Throws ApiError 400 for
// malformed fields, or for more than one constraint.
std::optional<structured::GrammarSpec> parse_structured_output(const FieldReader& r);

// Compiles (400 on a grammar the compiler refuses) and makes n constraints.
std::vector<std::shared_ptr<TokenConstraint>> make_constraints(const structured::GrammarCompiler& compiler,
                                                               const structured::GrammarSpec& spec, int n,
                                                               const structured::ConstraintOptions& options);

// vLLM's tokenization of bad_words: each word (leading whitespace removed)
// as it is, and with a leading space when that gives a different first token
// and as many tokens (a word inside text); no special tokens. A 400 without
// a tokenizer, or for ids outside the model's vocabulary.
std::vector<std::vector<int32_t>> bad_words_token_ids(const Tokenizer* tokenizer, const std::vector<std::string>& words,
                                                      int model_vocab_size);

// The token filters and grammar of one prompt's choices.
struct ChoiceLimits {
  std::optional<structured::GrammarSpec> grammar;
  std::span<const int32_t> allowed_token_ids;
  std::vector<std::vector<int32_t>> bad_words;  // bad_words_token_ids()
};

// The constraints of one prompt's n choices: the grammar's when there is one
// (a 400 when the server has no compiler), else bad words within
// allowed_token_ids, else allowed_token_ids' fixed mask over the model's
// vocabulary, else none. A grammar with either filter is a 400.
std::vector<std::shared_ptr<TokenConstraint>> choice_constraints(const structured::GrammarCompiler* compiler,
                                                                 const ChoiceLimits& limits, int model_vocab_size,
                                                                 int n, const structured::ConstraintOptions& options);

}  // namespace hyllm::serve
