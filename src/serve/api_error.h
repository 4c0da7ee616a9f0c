#pragma once
// Errors as the OpenAI API shapes them, with vLLM's status codes and types:
//   {"error": {"message": ..., "type": "BadRequestError", "param": ..., "code": 400}}
// Handlers throw ApiError; anything else that escapes a handler is mapped by
// api_error_from_exception so that one bad request never takes the server down.

#include "serve/json.h"

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include "util/status.h"

namespace hyllm::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::optional<std::string> param = std::nullopt)
      : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)) {}

  int status() const { return status_; }
  const std::optional<std::string>& param() const { return param_; }
  // The OpenAI-style type name for the status (BadRequestError, NotFoundError, ...).
  const char* type() const;
  Json to_json() const;
  std::string body() const;  // to_json() printed; never throws on bad UTF-8

 private:
  int status_;
  std::optional<std::string> param_;
};

// 400 with the offending field named.
ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt);
// 404 "The model `X` does not exist."
ApiError model_not_found(const std::string& model);
ApiError unauthorized();
ApiError unavailable(std::string message);

// Maps hyllm::Error codes to HTTP: user input -> 400, missing -> 404,
// unavailable -> 503, everything else -> 500 (the message is kept: it names
// what failed, never secrets).
ApiError api_error_from(const Error& e);
ApiError api_error_from_exception(std::exception_ptr ep);

const char* error_type_for_status(int status);

}  // namespace hyllm::serve
