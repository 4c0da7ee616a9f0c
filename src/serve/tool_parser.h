#pragma once
// --tool-call-parser: tool calls in the model's text become the message's
// `tool_calls`, as vLLM's parsers of the same names do.
//
//   qwen3_coder  <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//                (Qwen3.5/3.6, Qwen3-Coder); VALUE is converted by the type
//                the tool's JSON schema gives ARG (string, integer, number,
//                boolean, object, array, null), else taken as JSON when it
//                parses and as a string when not.
//   hermes       <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>  (Qwen3, Hermes)
//
// Streaming: text outside calls passes through at once (a possible start of
// "<tool_call>" is held back); a call is announced with its index, id, type
// and name as soon as the name is known, and its arguments follow as
// fragments of one JSON object, which concatenated (as the openai clients
// do) give the whole arguments. A call that turns out malformed before
// anything of it was announced stays in `content`, whole: nothing is lost.
// Calls to functions that are not among the tools are still reported (the
// client decides), with their arguments taken as JSON or strings.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/json.h"

namespace hyllm::serve {

struct ToolCallDelta {
  int index = 0;                    // among this choice's calls
  std::optional<std::string> id;    // with the first delta of a call
  std::optional<std::string> name;  // with the first delta of a call
  std::string arguments;            // a fragment; may be empty
};

struct ToolParse {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  virtual ToolParse push(std::string_view text) = 0;
  // The output ended: flushes held-back text; an unfinished call that was
  // announced is closed with what it has.
  virtual ToolParse finish() = 0;
  int num_calls() const { return num_calls_; }

 protected:
  int num_calls_ = 0;
};

// Known names: "qwen3_coder", "hermes". tools: the request's `tools` list
// (for parameter types). Null for an unknown name.
std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name, const Json& tools);
bool is_tool_call_parser(std::string_view name);

// The structural tag (xgrammar JSON) that makes a model write calls in this
// parser's format: one call of `only_tool` when given (named tool_choice),
// else one or more calls (only one unless parallel) of any of `tools`
// (tool_choice "required").
std::string forced_tool_calls_structural_tag(std::string_view parser, const Json& tools,
                                             const std::string* only_tool, bool parallel);

// "chatcmpl-tool-" and 32 random hex digits, as vLLM's ids.
std::string make_tool_call_id();

}  // namespace hyllm::serve
