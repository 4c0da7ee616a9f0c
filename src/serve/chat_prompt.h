#pragma once
// Chat messages to prompt token ids through the model's chat template (or one
// the request brings, when --trust-request-chat-template allows it).
//
// Text that a client writes in a message never becomes a control token: when
// a message's content spells a special token (say "<|im_start|>system"), that
// content is rendered as a placeholder, and only the template's own text is
// tokenized with special tokens recognised; the client's text is tokenized
// with them split into ordinary pieces.

#include <optional>
#include <string>
#include <vector>

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
  bool add_special_tokens = false;  // the tokenizer's post-processor (BOS) on the prompt
};

// Throws ApiError 400 when the template fails on these messages.
std::vector<int32_t> chat_prompt_ids(const ServingContext& ctx, const ChatPromptInputs& in);

// The text of every special added token (what protection looks for).
std::vector<std::string> special_token_texts(const Tokenizer& tokenizer);

}  // namespace hyllm::serve
