#include "serve/completion_request.h"

#include <fmt/format.h>

#include <limits>

#include "serve/api_error.h"
#include "serve/limits.h"
#include "serve/structured_request.h"

namespace hyllm::serve {
namespace {

constexpr const char* kEmptyPrompt = "Prompt cannot be empty";

std::vector<int32_t> token_list(const Json& list) {
  if (list.empty()) throw bad_request(kEmptyPrompt, "prompt");
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const auto& item : list) {
    auto id = json_integer(item);
    if (!id) throw bad_request("`prompt` token lists must hold integers", "prompt");
    if (*id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      throw bad_request(fmt::format("Token id {} is out of vocabulary", *id), "prompt");
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

PromptInput text_prompt(const Json& v) {
  std::string text = v.get<std::string>();
  if (text.empty()) throw bad_request(kEmptyPrompt, "prompt");
  return PromptInput{std::move(text), {}};
}

}  // namespace

std::vector<PromptInput> parse_prompt_field(const Json& prompt, size_t max_prompts) {
  std::vector<PromptInput> out;
  if (prompt.is_string()) {
    out.push_back(text_prompt(prompt));
    return out;
  }
  if (!prompt.is_array()) {
    throw bad_request("`prompt` must be a string, a list of strings, or a list of token ids", "prompt");
  }
  if (prompt.empty()) throw bad_request(kEmptyPrompt, "prompt");
  const auto& first = prompt.front();
  if (first.is_number()) {
    out.push_back(PromptInput{std::nullopt, token_list(prompt)});
    return out;
  }
  if (prompt.size() > max_prompts) {
    throw bad_request(fmt::format("At most {} prompts are allowed in one request", max_prompts), "prompt");
  }
  for (const auto& item : prompt) {
    if (first.is_string() && item.is_string()) {
      out.push_back(text_prompt(item));
    } else if (first.is_array() && item.is_array()) {
      out.push_back(PromptInput{std::nullopt, token_list(item)});
    } else {
      throw bad_request("`prompt` must be a string, a list of strings, or a list of token ids", "prompt");
    }
  }
  return out;
}

CompletionRequest parse_completion_request(const Json& body) {
  FieldReader r(body);
  CompletionRequest req;
  req.model = r.string("model");
  const auto* prompt = r.get("prompt");
  if (!prompt) {
    if (r.has("prompt_embeds")) throw bad_request("prompt_embeds is not supported", "prompt_embeds");
    throw bad_request("Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
  }
  req.prompts = parse_prompt_field(*prompt, kMaxPromptsPerRequest);
  req.sampling = parse_sampling_request(r);
  if (req.prompts.size() * static_cast<size_t>(req.sampling.n) > kMaxChoicesPerRequest) {
    throw bad_request(fmt::format("prompts x n is limited to {} choices per request", kMaxChoicesPerRequest), "n");
  }
  req.echo = r.boolean("echo").value_or(false);
  req.add_special_tokens = r.boolean("add_special_tokens").value_or(true);
  if (auto lp = r.integer("logprobs")) req.sampling.logprobs = validate_logprobs_count(*lp, "logprobs");
  // The echoed prompt's tokens carry logprobs too (vLLM): the engine scores the prompt.
  if (req.echo && req.sampling.logprobs && !req.sampling.prompt_logprobs) {
    req.sampling.prompt_logprobs = req.sampling.logprobs;
  }
  // The legacy completions API defaults to 16 tokens; an explicit null means
  // "up to the context length", as in vLLM.
  auto max_tokens = body.contains("max_tokens") ? r.integer("max_tokens") : std::optional<int64_t>(16);
  if (req.echo && max_tokens == 0) {
    req.echo_only = true;
    max_tokens = 1;
  }
  validate_max_tokens(req.sampling, max_tokens, "max_tokens");
  if (auto t = r.integer("truncate_prompt_tokens")) {
    // -1: keep the last max_model_len tokens (vLLM); the handler checks the
    // count against max_model_len.
    if (*t < 1 && *t != -1) {
      throw bad_request("truncate_prompt_tokens must be -1 or at least 1", "truncate_prompt_tokens");
    }
    req.truncate_prompt_tokens = *t;
  }
  req.structured = parse_structured_output(r);
  req.sampling.ignored_fields = r.unread();
  return req;
}

}  // namespace hyllm::serve
