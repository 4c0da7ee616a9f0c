// `hyllm run-batch` input files (serve/batch_file.h): the input is a whole
// file, split into request lines and each line parsed, as the command does
// before any line reaches an endpoint.
//
// Checked, against an independent reading of the same bytes: the request
// lines are exactly the file's non-blank lines (after a leading byte order
// mark), in order, trimmed, with their 1-based line numbers; parsing a line
// never throws (its contract: every fault is a BatchLineError); an accepted
// line has a string custom_id, a supported url and a body that is a JSON
// object that does not ask to stream, and the body handed on parses as the
// endpoint would read it; and the output line for either outcome is one line
// of JSON that carries the custom_id back.

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "serve/batch_file.h"
#include "serve/json.h"
#include "serve/json_fields.h"
#include "fuzz_util.h"

using namespace hyllm;
using namespace hyllm::serve;

namespace {

bool is_blank_char(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

// The oracle: (line number, trimmed text) of every line with a non-blank byte.
std::vector<std::pair<size_t, std::string_view>> expected_lines(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  std::vector<std::pair<size_t, std::string_view>> out;
  size_t number = 1;
  size_t begin = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n') continue;
    size_t b = begin, e = i;
    while (b < e && is_blank_char(text[b])) ++b;
    while (e > b && is_blank_char(text[e - 1])) --e;
    if (e > b) out.emplace_back(number, text.substr(b, e - b));
    ++number;
    begin = i + 1;
  }
  return out;
}

// One output line: no newline inside, one JSON object, the custom_id back.
void check_output_line(const std::string& line, const std::optional<std::string>& custom_id, int status) {
  if (line.find('\n') != std::string::npos) fuzz::finding("an output line holds a newline");
  Json out;
  try {
    out = Json::parse(line);
  } catch (const Json::exception&) {
    fuzz::finding("an output line is not JSON");
  }
  if (!out.is_object() || out["response"]["status_code"] != status) fuzz::finding("an output line lost its status");
  if (custom_id ? out["custom_id"] != *custom_id : !out["custom_id"].is_null()) {
    fuzz::finding("an output line does not carry its custom_id");
  }
}

void check_line(std::string_view text) {
  std::variant<BatchRequest, BatchLineError> parsed;
  try {
    parsed = parse_batch_line(text);
  } catch (const std::exception& e) {
    fuzz::finding(e.what());
  }
  if (const auto* error = std::get_if<BatchLineError>(&parsed)) {
    if (error->message.empty()) fuzz::finding("a refused line without a reason");
    check_output_line(batch_rejection_line(error->custom_id, error->message), error->custom_id, 400);
    return;
  }
  const auto& request = std::get<BatchRequest>(parsed);
  // A line is accepted only with what parse_batch_line promises; read back
  // from the line itself, which must be the JSON object it was.
  const Json line = Json::parse(text);
  if (!line.is_object() || line["custom_id"] != request.custom_id) fuzz::finding("accepted without its custom_id");
  static constexpr const char* kUrls[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses"};
  if (line["url"] != kUrls[static_cast<int>(request.endpoint)]) fuzz::finding("accepted for the wrong endpoint");
  Json body;
  try {
    body = parse_request_json(request.body);
  } catch (const std::exception&) {
    fuzz::finding("the body handed on does not parse as a request");
  }
  if (body != line["body"]) fuzz::finding("the body handed on is not the line's body");
  if (body.contains("stream") && body["stream"] == true) fuzz::finding("a streamed request was accepted");
  check_output_line(batch_response_line(request.custom_id, 200, request.body), request.custom_id, 200);
  check_output_line(batch_response_line(request.custom_id, 400, R"({"error":{"message":"x"}})"), request.custom_id,
                    400);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  const std::vector<BatchFileLine> lines = batch_request_lines(text);
  const auto expected = expected_lines(text);
  if (lines.size() != expected.size()) fuzz::finding("request lines differ from the file's non-blank lines");
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].number != expected[i].first || lines[i].text != expected[i].second) {
      fuzz::finding("a request line differs from the file's line");
    }
    check_line(lines[i].text);
  }
  return 0;
}
