#include "serve/batch_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "serve/api_error.h"
#include "serve/json.h"
#include "serve/json_fields.h"
#include "serve/openai_json.h"

namespace hyllm::serve {
namespace {

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
constexpr std::string_view kSupportedUrls = "/v1/chat/completions, /v1/completions, /v1/responses";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// The line's fields in the order vLLM's output model prints them; the two
// JSON texts are spliced in as they are, so a response body is byte for byte
// what the HTTP endpoint sends.
std::string output_line(const std::optional<std::string>& custom_id, int status_code, std::string_view body_json,
                        std::string_view error_json) {
  const std::string custom = custom_id ? dump_json(Json(*custom_id)) : "null";
  return fmt::format(R"({{"id":"{}","custom_id":{},"response":{{"status_code":{},"request_id":"{}","body":{}}},)"
                     R"("error":{}}})",
                     make_request_id("hyllm-"), custom, status_code, make_request_id("hyllm-batch-"), body_json,
                     error_json);
}

}  // namespace

std::vector<BatchFileLine> batch_request_lines(std::string_view file_text) {
  if (file_text.starts_with(kByteOrderMark)) file_text.remove_prefix(kByteOrderMark.size());
  std::vector<BatchFileLine> lines;
  for (size_t number = 1; !file_text.empty(); ++number) {
    const size_t end = file_text.find('\n');
    const std::string_view line = trim(file_text.substr(0, end));
    if (!line.empty()) lines.push_back({number, line});
    if (end == std::string_view::npos) break;
    file_text.remove_prefix(end + 1);
  }
  return lines;
}

std::variant<BatchRequest, BatchLineError> parse_batch_line(std::string_view line) {
  Json parsed;
  try {
    parsed = parse_request_json(line);
  } catch (const ApiError& e) {
    return BatchLineError{std::nullopt, fmt::format("Invalid batch request line: {}", e.what())};
  }
  const FieldReader fields(parsed);
  BatchLineError error;
  const Json* custom_id = fields.get("custom_id");
  if (!custom_id || !custom_id->is_string()) {
    error.message = "custom_id: a string is required";
    return error;
  }
  error.custom_id = custom_id->get<std::string>();

  const Json* method = fields.get("method");
  if (!method || !method->is_string() || !equals_ignoring_case(method->get_ref<const std::string&>(), "POST")) {
    error.message = "method: only POST is supported";
    return error;
  }
  const Json* url = fields.get("url");
  if (!url || !url->is_string()) {
    error.message = fmt::format("url: a string is required (supported endpoints: {})", kSupportedUrls);
    return error;
  }
  BatchRequest request;
  const std::string& path = url->get_ref<const std::string&>();
  if (path == "/v1/chat/completions") {
    request.endpoint = BatchEndpoint::kChatCompletions;
  } else if (path == "/v1/completions") {
    request.endpoint = BatchEndpoint::kCompletions;
  } else if (path == "/v1/responses") {
    request.endpoint = BatchEndpoint::kResponses;
  } else {
    error.message = fmt::format("URL {} was used. Supported endpoints: {}.", path, kSupportedUrls);
    return error;
  }
  const Json* body = fields.get("body");
  if (!body || !body->is_object()) {
    error.message = "body: the endpoint's request, a JSON object, is required";
    return error;
  }
  // The engine runs every line of the file at once and the output file holds
  // whole responses: there is nothing to stream to.
  const Json* stream = FieldReader(*body).get("stream");
  if (stream && stream->is_boolean() && stream->get<bool>()) {
    error.message = "Request must not be sent in stream mode";
    return error;
  }
  request.custom_id = std::move(*error.custom_id);
  request.body = dump_json(*body);
  return request;
}

std::string batch_response_line(const std::string& custom_id, int status_code, std::string_view response_json) {
  if (status_code == 200) return output_line(custom_id, status_code, response_json, "null");
  return output_line(custom_id, status_code, "null", response_json);
}

std::string batch_rejection_line(const std::optional<std::string>& custom_id, std::string_view message) {
  return output_line(custom_id, 400, "null", dump_json(Json(std::string(message))));
}

}  // namespace hyllm::serve
