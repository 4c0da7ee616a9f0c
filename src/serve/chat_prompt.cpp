#include "serve/chat_prompt.h"

#include <fmt/format.h>

#include "serve/api_error.h"

namespace hyllm::serve {

std::string render_chat_prompt(const ServingContext& ctx, const ChatPromptInputs& in) {
  std::optional<ChatTemplate> request_template;
  const ChatTemplate* tmpl = ctx.chat_template ? &*ctx.chat_template : nullptr;
  if (in.request_template && *in.request_template) {
    if (!ctx.trust_request_chat_template) {
      throw bad_request(
          "Chat template is passed with request, but --trust-request-chat-template is not set. Refused request "
          "with untrusted chat template.",
          "chat_template");
    }
    try {
      request_template.emplace(ChatTemplate::from_source(**in.request_template));
    } catch (const Error& e) {
      throw bad_request(fmt::format("chat_template does not parse: {}", e.what()), "chat_template");
    }
    tmpl = &*request_template;
  }
  if (!tmpl) {
    throw bad_request("The model has no chat template; start the server with --chat-template", "messages");
  }

  ChatTemplateInputs inputs;
  inputs.messages = *in.messages;
  if (in.tools && !in.tools->is_null()) inputs.tools = *in.tools;
  inputs.add_generation_prompt = in.add_generation_prompt && !in.continue_final_message;
  inputs.extra_context = ctx.default_chat_template_kwargs.is_object() ? ctx.default_chat_template_kwargs
                                                                        : Json::object();
  if (in.request_kwargs) {
    for (const auto& [key, value] : in.request_kwargs->items()) inputs.extra_context[key] = value;
  }
  if (const auto& bos = ctx.tokenizer->bos_token()) inputs.bos_token = *bos;
  if (const auto& eos = ctx.tokenizer->eos_token()) inputs.eos_token = *eos;

  std::string prompt;
  try {
    prompt = tmpl->render(inputs);
  } catch (const Error& e) {
    throw bad_request(fmt::format("The chat template failed on these messages: {}", e.what()), "messages");
  }
  if (in.continue_final_message) {
    const Json& last = in.messages->back()["content"];
    std::string content = last.is_string() ? last.get<std::string>() : std::string();
    size_t at = content.empty() ? std::string::npos : prompt.rfind(content);
    if (at == std::string::npos) {
      throw bad_request(
          "continue_final_message is set but the final message does not appear in the chat after applying the "
          "chat template",
          "continue_final_message");
    }
    prompt.resize(at + content.size());
  }
  return prompt;
}

}  // namespace hyllm::serve
