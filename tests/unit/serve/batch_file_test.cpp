#include <gtest/gtest.h>

#include <string>

#include "serve/batch_file.h"
#include "serve/json.h"

namespace hyllm::serve {
namespace {

BatchRequest request_of(const std::variant<BatchRequest, BatchLineError>& parsed) {
  if (const auto* error = std::get_if<BatchLineError>(&parsed)) {
    ADD_FAILURE() << "refused: " << error->message;
    return {};
  }
  return std::get<BatchRequest>(parsed);
}

BatchLineError error_of(const std::variant<BatchRequest, BatchLineError>& parsed) {
  if (std::holds_alternative<BatchRequest>(parsed)) {
    ADD_FAILURE() << "accepted a line that should be refused";
    return {};
  }
  return std::get<BatchLineError>(parsed);
}

TEST(BatchFile, RequestLinesSkipBlankLinesAndKeepTheirNumbers) {
  const std::string text = "\xEF\xBB\xBF{\"a\":1}\r\n\n   \t\n  {\"b\":2}  \n{\"c\":3}";
  const auto lines = batch_request_lines(text);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].number, 1u);
  EXPECT_EQ(lines[0].text, "{\"a\":1}");
  EXPECT_EQ(lines[1].number, 4u);
  EXPECT_EQ(lines[1].text, "{\"b\":2}");
  EXPECT_EQ(lines[2].number, 5u);
  EXPECT_EQ(lines[2].text, "{\"c\":3}");
  EXPECT_TRUE(batch_request_lines("").empty());
  EXPECT_TRUE(batch_request_lines("\n\r\n \n").empty());
}

TEST(BatchFile, ParsesAChatLine) {
  const std::string line =
      R"({"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions",)"
      R"( "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}})";
  const BatchRequest r = request_of(parse_batch_line(line));
  EXPECT_EQ(r.custom_id, "req-1");
  EXPECT_EQ(r.endpoint, BatchEndpoint::kChatCompletions);
  // The body is handed on as a client would POST it: the same object, in order.
  EXPECT_EQ(r.body, R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3})");
}

TEST(BatchFile, ParsesACompletionsLineWhateverTheCaseOfPost) {
  const BatchRequest r = request_of(parse_batch_line(
      R"({"custom_id": "c", "method": "post", "url": "/v1/completions", "body": {"prompt": "x", "stream": false}})"));
  EXPECT_EQ(r.endpoint, BatchEndpoint::kCompletions);
  EXPECT_EQ(r.body, R"({"prompt":"x","stream":false})");
}

TEST(BatchFile, ParsesAResponsesLine) {
  const BatchRequest r = request_of(parse_batch_line(
      R"({"custom_id": "r", "method": "POST", "url": "/v1/responses", "body": {"input": "hi"}})"));
  EXPECT_EQ(r.endpoint, BatchEndpoint::kResponses);
  EXPECT_EQ(r.body, R"({"input":"hi"})");
}

TEST(BatchFile, RefusesALineThatIsNotAJsonObject) {
  for (const char* line : {"not json", "{\"custom_id\": \"a\",", "[1, 2]", "\"text\"", "{\"a\": \xFF}"}) {
    const BatchLineError e = error_of(parse_batch_line(line));
    EXPECT_FALSE(e.custom_id.has_value()) << line;
    EXPECT_NE(e.message.find("Invalid batch request line"), std::string::npos) << e.message;
  }
}

TEST(BatchFile, RefusesANumberBeyondADoubleWithoutThrowing) {
  const std::string line =
      R"({"custom_id": "big", "method": "POST", "url": "/v1/completions", "body": {"temperature": 1e999}})";
  BatchLineError e;
  ASSERT_NO_THROW(e = error_of(parse_batch_line(line)));
  EXPECT_NE(e.message.find("number overflow"), std::string::npos) << e.message;
}

TEST(BatchFile, RefusesNestingDeeperThanRequestsMayHave) {
  const std::string deep = R"({"custom_id": "d", "body": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  const BatchLineError e = error_of(parse_batch_line(deep));
  EXPECT_NE(e.message.find("nesting"), std::string::npos) << e.message;
}

TEST(BatchFile, NeedsAStringCustomId) {
  for (const char* line : {R"({"method": "POST", "url": "/v1/completions", "body": {}})",
                           R"({"custom_id": 7, "method": "POST", "url": "/v1/completions", "body": {}})",
                           R"({"custom_id": null, "method": "POST", "url": "/v1/completions", "body": {}})"}) {
    const BatchLineError e = error_of(parse_batch_line(line));
    EXPECT_FALSE(e.custom_id.has_value()) << line;
    EXPECT_NE(e.message.find("custom_id"), std::string::npos) << e.message;
  }
}

TEST(BatchFile, RefusesAMethodOtherThanPostWithTheCustomId) {
  const BatchLineError e =
      error_of(parse_batch_line(R"({"custom_id": "g", "method": "GET", "url": "/v1/completions", "body": {}})"));
  EXPECT_EQ(e.custom_id, "g");
  EXPECT_NE(e.message.find("POST"), std::string::npos) << e.message;
  EXPECT_EQ(error_of(parse_batch_line(R"({"custom_id": "g", "url": "/v1/completions", "body": {}})")).custom_id, "g");
}

TEST(BatchFile, RefusesAnUnsupportedUrlNamingTheSupportedOnes) {
  const BatchLineError e = error_of(
      parse_batch_line(R"({"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}})"));
  EXPECT_EQ(e.custom_id, "e");
  EXPECT_EQ(e.message,
            "URL /v1/embeddings was used. Supported endpoints: /v1/chat/completions, /v1/completions, /v1/responses.");
  const BatchLineError missing = error_of(parse_batch_line(R"({"custom_id": "e", "method": "POST", "body": {}})"));
  EXPECT_NE(missing.message.find("url"), std::string::npos) << missing.message;
}

TEST(BatchFile, NeedsABodyObject) {
  for (const char* line : {R"({"custom_id": "b", "method": "POST", "url": "/v1/completions"})",
                           R"({"custom_id": "b", "method": "POST", "url": "/v1/completions", "body": "prompt"})"}) {
    const BatchLineError e = error_of(parse_batch_line(line));
    EXPECT_EQ(e.custom_id, "b");
    EXPECT_NE(e.message.find("body"), std::string::npos) << e.message;
  }
}

TEST(BatchFile, RefusesAStreamedRequestAsVllmDoes) {
  const BatchLineError e = error_of(parse_batch_line(R"({"custom_id": "s", "method": "POST",)"
                                                     R"( "url": "/v1/chat/completions", "body": {"stream": true}})"));
  EXPECT_EQ(e.custom_id, "s");
  EXPECT_EQ(e.message, "Request must not be sent in stream mode");
  // A stream value of the wrong type is the endpoint's to refuse, with its 400.
  request_of(parse_batch_line(
      R"({"custom_id": "s", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "stream": "yes"}})"));
}

TEST(BatchFile, AnsweredLineCarriesTheBodyAndNoError) {
  const std::string body = R"({"id":"cmpl-1","choices":[{"text":"x","logprobs":null}],"usage":{"prompt_tokens":1}})";
  const std::string line = batch_response_line("req \"1\"", 200, body);
  const Json out = Json::parse(line);
  ASSERT_TRUE(out.is_object());
  std::vector<std::string> keys;
  for (const auto& [k, v] : out.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"id", "custom_id", "response", "error"}));
  EXPECT_TRUE(out["id"].get<std::string>().starts_with("hyllm-"));
  EXPECT_EQ(out["custom_id"], "req \"1\"");
  EXPECT_EQ(out["response"]["status_code"], 200);
  EXPECT_TRUE(out["response"]["request_id"].get<std::string>().starts_with("hyllm-batch-"));
  EXPECT_TRUE(out["error"].is_null());
  // Spliced as written: byte for byte the endpoint's body.
  EXPECT_NE(line.find("\"body\":" + body + "}"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(BatchFile, RefusedRequestCarriesTheEndpointErrorObject) {
  const std::string error =
      R"({"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}})";
  const Json out = Json::parse(batch_response_line("r", 404, error));
  EXPECT_EQ(out["response"]["status_code"], 404);
  EXPECT_TRUE(out["response"]["body"].is_null());
  EXPECT_EQ(out["error"], Json::parse(error));
}

TEST(BatchFile, RejectedLineCarriesItsReasonAsAString) {
  const Json out = Json::parse(batch_rejection_line(std::nullopt, "Line 3: not \"JSON\" ✓"));
  EXPECT_TRUE(out["custom_id"].is_null());
  EXPECT_EQ(out["response"]["status_code"], 400);
  EXPECT_TRUE(out["response"]["body"].is_null());
  EXPECT_EQ(out["error"], "Line 3: not \"JSON\" ✓");
  EXPECT_EQ(Json::parse(batch_rejection_line("k", "m"))["custom_id"], "k");
}

TEST(BatchFile, EveryLineGetsItsOwnIds) {
  const Json a = Json::parse(batch_rejection_line("k", "m"));
  const Json b = Json::parse(batch_rejection_line("k", "m"));
  EXPECT_NE(a["id"], b["id"]);
  EXPECT_NE(a["response"]["request_id"], b["response"]["request_id"]);
  EXPECT_NE(a["id"], a["response"]["request_id"]);
}

}  // namespace
}  // namespace hyllm::serve
