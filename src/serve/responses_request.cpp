#include "serve/responses_request.h"

#include <fmt/format.h>

#include <array>
#include <string_view>

#include "serve/api_error.h"
#include "serve/json_fields.h"
#include "serve/responses_input.h"
#include "serve/structured_request.h"

namespace hyllm::serve {
namespace {

constexpr const char* kNoStore =
    "hyllm keeps no responses (as vLLM by default, `store` has no effect); send the whole conversation in `input`";

// Responses' flat function tools {type, name, description, parameters} as
// chat's {type, function: {name, description, parameters}}.
Json chat_tools(const Json& tools) {
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    if (!tool.is_object() || !tool.contains("type") || !tool["type"].is_string()) {
      throw bad_request(fmt::format("tools[{}] must be an object with a `type`", i), "tools");
    }
    const auto& type = tool["type"].get_ref<const std::string&>();
    if (type != "function") {
      throw bad_request(fmt::format("tools[{}]: tools of type `{}` are not supported; hyllm serves function tools "
                                    "only",
                                    i, type),
                        "tools");
    }
    if (!tool.contains("name") || !tool["name"].is_string()) {
      throw bad_request(fmt::format("tools[{}]: a function tool needs a string `name`", i), "tools");
    }
    Json fn = {{"name", tool["name"]}};
    if (auto d = tool.find("description"); d != tool.end() && !d->is_null()) fn["description"] = *d;
    if (auto p = tool.find("parameters"); p != tool.end() && !p->is_null()) fn["parameters"] = *p;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// Responses' tool_choice ("none", "auto", "required", {type: "function",
// name}) as chat's.
Json chat_tool_choice(const Json& choice) {
  if (choice.is_string()) {
    const auto& s = choice.get_ref<const std::string&>();
    if (s == "none" || s == "auto" || s == "required") return choice;
    throw bad_request(fmt::format("Invalid tool_choice `{}`", s), "tool_choice");
  }
  if (!choice.is_object()) throw bad_request("`tool_choice` must be a string or an object", "tool_choice");
  const std::string type =
      choice.contains("type") && choice["type"].is_string() ? choice["type"].get<std::string>() : "";
  if (type != "function") {
    throw bad_request(fmt::format("tool_choice of type `{}` is not supported; name a function tool", type),
                      "tool_choice");
  }
  if (!choice.contains("name") || !choice["name"].is_string()) {
    throw bad_request("`tool_choice` must name a function", "tool_choice");
  }
  return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
}

// text.format as chat's response_format; nullopt for plain text.
std::optional<Json> response_format(const Json& text) {
  FieldReader t(text);
  t.string("verbosity");  // how long an answer OpenAI's models write; no effect here
  const Json* format = t.object("format");
  if (!format) return std::nullopt;
  FieldReader f(*format);
  const std::string type = f.string("type").value_or("");
  if (type == "text") return std::nullopt;
  if (type == "json_object") return Json{{"type", "json_object"}};
  if (type != "json_schema") {
    throw bad_request(fmt::format("text.format type `{}` is not one of text, json_object, json_schema", type), "text");
  }
  const Json* schema = f.object("schema");
  if (!schema) throw bad_request("text.format of type json_schema needs a `schema` object", "text");
  Json js = {{"name", f.string("name").value_or("response")}, {"schema", *schema}};
  if (auto strict = f.boolean("strict")) js["strict"] = *strict;
  f.string("description");
  return Json{{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// What the request refuses outright: features that need stored responses or
// that hyllm does not have.
void refuse_unsupported(const FieldReader& r) {
  if (r.boolean("background").value_or(false)) {
    throw bad_request(fmt::format("background mode is not supported: {}", kNoStore), "background");
  }
  for (const char* field : {"previous_response_id", "previous_response", "conversation"}) {
    if (r.has(field)) throw bad_request(fmt::format("`{}` is not supported: {}", field, kNoStore), field);
  }
  if (r.has("prompt")) throw bad_request("prompt templates are not supported", "prompt");
  if (auto truncation = r.string("truncation"); truncation && *truncation != "disabled") {
    throw bad_request(fmt::format("truncation `{}` is not supported; a prompt over the context is refused, never "
                                  "cut",
                                  *truncation),
                      "truncation");
  }
  if (const Json* include = r.array("include")) {
    for (const auto& entry : *include) {
      // hyllm's reasoning items carry their text, never encrypted content:
      // asking for it changes nothing.
      if (entry == "reasoning.encrypted_content") continue;
      throw bad_request(fmt::format("include {} is not supported", entry.dump()), "include");
    }
  }
  if (r.boolean("return_token_ids").value_or(false)) {
    throw bad_request("return_token_ids is not available on /v1/responses", "return_token_ids");
  }
}

Json reasoning_config(const Json& reasoning, Json& template_kwargs) {
  static constexpr std::array<std::string_view, 6> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh"};
  FieldReader r(reasoning);
  if (auto effort = r.string("effort")) {
    bool known = false;
    for (auto e : kEfforts) known = known || *effort == e;
    if (!known) throw bad_request(fmt::format("reasoning.effort `{}` is not one of none, minimal, low, medium, high, "
                                              "xhigh",
                                              *effort),
                                  "reasoning");
    // As vLLM: the template may read it (Qwen's ignore it).
    template_kwargs["reasoning_effort"] = *effort;
  }
  r.string("summary");
  r.string("generate_summary");
  return reasoning;
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body) {
  FieldReader r(body);
  ResponsesRequest req;
  ChatRequest& chat = req.chat;
  Json& echo = req.echo;
  refuse_unsupported(r);
  chat.model = r.string("model");

  const std::optional<std::string> instructions = r.string("instructions");
  const Json* input = r.get("input");
  if (!input) throw bad_request("`input` is required", "input");
  ConversationInput conversation = responses_input_messages(*input, instructions);
  chat.messages = normalize_messages(conversation.messages);
  chat.continue_final_message = conversation.continue_final_message;
  chat.add_generation_prompt = !conversation.continue_final_message;

  // An empty tool list is no tools; "auto" and "none" then mean nothing.
  const Json* tools = r.array("tools");
  const Json* choice = r.get("tool_choice");
  const Json given_tools = tools && !tools->empty() ? chat_tools(*tools) : Json();
  Json given_choice;
  if (choice) given_choice = chat_tool_choice(*choice);
  if (given_tools.is_null() && (given_choice == "auto" || given_choice == "none")) given_choice = nullptr;
  const Json* tools_ptr = given_tools.is_null() ? nullptr : &given_tools;
  const Json* choice_ptr = given_choice.is_null() ? nullptr : &given_choice;
  chat.tools = validate_tools(tools_ptr, choice_ptr);
  chat.tool_choice = parse_tool_choice(tools_ptr, choice_ptr);
  chat.parallel_tool_calls = r.boolean("parallel_tool_calls").value_or(true);

  // text.format and vLLM's structured_outputs, read as chat reads
  // response_format and structured_outputs.
  Json structured = Json::object();
  const Json* text = r.object("text");
  if (text) {
    if (auto format = response_format(*text)) structured["response_format"] = std::move(*format);
  }
  if (const Json* so = r.get("structured_outputs")) {
    if (structured.contains("response_format")) {
      throw bad_request("Cannot specify both structured_outputs and text.format", "structured_outputs");
    }
    structured["structured_outputs"] = *so;
  }
  chat.structured = parse_structured_output(FieldReader(structured));

  Json reasoning = nullptr;
  if (const Json* given = r.object("reasoning")) reasoning = reasoning_config(*given, chat.chat_template_kwargs);
  r.boolean("store");                // accepted; nothing is stored
  r.string("prompt_cache_key");      // vLLM ignores it too: the prefix cache needs no key
  const Json* metadata = r.object("metadata");
  const std::optional<int64_t> max_tool_calls = r.integer("max_tool_calls");
  int top_logprobs = 0;
  if (auto top = r.integer("top_logprobs")) top_logprobs = validate_logprobs_count(*top, "top_logprobs");

  chat.sampling = parse_sampling_request(r);
  if (chat.sampling.n != 1) throw bad_request("/v1/responses generates one answer; `n` must be 1", "n");
  if (chat.sampling.prompt_logprobs) {
    throw bad_request("prompt_logprobs are not available on /v1/responses", "prompt_logprobs");
  }
  validate_max_tokens(chat.sampling, r.integer("max_output_tokens"), "max_output_tokens");

  echo["instructions"] = instructions ? Json(*instructions) : Json(nullptr);
  echo["max_tool_calls"] = max_tool_calls ? Json(*max_tool_calls) : Json(nullptr);
  echo["parallel_tool_calls"] = chat.parallel_tool_calls;
  echo["reasoning"] = std::move(reasoning);
  echo["service_tier"] = r.string("service_tier").value_or("auto");
  echo["text"] = text ? *text : Json{{"format", {{"type", "text"}}}};
  echo["tool_choice"] = choice ? *choice : Json("auto");
  echo["tools"] = tools ? *tools : Json::array();
  echo["top_logprobs"] = top_logprobs;
  echo["truncation"] = "disabled";
  const std::optional<std::string> user = r.string("user");
  echo["user"] = user ? Json(*user) : Json(nullptr);
  echo["metadata"] = metadata ? *metadata : Json(nullptr);
  chat.sampling.ignored_fields = r.unread();
  return req;
}

}  // namespace hyllm::serve
