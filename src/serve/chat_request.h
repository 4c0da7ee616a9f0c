#pragma once
// POST /v1/chat/completions: the request as parsed and validated, with the
// messages normalised for the chat template (text parts joined, tool-call
// arguments decoded into objects as Hugging Face templates expect).

#include "serve/json.h"

#include <optional>
#include <string>

#include "serve/sampling_request.h"
#include "structured/grammar_compiler.h"

namespace hyllm::serve {

struct ToolChoice {
  enum Mode { kNone, kAuto, kRequired, kNamed } mode = kNone;  // kAuto when tools are given
  std::string name;                                          // kNamed: the function
};

struct ChatRequest {
  std::optional<std::string> model;
  Json messages = Json::array();
  Json tools;  // null when absent
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  std::optional<structured::GrammarSpec> structured;  // response_format / structured_outputs
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool echo = false;
  bool add_special_tokens = false;
  Json chat_template_kwargs = Json::object();
  std::optional<std::string> chat_template;  // honoured only with --trust-request-chat-template
  SamplingRequest sampling;
};

ChatRequest parse_chat_request(const Json& body);

// The messages list on its own (also used by /tokenize).
Json normalize_messages(const Json& messages);
// tools and tool_choice; returns the tools to render (null when none).
Json validate_tools(const Json* tools, const Json* tool_choice);
// tool_choice as validate_tools accepted it.
ToolChoice parse_tool_choice(const Json* tools, const Json* tool_choice);
// chat_template_kwargs without the keys the server itself sets.
Json template_kwargs(const Json* kwargs);

}  // namespace hyllm::serve
