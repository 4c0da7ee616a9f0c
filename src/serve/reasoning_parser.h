#pragma once
// --reasoning-parser: the model's reasoning (between <think> and </think>)
// goes to the message's `reasoning` field, the rest to `content`, as vLLM's
// qwen3 and deepseek_r1 parsers do. Streaming-safe: text that may be the
// start of a tag is held back until the next piece decides it.
//
// Where the output starts is decided from the prompt: a template that opens
// the think block in the prompt (Qwen3.5 with thinking on: "...<think>\n")
// starts the output in reasoning; one that closes it there (thinking off:
// "<think>\n\n</think>\n\n") starts it in content. Otherwise:
//  - qwen3: content, unless the output itself opens with <think>;
//  - deepseek_r1: reasoning until </think> (R1 may omit the opening tag).
// Inside reasoning, "<tool_call>" followed by "<function" also ends it: Qwen3.5
// sometimes starts a tool call without closing its thought (vLLM does the same).

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hyllm::serve {

enum class ReasoningStart { kContent, kReasoning, kMayOpen };

struct ReasoningSyntax {
  std::string open = "<think>";
  std::string close = "</think>";
  bool tool_call_ends_reasoning = false;  // qwen3
  ReasoningStart default_start = ReasoningStart::kMayOpen;
};

// Known names: "qwen3", "deepseek_r1". nullopt otherwise.
std::optional<ReasoningSyntax> reasoning_syntax(std::string_view parser_name);
// How the output starts after `prompt_text` (the rendered prompt's tail is enough).
ReasoningStart reasoning_start(const ReasoningSyntax& syntax, std::string_view prompt_text);

struct ReasoningPiece {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningSyntax syntax, ReasoningStart start);
  ReasoningPiece push(std::string_view text);
  // The output ended: releases what was held back.
  ReasoningPiece finish();
  bool in_reasoning() const { return state_ == State::kReasoning; }

 private:
  enum class State { kMayOpen, kReasoning, kContent };
  ReasoningPiece drain(bool at_end);
  ReasoningSyntax syntax_;
  State state_;
  std::string pending_;
};

}  // namespace hyllm::serve
