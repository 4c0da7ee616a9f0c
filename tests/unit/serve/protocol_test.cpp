#include <gtest/gtest.h>

#include <chrono>

#include "serve/api_error.h"
#include "serve/chat_request.h"
#include "serve/completion_request.h"
#include "serve/json_fields.h"
#include "serve/sampling_request.h"

namespace hyllm::serve {
namespace {

using json = Json;

// Runs fn and returns the ApiError it throws (fails the test if none).
template <typename F>
ApiError expect_api_error(F&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "");
}

CompletionRequest completion(const char* text) { return parse_completion_request(json::parse(text)); }
ChatRequest chat(const char* text) { return parse_chat_request(json::parse(text)); }

TEST(RequestJson, RejectsNonObjectsAndDeepNesting) {
  EXPECT_EQ(expect_api_error([] { parse_request_json("[1,2]"); }).status(), 400);
  EXPECT_EQ(expect_api_error([] { parse_request_json("{\"a\":"); }).status(), 400);
  std::string deep(200, '[');
  deep = "{\"a\":" + deep + std::string(200, ']') + "}";
  auto e = expect_api_error([&] { parse_request_json(deep); });
  EXPECT_NE(std::string(e.what()).find("nesting"), std::string::npos);
  EXPECT_TRUE(parse_request_json("{\"a\": [[1]]}").is_object());
}

// A long flat array of objects: the depth callback of nlohmann's parser
// rescans the enclosing array at every closing brace, which took minutes for
// a few megabytes. Linear parsing takes well under a second; the bound is
// 100 times that, so a loaded machine cannot fail it.
TEST(RequestJson, LongFlatArraysParseInLinearTime) {
  std::string body = R"({"prompt": "hi", "x": [)";
  for (int i = 0; i < 1000000; ++i) body += i ? ",{}" : "{}";
  body += "]}";
  const auto t0 = std::chrono::steady_clock::now();
  const Json j = parse_request_json(body);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(j["x"].size(), 1000000u);
  EXPECT_LT(seconds, 20.0);
}

TEST(RequestJson, RefusesANumberBeyondADoubleAsBadJson) {
  auto e = expect_api_error([] { parse_request_json("{\"temperature\": 1e999}"); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(std::string(e.what()).find("number overflow"), std::string::npos) << e.what();
}

TEST(CompletionRequest, PromptForms) {
  EXPECT_EQ(completion(R"({"prompt": "hi"})").prompts.at(0).text, "hi");
  auto ids = completion(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(completion(R"({"prompt": ["a", "b"]})").prompts.size(), 2u);
  EXPECT_EQ(completion(R"({"prompt": [[1], [2, 3]]})").prompts[1].token_ids.size(), 2u);
  for (const char* bad : {R"({"prompt": ""})", R"({"prompt": []})", R"({"prompt": [[]]})", R"({})",
                          R"({"prompt": 5})", R"({"prompt": ["a", 1]})", R"({"prompt": [1, "a"]})",
                          R"({"prompt": [-1]})", R"({"prompt": [1.5]})"}) {
    EXPECT_EQ(expect_api_error([&] { completion(bad); }).status(), 400) << bad;
  }
  EXPECT_NE(std::string(expect_api_error([] { completion(R"({"prompt": ""})"); }).what()).find("empty"),
            std::string::npos);
}

TEST(CompletionRequest, DefaultsAndLogprobs) {
  auto r = completion(R"({"prompt": "x"})");
  EXPECT_EQ(r.sampling.max_tokens, 16);
  EXPECT_FALSE(r.sampling.logprobs);
  EXPECT_FALSE(completion(R"({"prompt": "x", "max_tokens": null})").sampling.max_tokens);
  EXPECT_EQ(completion(R"({"prompt": "x", "logprobs": 3})").sampling.logprobs, 3);
  EXPECT_EQ(completion(R"({"prompt": "x", "max_tokens": 4.0})").sampling.max_tokens, 4);
  // Above 20 is the engine's to refuse: the server's --max-logprobs may allow it.
  EXPECT_EQ(completion(R"({"prompt": "x", "logprobs": 30})").sampling.logprobs, 30);
  EXPECT_EQ(expect_api_error([] { completion(R"({"prompt": "x", "logprobs": -1})"); }).status(), 400);
  // Echo with logprobs scores the prompt (vLLM), unless prompt_logprobs says how.
  EXPECT_EQ(completion(R"({"prompt": "x", "echo": true, "logprobs": 1})").sampling.prompt_logprobs, 1);
  EXPECT_EQ(completion(R"({"prompt": "x", "echo": true, "logprobs": 1, "prompt_logprobs": 4})").sampling.prompt_logprobs,
            4);
  EXPECT_FALSE(completion(R"({"prompt": "x", "logprobs": 1})").sampling.prompt_logprobs);
  // Echo without generation (vLLM): max_tokens 0 runs one token that the response leaves out.
  auto echo_only = completion(R"({"prompt": "x", "echo": true, "max_tokens": 0, "logprobs": 2})");
  EXPECT_TRUE(echo_only.echo_only);
  EXPECT_EQ(echo_only.sampling.max_tokens, 1);
  EXPECT_EQ(echo_only.sampling.prompt_logprobs, 2);
  EXPECT_FALSE(completion(R"({"prompt": "x", "echo": true, "max_tokens": 1})").echo_only);
  EXPECT_EQ(expect_api_error([] { completion(R"({"prompt": "x", "max_tokens": 0})"); }).param(), "max_tokens");
}

TEST(SamplingRequest, FieldsNothingReadAreListedAsIgnored) {
  const auto c = completion(R"({"prompt":"x","guided_json":{},"user":"u","temperature":0,"logprobs":null,
                                "echo":false,"max_tokens":3,"foo":1})");
  EXPECT_EQ(c.sampling.ignored_fields, (std::vector<std::string>{"foo", "guided_json"}));
  const auto ch = chat(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":5,"max_completion_tokens":3,
                           "tools":null,"top_logprobs":null,"reasoning_effort":"low"})");
  EXPECT_EQ(ch.sampling.ignored_fields, (std::vector<std::string>{"reasoning_effort"}));
  EXPECT_TRUE(completion(R"({"prompt":"x","n":2,"stream":false,"stop":["a"],"seed":3})").sampling.ignored_fields.empty());
}

TEST(SamplingRequest, PromptLogprobsAsVllm) {
  EXPECT_EQ(completion(R"({"prompt": "x", "prompt_logprobs": 0})").sampling.prompt_logprobs, 0);
  EXPECT_EQ(completion(R"({"prompt": "x", "prompt_logprobs": -1})").sampling.prompt_logprobs, -1);
  EXPECT_EQ(completion(R"({"prompt": "x", "prompt_logprobs": 0, "stream": true})").sampling.prompt_logprobs, 0);
  auto streamed = expect_api_error([] { completion(R"({"prompt": "x", "prompt_logprobs": 2, "stream": true})"); });
  EXPECT_EQ(streamed.status(), 400);
  EXPECT_EQ(streamed.param(), "prompt_logprobs");
  EXPECT_NE(std::string(streamed.what()).find("not available when `stream=True`"), std::string::npos);
  EXPECT_EQ(expect_api_error([] { completion(R"({"prompt": "x", "prompt_logprobs": -2})"); }).param(),
            "prompt_logprobs");
  EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}],"prompt_logprobs":3})").sampling.prompt_logprobs, 3);
}

TEST(SamplingRequest, RangesFollowVllm) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt":"x","n":0})", "n"},
      {R"({"prompt":"x","n":100000})", "n"},
      {R"({"prompt":"x","temperature":-0.5})", "temperature"},
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","temperature":1e39})", "temperature"},
      {R"({"prompt":"x","top_p":0})", "top_p"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","top_k":-2})", "top_k"},
      {R"({"prompt":"x","min_p":2})", "min_p"},
      {R"({"prompt":"x","presence_penalty":3})", "presence_penalty"},
      {R"({"prompt":"x","frequency_penalty":-3})", "frequency_penalty"},
      {R"({"prompt":"x","repetition_penalty":0})", "repetition_penalty"},
      {R"({"prompt":"x","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":-5})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"x","min_tokens":-1})", "min_tokens"},
      {R"({"prompt":"x","min_tokens":10,"max_tokens":5})", "min_tokens"},
      {R"({"prompt":"x","stop":[""]})", "stop"},
      {R"({"prompt":"x","stop":5})", "stop"},
      {R"({"prompt":"x","stop_token_ids":["a"]})", "stop_token_ids"},
      {R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream_options"},
      {R"({"prompt":"x","seed":"abc"})", "seed"},
      {R"({"prompt":"x","best_of":3})", "best_of"},
      {R"({"prompt":"x","logit_bias":{"x":5}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"1.5":5}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"":5}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"99999999999":5}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"1":"a"}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":[1]})", "logit_bias"},
      {R"({"prompt":"x","allowed_token_ids":[]})", "allowed_token_ids"},
      {R"({"prompt":"x","allowed_token_ids":[1.5]})", "allowed_token_ids"},
      {R"({"prompt":"x","use_beam_search":true})", "use_beam_search"},
      {R"({"prompt":"x","bad_words":[" "]})", "bad_words"},
      {R"({"prompt":"x","bad_words":[5]})", "bad_words"},
      {R"({"prompt":"x","priority":2})", "priority"},
      {R"({"prompt":"x","cache_salt":""})", "cache_salt"},
      {R"({"prompt":"x","cache_salt":5})", "cache_salt"},
      {R"({"prompt":"x","stream":"yes"})", "stream"},
  };
  for (const auto& c : cases) {
    auto e = expect_api_error([&] { completion(c.body); });
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body;
  }
  std::string many_stops = R"({"prompt":"x","stop":[)";
  for (int i = 0; i < 100; ++i) many_stops += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  many_stops += "]}";
  EXPECT_EQ(expect_api_error([&] { completion(many_stops.c_str()); }).status(), 400);
  EXPECT_NE(std::string(expect_api_error([] { completion(R"({"prompt":"x","top_p":1.5})"); }).what())
                .find("top_p must be in (0, 1], got 1.5."),
            std::string::npos);
}

TEST(SamplingRequest, LogitBiasIsClampedSortedAndCheckedAgainstTheVocabulary) {
  auto r = completion(R"({"prompt":"x","logit_bias":{"7":150,"2":-3.5,"07":-250,"9":0}})");
  // "07" and "7" are one token (as in a dict of ints): the later one wins; biases clamp to +-100.
  const std::vector<std::pair<int32_t, float>> want{{2, -3.5f}, {7, -100.0f}, {9, 0.0f}};
  EXPECT_EQ(r.sampling.logit_bias, want);
  EXPECT_EQ(resolve_sampling_params(r.sampling, {}, 4, 64, 10).logit_bias, want);
  auto e = expect_api_error([&] { resolve_sampling_params(r.sampling, {}, 4, 64, 8); });
  EXPECT_EQ(e.param(), "logit_bias");
  EXPECT_NE(std::string(e.what()).find("token_id 9 in logit_bias is out of vocabulary"), std::string::npos);
  EXPECT_TRUE(completion(R"({"prompt":"x","logit_bias":null})").sampling.logit_bias.empty());
  // Keys as Python's int() reads them: whitespace, a sign, single underscores between digits.
  const std::vector<std::pair<int32_t, float>> pythonic{{-3, 1.0f}, {12, 2.0f}, {15, 3.0f}, {1000, 4.0f}};
  EXPECT_EQ(completion(R"({"prompt":"x","logit_bias":{" -3 ":1,"+12":2,"1_5":3,"1_000":4}})").sampling.logit_bias,
            pythonic);
  for (const char* key : {"1__0", "_1", "1_", "+", "- 1", "0x10", "2147483648", "１"}) {
    const std::string body = std::string(R"({"prompt":"x","logit_bias":{")") + key + R"(":1}})";
    EXPECT_EQ(expect_api_error([&] { completion(body.c_str()); }).param(), "logit_bias") << key;
  }
  // What vLLM takes and hyllm ignores no more: allowed ids are checked against the vocabulary too.
  auto allowed = completion(R"({"prompt":"x","allowed_token_ids":[3,9],"priority":0,"bad_words":[],
      "use_beam_search":false})");
  EXPECT_EQ(allowed.sampling.allowed_token_ids, (std::vector<int32_t>{3, 9}));
  EXPECT_EQ(expect_api_error([&] { resolve_sampling_params(allowed.sampling, {}, 4, 64, 9); }).param(),
            "allowed_token_ids");
  std::string many = R"({"prompt":"x","logit_bias":{)";
  for (int i = 0; i < 1025; ++i) many += (i ? ",\"" : "\"") + std::to_string(i) + "\":1";
  many += "}}";
  EXPECT_EQ(expect_api_error([&] { completion(many.c_str()); }).param(), "logit_bias");
}

TEST(SamplingRequest, ParsesKnobs) {
  auto r = completion(R"({"prompt":"x","n":3,"temperature":0.000001,"top_p":0.9,"top_k":-1,"min_p":0.1,
      "seed":42,"stop":"END","stop_token_ids":[7],"ignore_eos":true,"stream":true,
      "stream_options":{"include_usage":true},"return_token_ids":true,"presence_penalty":0.5})");
  EXPECT_EQ(r.sampling.n, 3);
  EXPECT_EQ(r.sampling.temperature, 0.0f);  // below vLLM's epsilon: greedy
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"END"}));
  EXPECT_TRUE(r.sampling.include_usage);
  EXPECT_TRUE(r.sampling.return_token_ids);
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
}

TEST(SamplingRequest, ResolvesDefaultsAndContext) {
  SamplingRequest s;
  s.max_tokens = 10;
  SamplingDefaults d;
  d.temperature = 0.6f;
  d.top_k = 20;
  auto p = resolve_sampling_params(s, d, 5, 100, 1000);
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.max_tokens, 10);
  s.temperature = 0.0f;
  EXPECT_FLOAT_EQ(resolve_sampling_params(s, d, 5, 100, 1000).temperature, 0.0f);

  auto e = expect_api_error([&] { resolve_sampling_params(s, d, 95, 100, 1000); });
  EXPECT_NE(std::string(e.what()).find("maximum context length is 100 tokens"), std::string::npos);
  s.max_tokens.reset();
  EXPECT_EQ(resolve_sampling_params(s, d, 40, 100, 1000).max_tokens, 60);
  d.max_new_tokens = 8;
  EXPECT_EQ(resolve_sampling_params(s, d, 40, 100, 1000).max_tokens, 8);
  EXPECT_NE(std::string(expect_api_error([&] { resolve_sampling_params(s, d, 100, 100, 1000); }).what())
                .find("maximum context length is"),
            std::string::npos);
  // min_tokens past the max_tokens a default gives is refused, as vLLM does,
  // not cut down to it.
  s.min_tokens = 8;
  EXPECT_EQ(resolve_sampling_params(s, d, 40, 100, 1000).min_tokens, 8);
  s.min_tokens = 9;
  auto m = expect_api_error([&] { resolve_sampling_params(s, d, 40, 100, 1000); });
  EXPECT_EQ(m.param(), "min_tokens");
  EXPECT_NE(std::string(m.what()).find("max_tokens=8, got 9"), std::string::npos) << m.what();
  s.min_tokens = 0;
  s.stop_token_ids = {5000};
  EXPECT_EQ(expect_api_error([&] { resolve_sampling_params(s, d, 4, 100, 1000); }).param(), "stop_token_ids");
}

TEST(SamplingRequest, HugeMaxTokensIsOverTheContextNotAnOverflow) {
  SamplingRequest s;
  s.max_tokens = INT64_MAX;
  auto e = expect_api_error([&] { resolve_sampling_params(s, SamplingDefaults(), 5, 100, 1000); });
  EXPECT_EQ(e.param(), "max_tokens");
  EXPECT_NE(std::string(e.what()).find("maximum context length is 100 tokens. However, you requested "
                                       "9223372036854775812 tokens (5 in the messages, 9223372036854775807 in "
                                       "the completion)"),
            std::string::npos)
      << e.what();
}

TEST(ChatRequest, NormalisesMessages) {
  auto r = chat(R"({"messages":[{"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"f","arguments":"{\"x\":1}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"42"}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["x"], 1);
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.sampling.max_tokens);
}

TEST(ChatRequest, RejectsBadMessagesAndFields) {
  const char* bad[] = {
      R"({})",
      R"({"messages":[]})",
      R"({"messages":"hi"})",
      R"({"messages":[{"content":"x"}]})",
      R"({"messages":[{"role":"user","content":5}]})",
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
      R"({"messages":[{"role":"user","content":"x"}],"tools":[]})",
      R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})",
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
          "tool_choice":{"type":"function","function":{"name":"g"}}})",
      R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})",
      R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":-1})",
      R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{}}})",
      R"({"messages":[{"role":"user","content":"x"}],"chat_template":5})",
      R"({"messages":[{"role":"user","content":"x"}],"continue_final_message":true})",
      R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})",
  };
  for (const char* b : bad) EXPECT_EQ(expect_api_error([&] { chat(b); }).status(), 400) << b;
  std::string many = R"({"messages":[)";
  for (int i = 0; i < 5000; ++i) many += std::string(i ? "," : "") + R"({"role":"user","content":"x"})";
  many += "]}";
  EXPECT_EQ(expect_api_error([&] { chat(many.c_str()); }).status(), 400);
}

// JSON that arrives as a string inside a request is held to the request's
// depth: copying or printing it recurses (a deep one overflowed the stack).
TEST(ChatRequest, DeepJsonInsideStringsIsRefusedOrKeptAsText) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const Json schema_body = {{"messages", Json::array({{{"role", "user"}, {"content", "x"}}})},
                            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"},
                                                                            {"schema", "{\"a\":" + deep + "}"}}}}}};
  auto e = expect_api_error([&] { parse_chat_request(schema_body); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(std::string(e.what()).find("deeper"), std::string::npos) << e.what();

  const Json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep}}}};
  const Json args_body = {{"messages", Json::array({{{"role", "user"}, {"content", "x"}},
                                                    {{"role", "assistant"}, {"content", nullptr},
                                                     {"tool_calls", Json::array({call})}}})}};
  const ChatRequest r = parse_chat_request(args_body);
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], deep);
}

TEST(ChatRequest, LogprobsToolsAndKwargs) {
  auto r = chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":3,
      "max_tokens":9,"max_completion_tokens":5,
      "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
      "chat_template_kwargs":{"enable_thinking":false,"messages":"ignored"}})");
  EXPECT_EQ(r.sampling.logprobs, 3);
  EXPECT_EQ(r.sampling.max_tokens, 5);
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.chat_template_kwargs, json({{"enable_thinking", false}}));
  EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})").sampling.logprobs, 0);
  EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":0})").sampling.logprobs);
}

TEST(ApiError, OpenAiShape) {
  auto e = model_not_found("gpt-4");
  auto j = e.to_json();
  EXPECT_EQ(j["error"]["message"], "The model `gpt-4` does not exist.");
  EXPECT_EQ(j["error"]["type"], "NotFoundError");
  EXPECT_EQ(j["error"]["code"], 404);
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(api_error_from(Error(ErrorCode::kInvalidArgument, "x")).status(), 400);
  EXPECT_EQ(api_error_from(Error(ErrorCode::kInternal, "x")).status(), 500);
  auto from_std = api_error_from_exception(std::make_exception_ptr(std::runtime_error("boom")));
  EXPECT_EQ(from_std.status(), 500);
  // Invalid UTF-8 in a message must still print.
  EXPECT_NO_THROW(model_not_found("\xff\xfe").body());
}

}  // namespace
}  // namespace hyllm::serve
