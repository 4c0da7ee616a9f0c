#pragma once
// Errors. Code that cannot continue throws hyllm::Error with a code that the
// server maps to an HTTP status and the CLI to an exit message; functions that
// expect failure as a normal outcome return Result<T>.

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace hyllm {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,    // bad user input: CLI flag, request field, prompt
  kNotFound,           // missing file, model, tensor
  kCorruptData,        // malformed model, tokenizer or checkpoint file
  kUnsupported,        // valid input that hyllm does not handle
  kOutOfMemory,        // device or host allocation failed, cache exhausted
  kResourceExhausted,  // a configured cap was hit
  kUnavailable,        // loading, draining or dead
  kCancelled,
  kInternal,           // a bug: an invariant did not hold
  kIo,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Throws Error(code, formatted message).
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }
  static Status from(const Error& e) { return {e.code(), e.what()}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Throws when not ok.
  void check() const {
    if (!is_ok()) throw Error(code_, message_);
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// A value or a non-ok Status (std::expected is C++23).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {
    if (std::get<Status>(v_).is_ok()) v_ = Status(ErrorCode::kInternal, "Result built from an ok Status");
  }
  Result(const Error& e) : v_(Status::from(e)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    if (!ok()) std::get<Status>(v_).check();
    return std::get<T>(v_);
  }
  const T& value() const& {
    if (!ok()) std::get<Status>(v_).check();
    return std::get<T>(v_);
  }
  T&& value() && {
    if (!ok()) std::get<Status>(v_).check();
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hyllm

// Invariant checks that stay on in release builds: a violated one is a bug,
// reported as kInternal with the location.
#define HYLLM_CHECK(cond, ...)                                                       \
  do {                                                                               \
    if (!(cond)) [[unlikely]] {                                                      \
      ::hyllm::fail(::hyllm::ErrorCode::kInternal, "{}:{}: check failed: {}: {}",    \
                    __FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__));         \
    }                                                                                \
  } while (0)
