#pragma once
// POST /v1/responses: the request as parsed and validated, as vLLM's
// ResponsesRequest reads it. The conversation, tools and output format are
// translated into a ChatRequest, so that generation runs exactly as chat's
// does; what the response object repeats back (instructions, tools as the
// client sent them, text, reasoning, metadata, ...) is kept as given.
//
// Refused with a 400, since ignoring them would change the answer:
// `background`, `previous_response_id` and item references (hyllm keeps no
// responses, as vLLM by default), `prompt` templates, `truncation: "auto"`,
// built-in tools (web search, file search, ...), non-text content, output
// logprobs, and `n` other than 1.

#include "serve/chat_request.h"
#include "serve/json.h"

namespace hyllm::serve {

struct ResponsesRequest {
  ChatRequest chat;
  // Fields the response object repeats: instructions, max_tool_calls,
  // parallel_tool_calls, reasoning, service_tier, text, tool_choice, tools,
  // top_logprobs, truncation, user, metadata (defaults filled in).
  Json echo = Json::object();
};

ResponsesRequest parse_responses_request(const Json& body);

}  // namespace hyllm::serve
