#pragma once
// The OpenAI Batch API file format, as `vllm run-batch` reads and writes it.
// Each input line is one request:
//   {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {...}}
// and each output line, in input order, its answer:
//   {"id": "hyllm-...", "custom_id": "a",
//    "response": {"status_code": 200, "request_id": "hyllm-batch-...", "body": {...}}, "error": null}
// A request the endpoint refused keeps the endpoint's status, a null body, and
// the endpoint's error object ({"error": {"message", "type", "param", "code"}})
// in `error`. A line that never reached an endpoint (not JSON, a missing
// field, an unsupported url, a streamed request) gets status 400, a null body,
// and its reason as a string in `error`. Both are what vLLM writes.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hyllm::serve {

enum class BatchEndpoint { kChatCompletions, kCompletions, kResponses };

struct BatchRequest {
  std::string custom_id;
  BatchEndpoint endpoint = BatchEndpoint::kChatCompletions;
  std::string body;  // the body object printed as JSON: what a client would POST
};

// Why a line cannot be run, with its custom_id when the line names one.
struct BatchLineError {
  std::optional<std::string> custom_id;
  std::string message;
};

struct BatchFileLine {
  size_t number = 0;      // 1-based, counting blank lines: where an editor shows it
  std::string_view text;  // without surrounding whitespace (nor a carriage return)
};

// The lines of an input file that carry requests: blank lines are skipped,
// as vLLM skips them, and a UTF-8 byte order mark at the start is ignored.
std::vector<BatchFileLine> batch_request_lines(std::string_view file_text);

// Reads one request line. Never throws for bad input: every way a line can be
// wrong comes back as a BatchLineError.
std::variant<BatchRequest, BatchLineError> parse_batch_line(std::string_view line);

// The output line (no newline) for an endpoint's answer: its status and its
// JSON body as written, the response on 200 and the error object otherwise.
// `response_json` must be one JSON value.
std::string batch_response_line(const std::string& custom_id, int status_code, std::string_view response_json);

// The output line (no newline) for a line that never reached an endpoint.
std::string batch_rejection_line(const std::optional<std::string>& custom_id, std::string_view message);

}  // namespace hyllm::serve
