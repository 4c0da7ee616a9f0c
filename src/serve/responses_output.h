#pragma once
// A response's output items and the stream events that build them, from one
// choice's parsed text (ChatDelta: reasoning, content, tool calls). Items
// follow the order the model writes them:
//
//   {type: "reasoning", id: "rs_...", summary: [], content: [{type: "reasoning_text", text}]}
//   {type: "message", id: "msg_...", role: "assistant", content: [{type: "output_text", text, annotations: []}]}
//   {type: "function_call", id: "fc_...", call_id: "call_...", name, arguments}
//
// Each item is announced (response.output_item.added, and for text a
// response.content_part.added), grows by deltas (response.reasoning_text.delta,
// response.output_text.delta, response.function_call_arguments.delta), and is
// closed when the next one starts or the output ends (the matching .done
// events, then response.output_item.done with the whole item). A whole
// response pushes its text as one delta through the same machine, so its
// items say what a stream's say; only their interleaving can differ, since
// one delta lists its text before its calls (text the model wrote between
// or inside calls comes first in a whole response). Text that arrives while
// a call is open waits until the call closes. Events carry a
// sequence_number of 0 for the writer to number.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serve/chat_output.h"
#include "serve/json.h"
#include "serve/openai_json.h"

namespace hyllm::serve {

class ResponsesOutput {
 public:
  // hold_blank_text: whitespace-only text before any message is held back
  // and dropped when a tool call follows it (models put newlines before a
  // call; an item of blanks is noise), as vLLM does when it parses tools.
  explicit ResponsesOutput(bool hold_blank_text = false) : hold_blank_(hold_blank_text) {}

  void push(const ChatDelta& delta, std::vector<Json>& events);
  // Closes the open item: the output has ended.
  void finish(std::vector<Json>& events);
  // The items so far; an item still open is listed as it stands.
  const Json& items() const { return items_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  void open(Open kind, std::vector<Json>& events, const ToolCallDelta* call = nullptr);
  void close(std::vector<Json>& events);
  void add_text(Open kind, const std::string& text, std::vector<Json>& events);
  // Writes held text as a message unless it is blank, and forgets it.
  void release_held(std::vector<Json>& events);
  Json event(const char* type) const;

  bool hold_blank_;
  std::string held_;    // blank text, or text that came while a call was open (hold_blank_)
  Open open_ = Open::kNone;
  int call_index_ = -1;  // the open call's index among the choice's calls
  Json items_ = Json::array();
};

// The response's fields that come from the request, filled by the handler:
// what ResponsesRequest::echo holds, plus the resolved temperature, top_p and
// max_output_tokens.
struct ResponsesShape {
  Json echo = Json::object();
  // Token ids that open and close the model's reasoning, to count reasoning
  // tokens; unset when the server runs no reasoning parser.
  std::optional<int32_t> reasoning_open;
  std::optional<int32_t> reasoning_close;
  bool starts_in_reasoning = false;
};

// status: "in_progress" (no usage yet), "completed", "incomplete" (the
// output-token limit stopped it: incomplete_details names it), "cancelled".
Json response_json(const std::string& id, int64_t created_at, const std::string& model, const ResponsesShape& shape,
                   std::string_view status, Json output, Json usage);

// {input_tokens, input_tokens_details: {cached_tokens}, output_tokens,
//  output_tokens_details: {reasoning_tokens}, total_tokens}
Json responses_usage_json(const Usage& usage, int64_t reasoning_tokens);

// Output tokens spent thinking: those between the reasoning's open and close
// tokens (the tags themselves not counted), from the start when the prompt
// left the model thinking.
int64_t count_reasoning_tokens(std::span<const int32_t> output_ids, const ResponsesShape& shape);

}  // namespace hyllm::serve
