#include "serve/responses_input.h"

#include <fmt/format.h>

#include "serve/api_error.h"
#include "serve/limits.h"

namespace hyllm::serve {
namespace {

constexpr const char* kParam = "input";

const std::string& string_field(const Json& item, const char* key, size_t index, const char* type) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string()) {
    throw bad_request(fmt::format("input[{}]: a {} item needs a string `{}`", index, type, key), kParam);
  }
  return it->get_ref<const std::string&>();
}

// Content parts as chat takes them: input_text and output_text are text.
Json chat_content(const Json& content, size_t index) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) {
    throw bad_request(fmt::format("input[{}].content must be a string or a list of parts", index), kParam);
  }
  Json parts = Json::array();
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      throw bad_request(fmt::format("input[{}].content parts must be objects with a `type`", index), kParam);
    }
    const auto& type = part["type"].get_ref<const std::string&>();
    if (type == "input_text" || type == "output_text" || type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) {
        throw bad_request(fmt::format("input[{}]: a content part of type {} needs a string `text`", index, type),
                          kParam);
      }
      parts.push_back({{"type", "text"}, {"text", part["text"]}});
    } else if (type == "refusal") {
      parts.push_back(part);
    } else {
      throw bad_request(fmt::format("input[{}]: content of type `{}` is not supported; hyllm serves text only",
                                    index, type),
                        kParam);
    }
  }
  return parts;
}

// The text of a reasoning item: its reasoning_text content, else its summary.
std::string reasoning_text(const Json& item, size_t index) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    auto it = item.find(key);
    if (it == item.end() || it->is_null()) continue;
    if (!it->is_array()) throw bad_request(fmt::format("input[{}].{} must be a list", index, key), kParam);
    for (const auto& part : *it) {
      if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) {
        throw bad_request(fmt::format("input[{}].{} parts need a string `text`", index, key), kParam);
      }
      text += part["text"].get<std::string>();
    }
    if (!text.empty()) return text;
  }
  if (auto enc = item.find("encrypted_content"); enc != item.end() && !enc->is_null()) {
    throw bad_request(fmt::format("input[{}]: encrypted reasoning content is not supported", index), kParam);
  }
  return text;
}

// The assistant message that an assistant item joins: the previous message
// when it is the assistant's and does not yet have what the item brings.
Json* open_assistant(Json& messages, const char* key) {
  if (messages.empty()) return nullptr;
  Json& last = messages.back();
  if (last["role"] != "assistant") return nullptr;
  if (key && last.contains(key) && !last[key].is_null()) return nullptr;
  return &last;
}

bool in_progress(const Json& item) {
  auto status = item.find("status");
  return status != item.end() && (*status == "in_progress" || *status == "incomplete");
}

void add_message(Json& messages, const Json& item, size_t index) {
  const std::string& role = string_field(item, "role", index, "message");
  if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
    throw bad_request(fmt::format("input[{}]: role `{}` is not one of user, system, developer, assistant", index,
                                  role),
                      kParam);
  }
  auto content = item.find("content");
  if (content == item.end()) throw bad_request(fmt::format("input[{}]: a message needs `content`", index), kParam);
  Json chat = chat_content(*content, index);
  if (role == "assistant") {
    if (Json* prev = open_assistant(messages, "content")) {
      (*prev)["content"] = std::move(chat);
      return;
    }
  }
  messages.push_back({{"role", role}, {"content", std::move(chat)}});
}

void add_function_call(Json& messages, const Json& item, size_t index) {
  Json arguments = "{}";
  if (auto a = item.find("arguments"); a != item.end() && !a->is_null()) {
    if (!a->is_string()) throw bad_request(fmt::format("input[{}].arguments must be a JSON string", index), kParam);
    arguments = *a;
  }
  Json call = {{"id", string_field(item, "call_id", index, "function_call")},
               {"type", "function"},
               {"function", {{"name", string_field(item, "name", index, "function_call")}, {"arguments", arguments}}}};
  if (Json* prev = open_assistant(messages, nullptr)) {
    Json& calls = (*prev)["tool_calls"];
    if (!calls.is_array()) calls = Json::array();
    calls.push_back(std::move(call));
    return;
  }
  messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({std::move(call)})}});
}

void add_function_output(Json& messages, const Json& item, size_t index) {
  const std::string& call_id = string_field(item, "call_id", index, "function_call_output");
  auto output = item.find("output");
  if (output == item.end() || !(output->is_string() || output->is_array())) {
    throw bad_request(fmt::format("input[{}]: a function_call_output item needs `output` (a string or a list of "
                                  "parts)",
                                  index),
                      kParam);
  }
  messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", chat_content(*output, index)}});
}

void add_reasoning(Json& messages, const Json& item, size_t index) {
  std::string text = reasoning_text(item, index);
  if (Json* prev = open_assistant(messages, "reasoning")) {
    (*prev)["reasoning"] = std::move(text);
    return;
  }
  messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"reasoning", std::move(text)}});
}

}  // namespace

ConversationInput responses_input_messages(const Json& input, const std::optional<std::string>& instructions) {
  ConversationInput out;
  if (instructions && !instructions->empty()) out.messages.push_back({{"role", "system"}, {"content", *instructions}});
  if (input.is_string()) {
    out.messages.push_back({{"role", "user"}, {"content", input}});
    return out;
  }
  if (!input.is_array()) throw bad_request("`input` must be a string or a list of items", kParam);
  if (input.empty()) throw bad_request("`input` must not be an empty list", kParam);
  if (input.size() > kMaxMessages) {
    throw bad_request(fmt::format("At most {} input items are allowed, got {}", kMaxMessages, input.size()), kParam);
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    if (!item.is_object()) throw bad_request(fmt::format("input[{}] must be an object", i), kParam);
    // An item without a type is a message (the easy input message form).
    std::string type = "message";
    if (auto t = item.find("type"); t != item.end() && !t->is_null()) {
      if (!t->is_string()) throw bad_request(fmt::format("input[{}].type must be a string", i), kParam);
      type = t->get<std::string>();
    }
    if (type == "message") {
      add_message(out.messages, item, i);
    } else if (type == "function_call") {
      add_function_call(out.messages, item, i);
    } else if (type == "function_call_output") {
      add_function_output(out.messages, item, i);
    } else if (type == "reasoning") {
      add_reasoning(out.messages, item, i);
    } else if (type == "item_reference") {
      throw bad_request(fmt::format("input[{}]: item references need stored responses, which hyllm does not keep",
                                    i),
                        kParam);
    } else {
      throw bad_request(fmt::format("input[{}]: items of type `{}` are not supported; hyllm takes messages, "
                                    "function_call, function_call_output and reasoning items",
                                    i, type),
                        kParam);
    }
  }
  const Json& last = input.back();
  const auto type = last.find("type");
  out.continue_final_message = last.contains("role") && last["role"] == "assistant" &&
                               (type == last.end() || type->is_null() || *type == "message") && in_progress(last);
  return out;
}

}  // namespace hyllm::serve
