#include "serve/responses_output.h"

namespace hyllm::serve {
namespace {

bool is_blank(std::string_view text) { return text.find_first_not_of(" \t\r\n") == std::string_view::npos; }

Json reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }

Json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
}

}  // namespace

Json ResponsesOutput::event(const char* type) const {
  Json e;
  e["type"] = type;
  e["sequence_number"] = 0;
  e["output_index"] = items_.size() - 1;
  if (!items_.empty()) e["item_id"] = items_.back()["id"];
  return e;
}

void ResponsesOutput::open(Open kind, std::vector<Json>& events, const ToolCallDelta* call) {
  close(events);
  Json item;
  switch (kind) {
    case Open::kReasoning:
      item = {{"id", make_request_id("rs_")}, {"type", "reasoning"}, {"summary", Json::array()},
              {"content", Json::array()}, {"status", "in_progress"}};
      break;
    case Open::kMessage:
      item = {{"id", make_request_id("msg_")}, {"type", "message"}, {"role", "assistant"},
              {"status", "in_progress"}, {"content", Json::array()}};
      break;
    case Open::kCall:
      item = {{"id", make_request_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"},
              {"call_id", make_request_id("call_")}, {"name", call && call->name ? *call->name : std::string()},
              {"arguments", ""}};
      call_index_ = call ? call->index : -1;
      break;
    case Open::kNone: return;
  }
  items_.push_back(std::move(item));
  open_ = kind;
  Json added = event("response.output_item.added");
  added.erase("item_id");
  added["item"] = items_.back();
  events.push_back(std::move(added));
  if (kind == Open::kCall) return;
  Json part = kind == Open::kReasoning ? reasoning_part("") : output_text_part("");
  Json part_added = event("response.content_part.added");
  part_added["content_index"] = 0;
  part_added["part"] = part;
  events.push_back(std::move(part_added));
  items_.back()["content"].push_back(std::move(part));
}

void ResponsesOutput::close(std::vector<Json>& events) {
  if (open_ == Open::kNone) return;
  Json& item = items_.back();
  if (open_ == Open::kCall) {
    Json done = event("response.function_call_arguments.done");
    done["name"] = item["name"];
    done["arguments"] = item["arguments"];
    events.push_back(std::move(done));
  } else {
    const bool reasoning = open_ == Open::kReasoning;
    const std::string text = item["content"][0]["text"].get<std::string>();
    Json text_done = event(reasoning ? "response.reasoning_text.done" : "response.output_text.done");
    text_done["content_index"] = 0;
    text_done["text"] = text;
    if (!reasoning) text_done["logprobs"] = Json::array();
    events.push_back(std::move(text_done));
    Json part_done = event("response.content_part.done");
    part_done["content_index"] = 0;
    part_done["part"] = reasoning ? reasoning_part(text) : output_text_part(text);
    events.push_back(std::move(part_done));
  }
  item["status"] = "completed";
  Json item_done = event("response.output_item.done");
  item_done.erase("item_id");
  item_done["item"] = item;
  events.push_back(std::move(item_done));
  open_ = Open::kNone;
  call_index_ = -1;
}

void ResponsesOutput::add_text(Open kind, const std::string& text, std::vector<Json>& events) {
  if (text.empty()) return;
  if (open_ != kind) open(kind, events);
  Json& part = items_.back()["content"][0];
  part["text"] = part["text"].get<std::string>() + text;
  Json delta = event(kind == Open::kReasoning ? "response.reasoning_text.delta" : "response.output_text.delta");
  delta["content_index"] = 0;
  delta["delta"] = text;
  if (kind == Open::kMessage) delta["logprobs"] = Json::array();
  events.push_back(std::move(delta));
}

void ResponsesOutput::release_held(std::vector<Json>& events) {
  if (!is_blank(held_)) add_text(Open::kMessage, held_, events);
  held_.clear();
}

void ResponsesOutput::push(const ChatDelta& delta, std::vector<Json>& events) {
  add_text(Open::kReasoning, delta.reasoning, events);
  if (hold_blank_ && open_ != Open::kMessage) {
    held_ += delta.content;
    // While a call is open, text waits: the call's arguments may still
    // follow it (qwen3_coder passes stray text between parameters on as
    // content), and a closed item cannot take more.
    if (open_ != Open::kCall && !is_blank(held_)) release_held(events);
  } else {
    add_text(Open::kMessage, delta.content, events);
  }
  for (const ToolCallDelta& call : delta.tool_calls) {
    if (call.name) {
      // Text held while the previous call was open goes between the two.
      close(events);
      release_held(events);
      open(Open::kCall, events, &call);
    } else if (open_ != Open::kCall || call.index != call_index_) {
      continue;  // parsers name a call before its arguments: nothing to add to
    }
    if (call.arguments.empty()) continue;
    Json& item = items_.back();
    item["arguments"] = item["arguments"].get<std::string>() + call.arguments;
    Json args = event("response.function_call_arguments.delta");
    args["delta"] = call.arguments;
    events.push_back(std::move(args));
  }
}

void ResponsesOutput::finish(std::vector<Json>& events) {
  close(events);
  release_held(events);
  close(events);
}

Json response_json(const std::string& id, int64_t created_at, const std::string& model, const ResponsesShape& shape,
                   std::string_view status, Json output, Json usage) {
  auto echoed = [&](const char* key) { return shape.echo.contains(key) ? shape.echo[key] : Json(nullptr); };
  Json r;
  r["id"] = id;
  r["object"] = "response";
  r["created_at"] = created_at;
  r["status"] = status;
  r["background"] = false;
  r["error"] = nullptr;
  r["incomplete_details"] = status == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
  r["instructions"] = echoed("instructions");
  r["max_output_tokens"] = echoed("max_output_tokens");
  r["max_tool_calls"] = echoed("max_tool_calls");
  r["model"] = model;
  r["output"] = std::move(output);
  r["parallel_tool_calls"] = echoed("parallel_tool_calls");
  r["previous_response_id"] = nullptr;
  r["reasoning"] = echoed("reasoning");
  r["service_tier"] = echoed("service_tier");
  r["store"] = false;
  r["temperature"] = echoed("temperature");
  r["text"] = echoed("text");
  r["tool_choice"] = echoed("tool_choice");
  r["tools"] = echoed("tools");
  r["top_logprobs"] = echoed("top_logprobs");
  r["top_p"] = echoed("top_p");
  r["truncation"] = echoed("truncation");
  r["usage"] = std::move(usage);
  r["user"] = echoed("user");
  r["metadata"] = echoed("metadata");
  return r;
}

Json responses_usage_json(const Usage& usage, int64_t reasoning_tokens) {
  return {{"input_tokens", usage.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", usage.cached_tokens.value_or(0)}}},
          {"output_tokens", usage.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

int64_t count_reasoning_tokens(std::span<const int32_t> output_ids, const ResponsesShape& shape) {
  if (!shape.reasoning_close) return 0;
  bool thinking = shape.starts_in_reasoning;
  int64_t n = 0;
  for (int32_t id : output_ids) {
    if (shape.reasoning_open && id == *shape.reasoning_open) {
      thinking = true;
    } else if (id == *shape.reasoning_close) {
      thinking = false;
    } else if (thinking) {
      ++n;
    }
  }
  return n;
}

}  // namespace hyllm::serve
