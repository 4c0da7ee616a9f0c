#include "serve/chat_generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "serve/api_error.h"
#include "serve/chat_prompt.h"
#include "serve/handlers.h"
#include "serve/limits.h"
#include "serve/structured_request.h"

namespace hyllm::serve {
namespace {

// Reasoning and tool calls: how the output is read, and the grammar that
// forced tool calls hold it to (in the parser's own format).
std::optional<structured::GrammarSpec> output_rules(const ServingContext& ctx, const ChatRequest& req,
                                                    const Tokenizer& tok, const std::vector<int32_t>& ids,
                                                    ChatOutputOptions& parsing) {
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
  const bool forced = choice.mode == ToolChoice::kRequired || choice.mode == ToolChoice::kNamed;
  if (forced && ctx.tool_call_parser.empty()) {
    throw bad_request("tool_choice \"required\" or a named tool needs the server's --tool-call-parser, whose "
                      "format the calls are forced into",
                      "tool_choice");
  }
  if (choice.mode != ToolChoice::kNone) {
    parsing.tool_parser = ctx.tool_call_parser;
    parsing.tools = req.tools;
    parsing.parallel_tool_calls = req.parallel_tool_calls;
  }
  if (forced) {
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
    // The grammar a forced call compiles holds every tool's schema: the cap
    // on any grammar a request brings holds for it too.
    if (grammar->text.size() > kMaxGrammarBytes) {
      throw bad_request(fmt::format("the tools' parameter schemas make a grammar larger than {} bytes, the most a "
                                    "required or named tool choice may compile",
                                    kMaxGrammarBytes),
                        "tools");
    }
  }
  return grammar;
}

}  // namespace

ChatPromptInputs chat_prompt_inputs(const ChatRequest& req) {
  ChatPromptInputs in;
  in.messages = &req.messages;
  in.tools = &req.tools;
  in.add_generation_prompt = req.add_generation_prompt;
  in.continue_final_message = req.continue_final_message;
  in.request_kwargs = &req.chat_template_kwargs;
  in.request_template = &req.chat_template;
  in.add_special_tokens = req.add_special_tokens;
  return in;
}

ChatGeneration start_chat_generation(const ServingContext& ctx, const ChatRequest& req, const std::string& id) {
  const Tokenizer& tok = ctx.require_tokenizer("messages");
  ChatGeneration out;

  out.prompt_ids = chat_prompt_ids(ctx, chat_prompt_inputs(req));
  if (out.prompt_ids.empty()) throw bad_request("The chat template rendered an empty prompt", "messages");

  std::optional<structured::GrammarSpec> grammar = output_rules(ctx, req, tok, out.prompt_ids, out.parsing);
  SamplingParams params = resolve_sampling_params(req.sampling, ctx.sampling_defaults,
                                                  static_cast<int64_t>(out.prompt_ids.size()), ctx.max_model_len,
                                                  tok.vocab_size());
  GenerationOptions gen_options{req.sampling.skip_special_tokens, req.sampling.include_stop_str_in_output,
                                req.sampling.cache_salt};
  out.generation = std::make_unique<Generation>(*ctx.engine, &tok, id, params.n, params.stop, gen_options);
  structured::ConstraintOptions copts;
  const ChatOutputOptions& parsing = out.parsing;
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
  log_request(ctx, id, out.prompt_ids.size(), params);
  out.params = params;
  out.generation->add_prompt(out.prompt_ids, std::move(params), std::move(constraints));
  return out;
}

}  // namespace hyllm::serve
