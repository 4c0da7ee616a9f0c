#include "serve/chat_output.h"

namespace hyllm::serve {

void ChatDelta::append(ChatDelta&& more) {
  reasoning += more.reasoning;
  content += more.content;
  for (auto& d : more.tool_calls) tool_calls.push_back(std::move(d));
}

ChatOutputParser::ChatOutputParser(const ChatOutputOptions& options) : parallel_(options.parallel_tool_calls) {
  if (options.reasoning) reasoning_.emplace(*options.reasoning, options.reasoning_start);
  if (!options.tool_parser.empty()) tools_ = make_tool_call_parser(options.tool_parser, options.tools);
}

ChatDelta ChatOutputParser::route(std::string reasoning, std::string content, bool at_end) {
  ChatDelta out;
  out.reasoning = std::move(reasoning);
  if (!tools_) {
    out.content = std::move(content);
    return out;
  }
  ToolParse parsed = tools_->push(content);
  if (at_end) {
    ToolParse rest = tools_->finish();
    parsed.content += rest.content;
    for (auto& d : rest.calls) parsed.calls.push_back(std::move(d));
  }
  out.content = std::move(parsed.content);
  for (auto& d : parsed.calls) {
    if (!parallel_ && d.index > 0) continue;
    out.tool_calls.push_back(std::move(d));
  }
  return out;
}

ChatDelta ChatOutputParser::push(std::string_view text) {
  if (!reasoning_) return route({}, std::string(text), false);
  ReasoningPiece piece = reasoning_->push(text);
  return route(std::move(piece.reasoning), std::move(piece.content), false);
}

ChatDelta ChatOutputParser::finish() {
  if (!reasoning_) return route({}, {}, true);
  ReasoningPiece piece = reasoning_->finish();
  return route(std::move(piece.reasoning), std::move(piece.content), true);
}

Json tool_calls_json(const std::vector<ToolCallDelta>& deltas) {
  Json calls = Json::array();
  for (const auto& d : deltas) {
    while (calls.size() <= static_cast<size_t>(d.index)) {
      calls.push_back({{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
    }
    Json& c = calls[static_cast<size_t>(d.index)];
    if (d.id) c["id"] = *d.id;
    if (d.name) c["function"]["name"] = *d.name;
    c["function"]["arguments"] = c["function"]["arguments"].get<std::string>() + d.arguments;
  }
  return calls;
}

}  // namespace hyllm::serve
