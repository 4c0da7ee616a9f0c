#pragma once
// One chat choice's text, split the way the server was configured: reasoning
// first (--reasoning-parser), then tool calls out of the content
// (--tool-call-parser). Used for streamed deltas and whole messages alike,
// so both give the same result.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/json.h"
#include "serve/reasoning_parser.h"
#include "serve/tool_parser.h"

namespace hyllm::serve {

struct ChatOutputOptions {
  std::optional<ReasoningSyntax> reasoning;  // unset: no reasoning split
  ReasoningStart reasoning_start = ReasoningStart::kContent;
  std::string tool_parser;                   // empty: tool calls are not parsed
  Json tools;                                // the request's tools (parameter types)
  bool parallel_tool_calls = true;           // false: only the first call is reported
  bool enabled() const { return reasoning.has_value() || !tool_parser.empty(); }
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(ChatDelta&& more);
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputOptions& options);
  ChatDelta push(std::string_view text);
  ChatDelta finish();
  bool called_tools() const { return tools_ && tools_->num_calls() > 0; }

 private:
  ChatDelta route(std::string reasoning, std::string content, bool at_end);
  std::optional<ReasoningSplitter> reasoning_;
  std::unique_ptr<ToolCallParser> tools_;
  bool parallel_ = true;
};

// A whole message's fields from its accumulated deltas: tool_calls entries
// {id, type, function: {name, arguments}} as the openai client builds them.
Json tool_calls_json(const std::vector<ToolCallDelta>& deltas);

}  // namespace hyllm::serve
