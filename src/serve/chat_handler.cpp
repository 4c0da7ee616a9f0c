// POST /v1/chat/completions.

#include "serve/api_error.h"
#include "serve/chat_prompt.h"
#include "serve/chat_request.h"
#include "serve/handlers.h"
#include "serve/openai_json.h"
#include "serve/structured_request.h"

namespace hyllm::serve {

void handle_chat_completions(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                             httplib::Response& res) {
  auto guard = activity.enter();
  ChatRequest req = parse_chat_request(parse_request_json(body));
  ctx.check_model(req.model);
  warn_ignored_fields(req.sampling);
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

  // Reasoning and tool calls: how the output is read, and what it is held to.
  ChatOutputOptions parsing;
  std::optional<structured::GrammarSpec> grammar = req.structured;
  if (!ctx.reasoning_parser.empty()) {
    parsing.reasoning = reasoning_syntax(ctx.reasoning_parser);
    const size_t tail = std::min<size_t>(ids.size(), 32);
    const std::string prompt_tail = tok.decode(std::span<const int32_t>(ids).last(tail), false);
    parsing.reasoning_start = reasoning_start(*parsing.reasoning, prompt_tail);
  }
  const ToolChoice& choice = req.tool_choice;
  if (choice.mode == ToolChoice::kAuto && !(ctx.enable_auto_tool_choice && !ctx.tool_call_parser.empty())) {
    throw bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                      "tool_choice");
  }
  if ((choice.mode == ToolChoice::kRequired || choice.mode == ToolChoice::kNamed) && ctx.tool_call_parser.empty()) {
    throw bad_request("tool_choice \"required\" or a named tool needs the server's --tool-call-parser, whose "
                      "format the calls are forced into",
                      "tool_choice");
  }
  if (choice.mode != ToolChoice::kNone) {
    parsing.tool_parser = ctx.tool_call_parser;
    parsing.tools = req.tools;
    parsing.parallel_tool_calls = req.parallel_tool_calls;
  }
  if (choice.mode == ToolChoice::kRequired || choice.mode == ToolChoice::kNamed) {
    if (grammar) {
      throw bad_request("tool_choice \"required\" or a named tool cannot be combined with response_format or "
                        "structured_outputs",
                        "tool_choice");
    }
    grammar = structured::GrammarSpec{
        structured::GrammarKind::kStructuralTag,
        forced_tool_calls_structural_tag(ctx.tool_call_parser, req.tools,
                                         choice.mode == ToolChoice::kNamed ? &choice.name : nullptr,
                                         req.parallel_tool_calls)};
  }

  const std::string id = make_request_id("chatcmpl-");
  SamplingParams params = resolve_sampling_params(req.sampling, ctx.sampling_defaults,
                                                  static_cast<int64_t>(ids.size()), ctx.max_model_len,
                                                  tok.vocab_size());
  GenerationOptions gen_options{req.sampling.skip_special_tokens, req.sampling.include_stop_str_in_output,
                                req.sampling.cache_salt};
  auto generation = std::make_unique<Generation>(*ctx.engine, &tok, id, params.n, params.stop, gen_options);
  structured::ConstraintOptions copts;
  if (grammar && parsing.reasoning) {
    // The grammar governs the answer; reasoning before it is free.
    const auto open = tok.token_to_id(parsing.reasoning->open), close = tok.token_to_id(parsing.reasoning->close);
    if (close && parsing.reasoning_start != ReasoningStart::kContent) {
      copts.reasoning_end_token = close;
      copts.starts_in_reasoning = parsing.reasoning_start == ReasoningStart::kReasoning;
      if (parsing.reasoning_start == ReasoningStart::kMayOpen) copts.reasoning_start_token = open;
    }
  }
  copts.jump_forward = !params.logprobs.has_value();
  const ChoiceLimits limits{std::move(grammar), req.sampling.allowed_token_ids,
                            bad_words_token_ids(&tok, req.sampling.bad_words, ctx.model_vocab_size)};
  auto constraints = choice_constraints(ctx.grammar_compiler.get(), limits, ctx.model_vocab_size, params.n, copts);
  log_request(ctx, id, ids.size(), params);
  generation->add_prompt(ids, std::move(params), std::move(constraints));

  ResponseOptions options;
  options.id = id;
  options.created = unix_time_seconds();
  options.model = ctx.model_name();
  options.logprobs = req.sampling.logprobs;
  options.prompt_logprobs = prompt_logprobs_shown(req.sampling.prompt_logprobs);
  options.include_usage = req.sampling.include_usage;
  options.continuous_usage = req.sampling.continuous_usage_stats;
  options.return_token_ids = req.sampling.return_token_ids;
  options.tokens_as_token_ids = req.sampling.return_tokens_as_token_ids;
  auto formatter = make_chat_formatter(std::move(options), tok, std::move(echo), std::move(ids), std::move(parsing));
  if (req.sampling.stream) {
    respond_stream(res, std::move(generation), std::move(formatter), std::move(guard));
  } else {
    respond_whole(res, *generation, *formatter);
  }
}

}  // namespace hyllm::serve
