#include "text/chat_template.h"

#include "text/jinja/template.h"
#include "util/status.h"

namespace hyllm {

ChatTemplate ChatTemplate::from_source(std::string source, const ChatTemplateOptions& options) {
  jinja::TemplateOptions topt;
  topt.limits = options.limits;
  topt.fixed_time = options.fixed_time;
  ChatTemplate t;
  t.template_ = std::make_shared<const jinja::Template>(jinja::Template::parse(source, topt));
  t.source_ = std::move(source);
  return t;
}

std::string ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  using jinja::Value;
  using jinja::value_from_json;
  if (!inputs.messages.is_array()) fail(ErrorCode::kInvalidArgument, "chat template: messages must be an array");
  if (!inputs.tools.is_null() && !inputs.tools.is_array())
    fail(ErrorCode::kInvalidArgument, "chat template: tools must be null or an array");
  if (!inputs.documents.is_null() && !inputs.documents.is_array())
    fail(ErrorCode::kInvalidArgument, "chat template: documents must be null or an array");
  if (!inputs.extra_context.is_null() && !inputs.extra_context.is_object())
    fail(ErrorCode::kInvalidArgument, "chat template: chat_template_kwargs must be an object");

  // Same precedence as transformers: special tokens, then the caller's
  // kwargs, then the conversation itself.
  jinja::Variables vars;
  if (!inputs.bos_token.empty()) vars.emplace_back("bos_token", Value::string(inputs.bos_token));
  if (!inputs.eos_token.empty()) vars.emplace_back("eos_token", Value::string(inputs.eos_token));
  if (inputs.extra_context.is_object()) {
    for (const auto& [key, value] : inputs.extra_context.items()) {
      if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt")
        fail(ErrorCode::kInvalidArgument, "chat template: chat_template_kwargs may not set '{}'", key);
      vars.emplace_back(key, value_from_json(value));
    }
  }
  vars.emplace_back("messages", value_from_json(inputs.messages));
  vars.emplace_back("tools", value_from_json(inputs.tools));
  vars.emplace_back("documents", value_from_json(inputs.documents));
  vars.emplace_back("add_generation_prompt", Value::boolean(inputs.add_generation_prompt));
  return template_->render(vars);
}

}  // namespace hyllm
