#pragma once
// Server-sent events as OpenAI streams them: every event is one
// "data: <json>" line and a blank line; the stream ends with "data: [DONE]".
// An error after the 200 header goes out as one error event, then [DONE].

#include "serve/json.h"

#include <string>

namespace hyllm::serve {

class ApiError;

std::string sse_event(const Json& payload);
std::string sse_error(const ApiError& error);
inline const std::string& sse_done() {
  static const std::string done = "data: [DONE]\n\n";
  return done;
}

}  // namespace hyllm::serve
