// POST /v1/completions.

#include <fmt/format.h>

#include "serve/api_error.h"
#include "serve/completion_request.h"
#include "serve/handlers.h"
#include "serve/openai_json.h"
#include "serve/structured_request.h"
#include "util/log.h"

namespace hyllm::serve {

void check_token_ids(const std::vector<int32_t>& ids, int32_t vocab_size, const char* param) {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) throw bad_request(fmt::format("Token id {} is out of vocabulary", id), param);
  }
}

void log_request(const ServingContext& ctx, const std::string& id, size_t prompt_tokens, const SamplingParams& p) {
  if (!ctx.log_requests) return;
  log::info("Received request {}: prompt tokens: {}, params: n={}, temperature={}, top_p={}, top_k={}, min_p={}, "
            "presence_penalty={}, frequency_penalty={}, repetition_penalty={}, seed={}, max_tokens={}, "
            "min_tokens={}, ignore_eos={}, stop={}, stop_token_ids={}, logprobs={}",
            id, prompt_tokens, p.n, p.temperature, p.top_p, p.top_k, p.min_p, p.presence_penalty,
            p.frequency_penalty, p.repetition_penalty, p.seed ? fmt::format("{}", *p.seed) : "None", p.max_tokens,
            p.min_tokens, p.ignore_eos, p.stop.size(), p.stop_token_ids.size(),
            p.logprobs ? fmt::format("{}", *p.logprobs) : "None");
}

void handle_completions(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                        httplib::Response& res) {
  auto guard = activity.enter();
  CompletionRequest req = parse_completion_request(parse_request_json(body));
  ctx.check_model(req.model);
  warn_ignored_fields(req.sampling);
  // Null with --skip-tokenizer-init: text in either direction is refused, and
  // the response carries token ids.
  const Tokenizer* tok = ctx.tokenizer.get();
  if (!tok && !req.sampling.stop.empty()) {
    throw bad_request("stop strings need the tokenizer, which `skip_tokenizer_init=True` leaves out; use "
                      "stop_token_ids",
                      "stop");
  }

  if (req.truncate_prompt_tokens) {
    int64_t& keep = *req.truncate_prompt_tokens;
    if (keep == -1) keep = ctx.max_model_len;
    if (keep > ctx.max_model_len) {
      throw bad_request(fmt::format("truncate_prompt_tokens value ({}) is greater than max_model_len ({}). Please, "
                                    "select a smaller truncation size.",
                                    keep, ctx.max_model_len),
                        "truncate_prompt_tokens");
    }
  }
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> echo;
  for (const PromptInput& p : req.prompts) {
    std::vector<int32_t> ids =
        p.text ? ctx.require_tokenizer("prompt").encode(*p.text, req.add_special_tokens) : p.token_ids;
    if (ids.empty()) throw bad_request("Prompt cannot be empty", "prompt");
    check_token_ids(ids, ctx.vocab_size(), "prompt");
    if (req.truncate_prompt_tokens && static_cast<int64_t>(ids.size()) > *req.truncate_prompt_tokens) {
      ids.erase(ids.begin(), ids.end() - *req.truncate_prompt_tokens);
    }
    if (req.echo) {
      const bool as_sent = p.text && !req.truncate_prompt_tokens;
      echo.push_back(as_sent ? *p.text : ctx.require_tokenizer("echo").decode(ids, false));
    }
    prompt_ids.push_back(std::move(ids));
  }

  const std::string id = make_request_id("cmpl-");
  GenerationOptions gen_options{req.sampling.skip_special_tokens, req.sampling.include_stop_str_in_output,
                                req.sampling.cache_salt};
  auto generation = std::make_unique<Generation>(*ctx.engine, tok, id, req.sampling.n, req.sampling.stop,
                                                 gen_options);
  const ChoiceLimits limits{req.structured, req.sampling.allowed_token_ids,
                            bad_words_token_ids(tok, req.sampling.bad_words, ctx.model_vocab_size)};
  for (const auto& ids : prompt_ids) {
    SamplingParams params = resolve_sampling_params(req.sampling, ctx.sampling_defaults,
                                                    static_cast<int64_t>(ids.size()), ctx.max_model_len,
                                                    ctx.vocab_size());
    // Each prompt's n choices get constraints of their own (from one compiled grammar).
    structured::ConstraintOptions copts;
    copts.jump_forward = !params.logprobs.has_value();
    auto constraints = choice_constraints(ctx.grammar_compiler.get(), limits, ctx.model_vocab_size, params.n, copts);
    log_request(ctx, id, ids.size(), params);
    generation->add_prompt(ids, std::move(params), std::move(constraints));
  }

  ResponseOptions options = response_options(id, ctx.model_name(), req.sampling);
  options.return_token_ids |= tok == nullptr;  // without a tokenizer, ids are the only output
  auto formatter = make_completion_formatter(std::move(options), tok, std::move(echo), std::move(prompt_ids),
                                             req.sampling.n, req.echo_only);
  if (req.sampling.stream) {
    respond_stream(res, std::move(generation), std::move(formatter), std::move(guard));
  } else {
    respond_whole(res, *generation, *formatter);
  }
}

}  // namespace hyllm::serve
