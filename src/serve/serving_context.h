#pragma once
// Everything a request handler needs about the loaded model, built once when
// loading finishes and read-only afterwards (handlers run on many threads).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "serve/json.h"
#include "serve/sampling_request.h"
#include "structured/grammar_compiler.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace hyllm::serve {

struct ServingContext {
  std::vector<std::string> served_model_names;  // the first is echoed in responses and metrics
  std::string model_root;                       // the model directory, for /v1/models
  int64_t created = 0;                          // unix seconds at startup
  int max_model_len = 0;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;    // none: chat requests get 400
  std::unique_ptr<EngineClient> engine;
  SamplingDefaults sampling_defaults;           // from --generation-config
  Json default_chat_template_kwargs = Json::object();
  bool trust_request_chat_template = false;
  bool log_requests = false;                    // --enable-log-requests
  // Texts of the tokenizer's special tokens: client text spelling one is
  // tokenized as plain text (chat_prompt_ids).
  std::vector<std::string> special_tokens;
  // Agents (--reasoning-parser, --tool-call-parser, --enable-auto-tool-choice).
  std::string reasoning_parser;   // empty: reasoning stays in content
  std::string tool_call_parser;   // empty: tool calls are not parsed
  bool enable_auto_tool_choice = false;
  // Structured output; null: requests that ask for it get 400.
  std::unique_ptr<structured::GrammarCompiler> grammar_compiler;

  const std::string& model_name() const { return served_model_names.front(); }
  // 404 "The model `X` does not exist." when a model is named and not served.
  void check_model(const std::optional<std::string>& requested) const;
};

}  // namespace hyllm::serve
