#include "serve/chat_request.h"

#include <fmt/format.h>

#include <array>
#include <string_view>

#include "serve/api_error.h"
#include "serve/json_fields.h"
#include "serve/limits.h"
#include "serve/structured_request.h"

namespace hyllm::serve {
namespace {

// Content as a list of parts becomes one string, text parts joined by
// newlines (vLLM's "string" content format). hyllm serves text only.
std::string flatten_content(const Json& parts, size_t index) {
  std::string text;
  bool first = true;
  for (const auto& part : parts) {
    if (part.is_string()) {
      if (!first) text += '\n';
      text += part.get<std::string>();
      first = false;
      continue;
    }
    if (!part.is_object()) {
      throw bad_request(fmt::format("messages[{}].content parts must be objects", index), "messages");
    }
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      throw bad_request(fmt::format("messages[{}].content parts need a `type`", index), "messages");
    }
    const auto& t = type->get_ref<const std::string&>();
    if (t == "text" || t == "input_text" || t == "refusal") {
      const char* key = t == "refusal" ? "refusal" : "text";
      auto value = part.find(key);
      if (value == part.end() || !value->is_string()) {
        throw bad_request(fmt::format("messages[{}].content part of type {} needs a string `{}`", index, t, key),
                          "messages");
      }
      if (!first) text += '\n';
      text += value->get<std::string>();
      first = false;
    } else {
      throw bad_request(fmt::format("messages[{}]: content of type `{}` is not supported; hyllm serves text only",
                                    index, t),
                        "messages");
    }
  }
  return text;
}

Json normalize_tool_calls(const Json& calls, size_t index) {
  if (!calls.is_array()) throw bad_request(fmt::format("messages[{}].tool_calls must be a list", index), "messages");
  Json out = Json::array();
  for (auto call : calls) {
    if (!call.is_object()) {
      throw bad_request(fmt::format("messages[{}].tool_calls entries must be objects", index), "messages");
    }
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
      throw bad_request(fmt::format("messages[{}].tool_calls entries need function.name", index), "messages");
    }
    // Templates iterate arguments as a mapping; OpenAI clients send a JSON string.
    auto args = fn->find("arguments");
    // Arguments nested deeper than a request may nest stay a string.
    if (args != fn->end() && args->is_string() && json_depth_within(args->get_ref<const std::string&>())) {
      try {
        auto decoded = Json::parse(args->get<std::string>());
        if (decoded.is_object()) *args = std::move(decoded);
      } catch (const Json::parse_error&) {
        // Keep the string: the template prints it as given.
      }
    }
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

Json normalize_messages(const Json& messages) {
  if (!messages.is_array()) throw bad_request("`messages` must be a list", "messages");
  if (messages.empty()) throw bad_request("`messages` must not be empty", "messages");
  if (messages.size() > kMaxMessages) {
    throw bad_request(fmt::format("At most {} messages are allowed, got {}", kMaxMessages, messages.size()),
                      "messages");
  }
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object()) throw bad_request(fmt::format("messages[{}] must be an object", i), "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || role->get_ref<const std::string&>().empty()) {
      throw bad_request(fmt::format("messages[{}].role must be a non-empty string", i), "messages");
    }
    Json msg = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      msg["content"] = nullptr;
    } else if (content->is_array()) {
      msg["content"] = flatten_content(*content, i);
    } else if (!content->is_string()) {
      throw bad_request(fmt::format("messages[{}].content must be a string or a list of parts", i), "messages");
    }
    // Templates read an earlier turn's reasoning as reasoning_content; vLLM's
    // newer name for it is reasoning. Either reaches the template.
    if (auto r = m.find("reasoning"); r != m.end() && r->is_string() && !m.contains("reasoning_content")) {
      msg["reasoning_content"] = *r;
    }
    if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      msg["tool_calls"] = normalize_tool_calls(*calls, i);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

Json validate_tools(const Json* tools, const Json* tool_choice) {
  if (tools) {
    if (!tools->is_array()) throw bad_request("`tools` must be a list", "tools");
    if (tools->empty()) throw bad_request("`tools` must not be an empty list; omit it instead", "tools");
    if (tools->size() > kMaxTools) {
      throw bad_request(fmt::format("At most {} tools are allowed", kMaxTools), "tools");
    }
    for (const auto& tool : *tools) {
      if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
          !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
        throw bad_request("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools");
      }
      if (tool.contains("type") && tool["type"] != "function") {
        throw bad_request("only tools of type `function` are supported", "tools");
      }
      const Json& fn = tool["function"];
      if (fn["name"].get_ref<const std::string&>().empty()) throw bad_request("a tool's name must not be empty", "tools");
      if (auto params = fn.find("parameters"); params != fn.end() && !params->is_null() && !params->is_object()) {
        throw bad_request(fmt::format("tool `{}`: `parameters` must be a JSON schema object",
                                      fn["name"].get<std::string>()),
                          "tools");
      }
    }
  }
  if (!tool_choice) return tools ? *tools : Json();
  if (tool_choice->is_string()) {
    const auto& choice = tool_choice->get_ref<const std::string&>();
    if (choice == "none") return tools ? *tools : Json();
    if (!tools) throw bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
    if (choice == "auto") return *tools;
    if (choice == "required") return *tools;
    throw bad_request(fmt::format("Invalid tool_choice `{}`", choice), "tool_choice");
  }
  if (!tool_choice->is_object()) throw bad_request("`tool_choice` must be a string or an object", "tool_choice");
  if (!tools) throw bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
  std::string name;
  if (auto fn = tool_choice->find("function"); fn != tool_choice->end() && fn->is_object()) {
    if (auto n = fn->find("name"); n != fn->end() && n->is_string()) name = n->get<std::string>();
  }
  if (name.empty()) throw bad_request("`tool_choice` must name a function", "tool_choice");
  bool found = false;
  for (const auto& tool : *tools) found = found || tool["function"]["name"] == name;
  if (!found) throw bad_request(fmt::format("Tool '{}' has not been passed in `tools`.", name), "tool_choice");
  return *tools;
}

ToolChoice parse_tool_choice(const Json* tools, const Json* tool_choice) {
  ToolChoice c;
  if (!tools) return c;
  c.mode = ToolChoice::kAuto;
  if (!tool_choice) return c;
  if (tool_choice->is_string()) {
    const auto& s = tool_choice->get_ref<const std::string&>();
    c.mode = s == "none" ? ToolChoice::kNone : s == "required" ? ToolChoice::kRequired : ToolChoice::kAuto;
    return c;
  }
  c.mode = ToolChoice::kNamed;
  c.name = (*tool_choice)["function"]["name"].get<std::string>();
  return c;
}

Json template_kwargs(const Json* kwargs) {
  static constexpr std::array<std::string_view, 8> kReserved = {
      "messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
      "bos_token", "eos_token", "chat_template"};
  Json out = Json::object();
  if (!kwargs) return out;
  for (const auto& [key, value] : kwargs->items()) {
    bool reserved = false;
    for (auto r : kReserved) reserved = reserved || key == r;
    if (!reserved) out[key] = value;
  }
  return out;
}

ChatRequest parse_chat_request(const Json& body) {
  FieldReader r(body);
  ChatRequest req;
  req.model = r.string("model");
  const auto* messages = r.get("messages");
  if (!messages) throw bad_request("`messages` is required", "messages");
  req.messages = normalize_messages(*messages);
  req.tools = validate_tools(r.array("tools"), r.get("tool_choice"));
  req.tool_choice = parse_tool_choice(r.array("tools"), r.get("tool_choice"));
  req.parallel_tool_calls = r.boolean("parallel_tool_calls").value_or(true);
  req.add_generation_prompt = r.boolean("add_generation_prompt").value_or(true);
  req.continue_final_message = r.boolean("continue_final_message").value_or(false);
  if (req.add_generation_prompt && req.continue_final_message) {
    throw bad_request("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                      "continue_final_message");
  }
  if (req.continue_final_message && req.messages.back()["role"] != "assistant") {
    throw bad_request("continue_final_message needs the last message to be from the assistant",
                      "continue_final_message");
  }
  req.echo = r.boolean("echo").value_or(false);
  req.add_special_tokens = r.boolean("add_special_tokens").value_or(false);
  req.chat_template_kwargs = template_kwargs(r.object("chat_template_kwargs"));
  req.chat_template = r.string("chat_template");
  req.structured = parse_structured_output(r);

  req.sampling = parse_sampling_request(r);
  bool logprobs = r.boolean("logprobs").value_or(false);
  if (auto top = r.integer("top_logprobs")) {
    int count = validate_logprobs_count(*top, "top_logprobs");
    if (!logprobs && count > 0) {
      throw bad_request("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
    }
    if (logprobs) req.sampling.logprobs = count;
  } else if (logprobs) {
    req.sampling.logprobs = 0;
  }
  // max_completion_tokens replaces the deprecated max_tokens and wins over it.
  if (r.has("max_completion_tokens")) {
    r.has("max_tokens");  // (not ignored: overridden)
    validate_max_tokens(req.sampling, r.integer("max_completion_tokens"), "max_completion_tokens");
  } else {
    validate_max_tokens(req.sampling, r.integer("max_tokens"), "max_tokens");
  }
  req.sampling.ignored_fields = r.unread();
  return req;
}

}  // namespace hyllm::serve
