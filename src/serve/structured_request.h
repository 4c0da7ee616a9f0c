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

namespace hyllm::serve {

// What the request asks to constrain, or nullopt. Throws ApiError 400 for
// malformed fields, or for more than one constraint.
std::optional<structured::GrammarSpec> parse_structured_output(const FieldReader& r);

// Compiles (400 on a grammar the compiler refuses) and makes n constraints.
std::vector<std::shared_ptr<TokenConstraint>> make_constraints(const structured::GrammarCompiler& compiler,
                                                               const structured::GrammarSpec& spec, int n,
                                                               const structured::ConstraintOptions& options);

// The constraints of one prompt's n choices: the grammar's when there is one
// (a 400 when the server has no compiler), else allowed_token_ids' fixed mask
// over the model's vocabulary, else none. Both at once are a 400.
std::vector<std::shared_ptr<TokenConstraint>> choice_constraints(const structured::GrammarCompiler* compiler,
                                                                 const std::optional<structured::GrammarSpec>& grammar,
                                                                 std::span<const int32_t> allowed_token_ids,
                                                                 int model_vocab_size, int n,
                                                                 const structured::ConstraintOptions& options);

}  // namespace hyllm::serve
