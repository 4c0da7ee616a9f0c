#pragma once
// POST /v1/completions: the request as parsed and validated, before the
// prompt is tokenized.

#include "serve/json.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serve/sampling_request.h"
#include "structured/grammar_compiler.h"

namespace hyllm::serve {

// One prompt: text to tokenize, or token ids given by the client.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> token_ids;
};

struct CompletionRequest {
  std::optional<std::string> model;
  std::vector<PromptInput> prompts;  // a batch; choices are numbered prompt * n + i
  bool echo = false;
  // echo with max_tokens 0 (vLLM): the response holds the prompt alone, with
  // its logprobs when asked; the engine still computes one token, unshown.
  bool echo_only = false;
  bool add_special_tokens = true;
  std::optional<int64_t> truncate_prompt_tokens;  // keep only the last k prompt tokens (-1: max_model_len)
  std::optional<structured::GrammarSpec> structured;  // response_format / structured_outputs
  SamplingRequest sampling;
};

CompletionRequest parse_completion_request(const Json& body);

// The prompt field in any of its four forms: "text", ["a", "b"], [1, 2, 3],
// [[1, 2], [3]]. Empty prompts are refused.
std::vector<PromptInput> parse_prompt_field(const Json& prompt, size_t max_prompts);

}  // namespace hyllm::serve
