#include "serve/reasoning_parser.h"

#include <algorithm>

namespace hyllm::serve {
namespace {

constexpr std::string_view kToolCall = "<tool_call>";
constexpr std::string_view kFunction = "<function";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

// Where an implicit end (<tool_call> then whitespace then <function) starts in
// `text`: {position, complete}. complete is false when the text ends while
// the pattern may still complete; position is npos when there is none.
std::pair<size_t, bool> find_tool_call_start(std::string_view text) {
  size_t from = 0;
  while (true) {
    const size_t at = text.find(kToolCall, from);
    if (at == std::string_view::npos) {
      const size_t partial = partial_suffix(text, kToolCall);
      return partial ? std::pair{text.size() - partial, false} : std::pair{std::string_view::npos, true};
    }
    size_t i = at + kToolCall.size();
    while (i < text.size() && is_space(text[i])) ++i;
    const std::string_view rest = text.substr(i);
    if (rest.size() >= kFunction.size()) {
      if (rest.substr(0, kFunction.size()) == kFunction) return {at, true};
    } else if (kFunction.substr(0, rest.size()) == rest) {
      return {at, false};
    }
    from = at + 1;
  }
}

}  // namespace

std::optional<ReasoningSyntax> reasoning_syntax(std::string_view name) {
  ReasoningSyntax s;
  if (name == "qwen3") {
    s.tool_call_ends_reasoning = true;
    s.default_start = ReasoningStart::kMayOpen;
    return s;
  }
  if (name == "deepseek_r1") {
    s.default_start = ReasoningStart::kReasoning;
    return s;
  }
  return std::nullopt;
}

ReasoningStart reasoning_start(const ReasoningSyntax& syntax, std::string_view prompt) {
  const size_t open = prompt.rfind(syntax.open), close = prompt.rfind(syntax.close);
  // Only the generation prompt counts: a think block of an earlier turn is
  // followed by that turn's end, so look at the text after the last tag.
  const auto tail_is_generation_prompt = [&](size_t tag_end) {
    const std::string_view tail = prompt.substr(tag_end);
    return std::all_of(tail.begin(), tail.end(), is_space);
  };
  if (open != std::string_view::npos && (close == std::string_view::npos || open > close) &&
      tail_is_generation_prompt(open + syntax.open.size())) {
    return ReasoningStart::kReasoning;
  }
  if (close != std::string_view::npos && (open == std::string_view::npos || close > open) &&
      tail_is_generation_prompt(close + syntax.close.size())) {
    return ReasoningStart::kContent;
  }
  return syntax.default_start;
}

ReasoningSplitter::ReasoningSplitter(ReasoningSyntax syntax, ReasoningStart start) : syntax_(std::move(syntax)) {
  state_ = start == ReasoningStart::kReasoning ? State::kReasoning
           : start == ReasoningStart::kContent ? State::kContent
                                                : State::kMayOpen;
}

ReasoningPiece ReasoningSplitter::push(std::string_view text) {
  pending_ += text;
  return drain(false);
}

ReasoningPiece ReasoningSplitter::finish() { return drain(true); }

ReasoningPiece ReasoningSplitter::drain(bool at_end) {
  ReasoningPiece out;
  for (;;) {
    if (state_ == State::kContent) {
      out.content += pending_;
      pending_.clear();
      return out;
    }
    if (state_ == State::kMayOpen) {
      // Leading whitespace may precede the opening tag.
      size_t i = 0;
      while (i < pending_.size() && is_space(pending_[i])) ++i;
      const std::string_view rest = std::string_view(pending_).substr(i);
      if (rest.size() >= syntax_.open.size() && rest.substr(0, syntax_.open.size()) == syntax_.open) {
        pending_.erase(0, i + syntax_.open.size());
        state_ = State::kReasoning;
        continue;
      }
      if (!at_end && std::string_view(syntax_.open).substr(0, rest.size()) == rest) return out;  // undecided
      state_ = State::kContent;
      continue;
    }
    // In reasoning: look for the closing tag (or an implicit end).
    const size_t close = pending_.find(syntax_.close);
    size_t implicit = std::string_view::npos;
    bool implicit_complete = true;
    if (syntax_.tool_call_ends_reasoning) {
      std::tie(implicit, implicit_complete) = find_tool_call_start(pending_);
    }
    if (close != std::string::npos && (implicit == std::string_view::npos || close < implicit)) {
      out.reasoning += pending_.substr(0, close);
      pending_.erase(0, close + syntax_.close.size());
      state_ = State::kContent;
      continue;
    }
    if (implicit != std::string_view::npos && (implicit_complete || at_end)) {
      if (implicit_complete) {
        out.reasoning += pending_.substr(0, implicit);
        pending_.erase(0, implicit);
        state_ = State::kContent;
        continue;
      }
    }
    if (at_end) {
      out.reasoning += pending_;
      pending_.clear();
      return out;
    }
    size_t keep = partial_suffix(pending_, syntax_.close);
    if (implicit != std::string_view::npos) keep = std::max(keep, pending_.size() - implicit);
    out.reasoning += pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
  }
}

}  // namespace hyllm::serve
