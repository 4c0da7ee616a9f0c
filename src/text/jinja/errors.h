#pragma once
// Failures inside the interpreter. They carry the source position of the
// innermost node that failed; Template turns them into hyllm::Error with a
// "line L, column C" prefix at the API boundary.

#include <fmt/format.h>

#include <exception>
#include <string>
#include <utility>

#include "util/status.h"

namespace hyllm::jinja {

struct SourcePos {
  int line = 0;    // 1-based; 0 means unknown
  int column = 0;  // 1-based, in bytes
};

class TemplateError : public std::exception {
 public:
  TemplateError(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const SourcePos& pos() const { return pos_; }
  bool has_pos() const { return pos_.line > 0; }
  void set_pos(SourcePos pos) { pos_ = pos; }

 private:
  ErrorCode code_;
  std::string message_;
  SourcePos pos_;
};

// A render-time failure (TypeError, UndefinedError, raise_exception ...).
template <typename... Args>
[[noreturn]] void render_fail(fmt::format_string<Args...> f, Args&&... args) {
  throw TemplateError(ErrorCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}

// A sandbox cap was hit.
template <typename... Args>
[[noreturn]] void cap_fail(fmt::format_string<Args...> f, Args&&... args) {
  throw TemplateError(ErrorCode::kResourceExhausted, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace hyllm::jinja
