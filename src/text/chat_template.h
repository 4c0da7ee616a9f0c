#pragma once
// Chat templates: turns an OpenAI-style conversation into the prompt text a
// model was trained on, by rendering the model's own Jinja template the way
// transformers' apply_chat_template does (jinja2 ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks and loop controls; tojson without ASCII
// escaping; raise_exception and strftime_now globals).
//
// Usage:
//   auto tmpl = ChatTemplate::from_source(tokenizer_config["chat_template"]);
//   std::string prompt = tmpl.render({.messages = request["messages"], ...});
//
// JSON inputs are nlohmann::ordered_json so that object key order survives
// into `tojson` output (tool schemas); parse request bodies with ordered_json.

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja/evaluator.h"

namespace hyllm {

namespace jinja {
class Template;
}

struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // null (no tools: the template sees `tools` as None) or an array of tool schemas.
  nlohmann::ordered_json tools;
  // null or an array; transformers passes `documents` (None when absent).
  nlohmann::ordered_json documents;
  bool add_generation_prompt = true;
  // chat_template_kwargs (e.g. {"enable_thinking": false}): an object whose
  // entries become top-level template variables. They override bos_token and
  // eos_token, and may not name messages, tools, documents or
  // add_generation_prompt.
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
  // Special tokens as tokenizer_config.json gives them; empty means the
  // tokenizer has none (the variable stays undefined, as in transformers).
  std::string bos_token;
  std::string eos_token;
};

struct ChatTemplateOptions {
  jinja::RenderLimits limits;  // steps, loop iterations, depth, output bytes
  // When set, strftime_now reports this instant (Unix seconds, UTC) instead of
  // the local clock (templates that print today's date become reproducible).
  std::optional<int64_t> fixed_time;
};

class ChatTemplate {
 public:
  // Parses the template once. Throws hyllm::Error(kCorruptData) with line and
  // column when it does not parse.
  static ChatTemplate from_source(std::string source, const ChatTemplateOptions& options = {});

  // Renders the prompt. Throws hyllm::Error: kInvalidArgument when the
  // template fails on these inputs (raise_exception, undefined values, type
  // errors; the message gives line and column), kResourceExhausted when a
  // sandbox cap is hit. Const and thread-safe: call it from any thread.
  std::string render(const ChatTemplateInputs& inputs) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace hyllm
