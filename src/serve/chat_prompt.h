#pragma once
// Chat messages to prompt text through the model's chat template (or one the
// request brings, when --trust-request-chat-template allows it).

#include <optional>
#include <string>

#include "serve/json.h"
#include "serve/serving_context.h"

namespace hyllm::serve {

struct ChatPromptInputs {
  const Json* messages = nullptr;  // normalised (normalize_messages)
  const Json* tools = nullptr;     // null or absent: no tools
  bool add_generation_prompt = true;
  // The last (assistant) message is left open for the model to continue:
  // the prompt ends right after its content.
  bool continue_final_message = false;
  const Json* request_kwargs = nullptr;  // chat_template_kwargs of the request
  const std::optional<std::string>* request_template = nullptr;
};

// Throws ApiError 400 when the template fails on these messages.
std::string render_chat_prompt(const ServingContext& ctx, const ChatPromptInputs& in);

}  // namespace hyllm::serve
