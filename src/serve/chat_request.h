#pragma once
// POST /v1/chat/completions: the request as parsed and validated, with the
// messages normalised for the chat template (text parts joined, tool-call
// arguments decoded into objects as Hugging Face templates expect).

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "serve/sampling_request.h"

namespace hyllm::serve {

struct ChatRequest {
  std::optional<std::string> model;
  nlohmann::json messages = nlohmann::json::array();
  nlohmann::json tools;  // null when absent
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool echo = false;
  bool add_special_tokens = false;
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
  SamplingRequest sampling;
};

ChatRequest parse_chat_request(const nlohmann::json& body);

// The messages list on its own (also used by /tokenize).
nlohmann::json normalize_messages(const nlohmann::json& messages);
// tools and tool_choice; returns the tools to render (null when none).
nlohmann::json validate_tools(const nlohmann::json* tools, const nlohmann::json* tool_choice);
// chat_template_kwargs without the keys the server itself sets.
nlohmann::json template_kwargs(const nlohmann::json* kwargs);

}  // namespace hyllm::serve
