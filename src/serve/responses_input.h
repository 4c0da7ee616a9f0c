#pragma once
// The Responses API's `instructions` and `input` as chat messages, the way
// vLLM builds them: instructions (when not empty) become a first system
// message; a string input is one user message; a list of items maps item by
// item:
//
//   message (role user/system/developer/assistant)  -> a message of that role;
//       input_text / output_text parts become text parts
//   function_call {call_id, name, arguments}         -> a tool call of an assistant message
//   function_call_output {call_id, output}           -> a `tool` message
//   reasoning {content | summary}                    -> the assistant message's reasoning
//
// Consecutive assistant items (reasoning, then text, then calls, as a
// response's output lists them) merge into one assistant message, so a
// previous response's output fed back renders as the turn it was.
// Anything else (images, files, item references, built-in tool calls) is a
// 400 naming the item: hyllm serves text and function tools only.

#include <optional>
#include <string>

#include "serve/json.h"

namespace hyllm::serve {

struct ConversationInput {
  Json messages = Json::array();  // chat messages, before normalize_messages
  // The last item is an assistant message left in progress: the model
  // continues it instead of starting a new turn (vLLM's partial completion).
  bool continue_final_message = false;
};

ConversationInput responses_input_messages(const Json& input, const std::optional<std::string>& instructions);

}  // namespace hyllm::serve
