// /v1/responses without a server: requests parsed into chat's terms, output
// items and stream events built from parsed text, and the formatter's
// framing (sequence numbers, event lines, the final response).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "serve/api_error.h"
#include "serve/response_format.h"
#include "serve/responses_output.h"
#include "serve/responses_request.h"

namespace hyllm::serve {
namespace {

ResponsesRequest parse(const char* text) { return parse_responses_request(Json::parse(text)); }

ApiError error_of(const char* text) {
  try {
    parse(text);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError for " << text;
  return ApiError(0, "");
}

std::vector<std::string> types(const std::vector<Json>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["type"].get<std::string>());
  return out;
}

TEST(ResponsesRequest, StringInputAndInstructions) {
  auto r = parse(R"({"input": "hi", "instructions": "Be brief.", "max_output_tokens": 7, "temperature": 0.5})");
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0]["role"], "system");
  EXPECT_EQ(r.chat.messages[0]["content"], "Be brief.");
  EXPECT_EQ(r.chat.messages[1]["role"], "user");
  EXPECT_EQ(r.chat.messages[1]["content"], "hi");
  EXPECT_EQ(r.chat.sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(*r.chat.sampling.temperature, 0.5f);
  EXPECT_EQ(r.chat.tool_choice.mode, ToolChoice::kNone);
  EXPECT_FALSE(r.chat.structured);
  EXPECT_TRUE(r.chat.add_generation_prompt);
  // The response repeats what the request said, with the API's defaults.
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["tools"], Json::array());
  EXPECT_EQ(r.echo["text"]["format"]["type"], "text");
  EXPECT_EQ(r.echo["truncation"], "disabled");
  EXPECT_EQ(parse(R"({"input": "hi", "instructions": ""})").chat.messages.size(), 1u);
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  auto r = parse(R"({"input": [
    {"role": "developer", "content": "Use tools."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather"},
                                                     {"type": "input_text", "text": "in Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call it."}]},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
    {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "noon"}]}
  ]})");
  const Json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0]["role"], "developer");
  EXPECT_EQ(m[1]["content"], "Weather\nin Paris?");
  // Reasoning, text and both calls are one assistant turn, as they were one response.
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "Checking.");
  EXPECT_EQ(m[2]["reasoning_content"], "Call it.");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");  // decoded for the template
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "call_1");
  EXPECT_EQ(m[3]["content"], "18 C");
  EXPECT_EQ(m[4]["content"], "noon");
}

TEST(ResponsesRequest, APartialAssistantMessageIsContinued) {
  auto r = parse(R"({"input": [{"role": "user", "content": "Count"},
                               {"type": "message", "role": "assistant", "status": "in_progress",
                                "content": [{"type": "output_text", "text": "1, 2,"}]}]})");
  EXPECT_TRUE(r.chat.continue_final_message);
  EXPECT_FALSE(r.chat.add_generation_prompt);
  EXPECT_FALSE(parse(R"({"input": [{"role": "assistant", "content": "done"}]})").chat.continue_final_message);
}

TEST(ResponsesRequest, FlatFunctionToolsAndToolChoice) {
  auto r = parse(R"({"input": "x", "tools": [
      {"type": "function", "name": "get_weather", "description": "Weather", "strict": true,
       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
      "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false})");
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0]["type"], "function");
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.chat.tools[0]["function"]["description"], "Weather");
  EXPECT_EQ(r.chat.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(r.chat.tool_choice.mode, ToolChoice::kNamed);
  EXPECT_EQ(r.chat.tool_choice.name, "get_weather");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  // The response repeats the tools as the client sent them.
  EXPECT_EQ(r.echo["tools"][0]["name"], "get_weather");
  EXPECT_EQ(r.echo["tool_choice"]["name"], "get_weather");

  const char* tool = R"({"type": "function", "name": "f"})";
  EXPECT_EQ(parse((std::string(R"({"input": "x", "tools": [)") + tool + "]}").c_str()).chat.tool_choice.mode,
            ToolChoice::kAuto);
  EXPECT_EQ(parse((std::string(R"({"input": "x", "tool_choice": "required", "tools": [)") + tool + "]}").c_str())
                .chat.tool_choice.mode,
            ToolChoice::kRequired);
  // With no tools, "auto" and "none" ask for nothing.
  EXPECT_EQ(parse(R"({"input": "x", "tools": [], "tool_choice": "auto"})").chat.tool_choice.mode, ToolChoice::kNone);
  EXPECT_TRUE(parse(R"({"input": "x", "tool_choice": "none"})").chat.tools.is_null());
}

TEST(ResponsesRequest, TextFormatIsStructuredOutput) {
  auto schema = parse(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p", "strict": true,
                          "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})");
  ASSERT_TRUE(schema.chat.structured);
  EXPECT_EQ(schema.chat.structured->kind, structured::GrammarKind::kJsonSchema);
  EXPECT_NE(schema.chat.structured->text.find("\"integer\""), std::string::npos);
  EXPECT_EQ(schema.echo["text"]["format"]["name"], "p");
  auto object = parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})");
  EXPECT_EQ(object.chat.structured->kind, structured::GrammarKind::kJsonObject);
  EXPECT_FALSE(parse(R"({"input": "x", "text": {"format": {"type": "text"}, "verbosity": "low"}})").chat.structured);
  auto regex = parse(R"({"input": "x", "structured_outputs": {"regex": "[0-9]+"}})");
  EXPECT_EQ(regex.chat.structured->kind, structured::GrammarKind::kRegex);
}

TEST(ResponsesRequest, ReasoningEffortReachesTheTemplate) {
  auto r = parse(R"({"input": "x", "reasoning": {"effort": "low", "summary": "auto"}})");
  EXPECT_EQ(r.chat.chat_template_kwargs["reasoning_effort"], "low");
  EXPECT_EQ(r.echo["reasoning"]["effort"], "low");
}

TEST(ResponsesRequest, UnreadFieldsAreListedAndKnownOnesAreNot) {
  auto r = parse(R"({"input": "x", "store": true, "user": "u", "metadata": {"k": "v"}, "prompt_cache_key": "c",
                     "include": ["reasoning.encrypted_content"], "service_tier": "auto", "max_tool_calls": 3,
                     "top_logprobs": 0, "truncation": "disabled", "max_tokens": 5, "chat_template_kwargs": {}})");
  EXPECT_EQ(r.chat.sampling.ignored_fields, (std::vector<std::string>{"chat_template_kwargs", "max_tokens"}));
  EXPECT_EQ(r.echo["metadata"]["k"], "v");
  EXPECT_EQ(r.echo["max_tool_calls"], 3);
}

TEST(ResponsesRequest, RefusesWhatItCannotDo) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({})", "input"},
      {R"({"input": 5})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": [5]})", "input"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "input"},
      {R"({"input": [{"role": "user"}]})", "input"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", "input"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input"},
      {R"({"input": [{"type": "web_search_call", "id": "ws_1"}]})", "input"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "input"},
      {R"({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]})", "input"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": "x", "conversation": "conv_1"})", "conversation"},
      {R"({"input": "x", "prompt": {"id": "pmpt_1"}})", "prompt"},
      {R"({"input": "x", "truncation": "auto"})", "truncation"},
      {R"({"input": "x", "include": ["message.output_text.logprobs"]})", "include"},
      {R"({"input": "x", "tools": [{"type": "web_search_preview"}]})", "tools"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", "tools"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": "no"}]})", "tools"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function",
          "name": "g"}})", "tool_choice"},
      {R"({"input": "x", "tool_choice": "required"})", "tool_choice"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "web_search"}})",
       "tool_choice"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p"}}})", "text"},
      {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text"},
      {R"({"input": "x", "text": {"format": {"type": "json_object"}}, "structured_outputs": {"regex": "a"}})",
       "structured_outputs"},
      {R"({"input": "x", "reasoning": {"effort": "extreme"}})", "reasoning"},
      {R"({"input": "x", "n": 2})", "n"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "x", "top_logprobs": -1})", "top_logprobs"},
      {R"({"input": "x", "prompt_logprobs": 1})", "prompt_logprobs"},
  };
  for (const auto& [body, param] : cases) {
    ApiError e = error_of(body);
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.param(), param) << body << ": " << e.what();
  }
}

// Reasoning, then text, then two calls: each item opens, grows and closes in turn.
TEST(ResponsesOutput, ItemsInTheOrderTheModelWritesThem) {
  ResponsesOutput out(/*hold_blank_text=*/true);
  std::vector<Json> events;
  ChatDelta d1;
  d1.reasoning = "Think";
  out.push(d1, events);
  ChatDelta d2;
  d2.reasoning = "ing.";
  d2.content = "Answer";
  out.push(d2, events);
  ChatDelta d3;
  d3.tool_calls.push_back({0, "chatcmpl-tool-1", "get_weather", "{\"city\": "});
  out.push(d3, events);
  ChatDelta d4;
  d4.tool_calls.push_back({0, std::nullopt, std::nullopt, "\"Paris\"}"});
  d4.tool_calls.push_back({1, "chatcmpl-tool-2", "get_time", "{}"});
  out.push(d4, events);
  out.finish(events);

  EXPECT_EQ(types(events),
            (std::vector<std::string>{
                "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
                "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
                "response.output_item.done", "response.output_item.added", "response.content_part.added",
                "response.output_text.delta", "response.output_text.done", "response.content_part.done",
                "response.output_item.done", "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.delta", "response.function_call_arguments.done",
                "response.output_item.done", "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done"}));
  const Json& items = out.items();
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0]["type"], "reasoning");
  EXPECT_EQ(items[0]["content"][0]["text"], "Thinking.");
  EXPECT_EQ(items[1]["type"], "message");
  EXPECT_EQ(items[1]["content"][0]["text"], "Answer");
  EXPECT_EQ(items[1]["content"][0]["annotations"], Json::array());
  EXPECT_EQ(items[2]["type"], "function_call");
  EXPECT_EQ(items[2]["name"], "get_weather");
  EXPECT_EQ(items[2]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(items[2]["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(items[3]["name"], "get_time");
  for (const auto& item : items) EXPECT_EQ(item["status"], "completed");
  EXPECT_EQ(items[0]["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(items[1]["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(items[2]["id"].get<std::string>().rfind("fc_", 0), 0u);
  // Every event names the item it belongs to, by index and (after the announcement) id.
  for (const auto& e : events) {
    const size_t index = e["output_index"].get<size_t>();
    ASSERT_LT(index, items.size());
    const Json& id = e.contains("item") ? e["item"]["id"] : e["item_id"];
    EXPECT_EQ(id, items[index]["id"]) << e.dump();
  }
  EXPECT_EQ(events.back()["item"], items[3]);
}

TEST(ResponsesOutput, BlankTextBeforeACallIsDropped) {
  ResponsesOutput out(true);
  std::vector<Json> events;
  ChatDelta blank;
  blank.content = "\n\n";
  out.push(blank, events);
  EXPECT_TRUE(events.empty());
  ChatDelta call;
  call.tool_calls.push_back({0, "id", "f", "{}"});
  out.push(call, events);
  out.finish(events);
  ASSERT_EQ(out.items().size(), 1u);
  EXPECT_EQ(out.items()[0]["type"], "function_call");

  // Before text it is kept; without tool parsing nothing is held.
  ResponsesOutput text(true);
  text.push(blank, events);
  ChatDelta word;
  word.content = "Hi";
  text.push(word, events);
  EXPECT_EQ(text.items()[0]["content"][0]["text"], "\n\nHi");
  ResponsesOutput plain(false);
  plain.push(blank, events);
  EXPECT_EQ(plain.items()[0]["content"][0]["text"], "\n\n");
}

// qwen3_coder passes stray text between a call's parameters on as content;
// the call still gets all its arguments, and the text follows it.
TEST(ResponsesOutput, TextInsideACallWaitsForTheCallToClose) {
  for (bool split : {false, true}) {
    ResponsesOutput out(true);
    std::vector<Json> events;
    ChatDelta first;
    first.tool_calls.push_back({0, "id", "f", "{\"a\": 1"});
    out.push(first, events);
    ChatDelta stray;
    stray.content = "stray";
    ChatDelta rest;
    rest.tool_calls.push_back({0, std::nullopt, std::nullopt, ", \"b\": 2}"});
    if (split) {
      out.push(stray, events);
      out.push(rest, events);
    } else {
      stray.tool_calls = rest.tool_calls;
      out.push(stray, events);
    }
    out.finish(events);
    ASSERT_EQ(out.items().size(), 2u) << out.items().dump();
    EXPECT_EQ(out.items()[0]["type"], "function_call");
    EXPECT_EQ(Json::parse(out.items()[0]["arguments"].get<std::string>()), Json::parse(R"({"a": 1, "b": 2})"));
    EXPECT_EQ(out.items()[1]["content"][0]["text"], "stray");
    EXPECT_EQ(events.back()["type"], "response.output_item.done");
  }
}

TEST(ResponsesOutput, ReasoningTokensUsageAndStatus) {
  ResponsesShape shape;
  const std::vector<int32_t> ids = {5, 100, 6, 7, 101, 8, 9};
  EXPECT_EQ(count_reasoning_tokens(ids, shape), 0);  // no reasoning parser
  shape.reasoning_open = 100;
  shape.reasoning_close = 101;
  EXPECT_EQ(count_reasoning_tokens(ids, shape), 2);
  shape.starts_in_reasoning = true;
  EXPECT_EQ(count_reasoning_tokens(ids, shape), 3);

  Json usage = responses_usage_json({10, 4, std::nullopt}, 3);
  EXPECT_EQ(usage["input_tokens"], 10);
  EXPECT_EQ(usage["output_tokens"], 4);
  EXPECT_EQ(usage["total_tokens"], 14);
  EXPECT_EQ(usage["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(usage["output_tokens_details"]["reasoning_tokens"], 3);
  EXPECT_EQ(responses_usage_json({10, 4, 8}, 0)["input_tokens_details"]["cached_tokens"], 8);

  shape.echo = {{"temperature", 0.5}, {"tools", Json::array()}};
  Json r = response_json("resp_1", 7, "m", shape, "incomplete", Json::array(), usage);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["temperature"], 0.5);
  EXPECT_TRUE(r["instructions"].is_null());
  Json completed = response_json("resp_1", 7, "m", shape, "completed", Json::array(), usage);
  EXPECT_TRUE(completed["incomplete_details"].is_null());
}

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok =
      Tokenizer::from_model_dir(std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny");
  return tok;
}

ChoiceEvent text_event(std::string text, FinishReason finish = FinishReason::kNone) {
  ChoiceEvent ev;
  ev.text = std::move(text);
  ev.token_ids = {1};
  ev.finish_reason = finish;
  return ev;
}

// The stream: numbered from 0, each event on its own `event:` line, opening
// with the response's creation and closing with the whole response, whose
// output is the one a whole (non-streamed) response has.
TEST(ResponsesFormatter, StreamFramingAndTheFinalResponse) {
  ResponseOptions options;
  options.id = "resp_x";
  options.model = "hyllm-tiny";
  auto f = make_responses_formatter(options, tiny_tokenizer(), ChatOutputOptions{}, ResponsesShape{});
  std::vector<Json> payloads;
  f->stream_head(payloads);
  Usage usage{3, 2, std::nullopt};
  ChoiceEvent a = text_event("Hel");
  a.first = true;
  f->stream_chunks(a, usage, payloads);
  ChoiceEvent b = text_event("lo", FinishReason::kLength);
  f->stream_chunks(b, usage, payloads);
  const std::string tail = f->stream_tail(usage, std::nullopt);

  ASSERT_GE(payloads.size(), 2u);
  EXPECT_EQ(payloads[0]["type"], "response.created");
  EXPECT_EQ(payloads[0]["response"]["status"], "in_progress");
  EXPECT_EQ(payloads[1]["type"], "response.in_progress");
  std::string text;
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(payloads[i]["sequence_number"], i);
    if (payloads[i]["type"] == "response.output_text.delta") text += payloads[i]["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(f->sse(payloads[0]).rfind("event: response.created\ndata: {", 0), 0u);

  const std::string prefix = "event: response.completed\ndata: ";
  ASSERT_EQ(tail.rfind(prefix, 0), 0u) << tail;
  Json done = Json::parse(tail.substr(prefix.size()));
  EXPECT_EQ(done["sequence_number"], payloads.size());
  EXPECT_EQ(done["response"]["status"], "incomplete");
  EXPECT_EQ(done["response"]["usage"]["output_tokens"], 2);
  ASSERT_EQ(done["response"]["output"].size(), 1u);
  EXPECT_EQ(done["response"]["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(tail.find("[DONE]"), std::string::npos);

  std::vector<ChoiceResult> whole(1);
  whole[0].add(text_event("Hello", FinishReason::kStop));
  auto g = make_responses_formatter(options, tiny_tokenizer(), ChatOutputOptions{}, ResponsesShape{});
  Json response = g->full_response(whole, usage);
  EXPECT_EQ(response["status"], "completed");
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "Hello");

  // An engine failure ends the stream with an error event.
  const std::string failed = g->stream_tail(usage, ApiError(500, "boom"));
  EXPECT_EQ(failed.rfind("event: error\ndata: ", 0), 0u);
  EXPECT_NE(failed.find("boom"), std::string::npos);
  // A failure of the request's own making is an invalid request, not a server error.
  const std::string refused = g->stream_tail(usage, ApiError(400, "no token may be sampled"));
  EXPECT_NE(refused.find("BadRequestError"), std::string::npos) << refused;
}

}  // namespace
}  // namespace hyllm::serve
