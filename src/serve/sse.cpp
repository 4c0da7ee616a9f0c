#include "serve/sse.h"

#include "serve/api_error.h"
#include "serve/openai_json.h"

namespace hyllm::serve {

std::string sse_event(const Json& payload) {
  // dump_json never emits a raw newline (they are escaped inside strings),
  // so the event is always exactly one data line.
  std::string out = "data: ";
  out += dump_json(payload);
  out += "\n\n";
  return out;
}

std::string sse_error(const ApiError& error) { return sse_event(error.to_json()); }

}  // namespace hyllm::serve
