// POST /v1/chat/completions.

#include "serve/api_error.h"
#include "serve/chat_prompt.h"
#include "serve/chat_request.h"
#include "serve/handlers.h"
#include "serve/openai_json.h"

namespace hyllm::serve {

void handle_chat_completions(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                             httplib::Response& res) {
  auto guard = activity.enter();
  ChatRequest req = parse_chat_request(parse_request_json(body));
  ctx.check_model(req.model);
  const Tokenizer& tok = ctx.require_tokenizer("messages");

  ChatPromptInputs in;
  in.messages = &req.messages;
  in.tools = &req.tools;
  in.add_generation_prompt = req.add_generation_prompt;
  in.continue_final_message = req.continue_final_message;
  in.request_kwargs = &req.chat_template_kwargs;
  in.request_template = &req.chat_template;
  in.add_special_tokens = req.add_special_tokens;
  std::vector<int32_t> ids = chat_prompt_ids(ctx, in);
  if (ids.empty()) throw bad_request("The chat template rendered an empty prompt", "messages");

  // vLLM's chat echo: the final message's content comes back in front of the
  // reply when that message is the assistant's.
  std::string echo;
  if (req.echo) {
    const Json& last = req.messages.back();
    if (last["role"] == "assistant" && last["content"].is_string()) echo = last["content"].get<std::string>();
  }

  const std::string id = make_request_id("chatcmpl-");
  SamplingParams params = resolve_sampling_params(req.sampling, ctx.sampling_defaults,
                                                  static_cast<int64_t>(ids.size()), ctx.max_model_len,
                                                  tok.vocab_size());
  GenerationOptions gen_options{req.sampling.skip_special_tokens, req.sampling.include_stop_str_in_output};
  auto generation = std::make_unique<Generation>(*ctx.engine, &tok, id, params.n, params.stop, gen_options);
  log_request(ctx, id, ids.size(), params);
  generation->add_prompt(ids, std::move(params));

  ResponseOptions options;
  options.id = id;
  options.created = unix_time_seconds();
  options.model = ctx.model_name();
  options.logprobs = req.sampling.logprobs;
  options.include_usage = req.sampling.include_usage;
  options.continuous_usage = req.sampling.continuous_usage_stats;
  options.return_token_ids = req.sampling.return_token_ids;
  auto formatter = make_chat_formatter(std::move(options), tok, std::move(echo), std::move(ids));
  if (req.sampling.stream) {
    respond_stream(res, std::move(generation), std::move(formatter), std::move(guard));
  } else {
    respond_whole(res, *generation, *formatter);
  }
}

}  // namespace hyllm::serve
