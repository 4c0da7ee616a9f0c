// Reasoning and tool-call parsing over many model outputs: each is parsed
// whole and split at every byte boundary, and the two must agree (content,
// reasoning, and the calls the openai client would accumulate). Cases follow
// what vLLM's parser tests exercise: text before and after calls, several
// calls, nested JSON parameters, typed values, unknown functions, malformed
// and truncated calls (whose text must not be lost).

#include <gtest/gtest.h>

#include "serve/chat_output.h"

namespace hyllm::serve {
namespace {

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
      "ratio": {"type": "number"}, "filter": {"type": "object"}, "hours": {"type": "array"},
      "note": {"type": ["string", "null"]}}}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
      "query": {"type": "string"}}}}}
])");

struct Parsed {
  std::string reasoning, content;
  Json calls = Json::array();  // accumulated like the openai client: [{name, arguments(string)}]
  bool called = false;
};

Parsed accumulate(ChatOutputParser& p, const std::vector<std::string>& pieces) {
  Parsed out;
  std::vector<ToolCallDelta> deltas;
  auto add = [&](ChatDelta d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
    for (auto& t : d.tool_calls) {
      // The first delta of a call carries id and name, before any argument.
      if (t.index >= static_cast<int>(out.calls.size())) {
        EXPECT_TRUE(t.id && t.name) << "call " << t.index << " announced without id and name";
        EXPECT_EQ(t.index, static_cast<int>(out.calls.size())) << "calls are announced in order";
        out.calls.push_back({{"name", t.name.value_or("")}, {"arguments", ""}, {"id", t.id.value_or("")}});
      }
      auto& c = out.calls[static_cast<size_t>(t.index)];
      c["arguments"] = c["arguments"].get<std::string>() + t.arguments;
    }
  };
  for (const auto& piece : pieces) add(p.push(piece));
  add(p.finish());
  out.called = p.called_tools();
  for (auto& c : out.calls) c.erase("id");
  return out;
}

ChatOutputOptions options(std::string tool_parser, std::optional<std::string> reasoning = std::nullopt,
                          ReasoningStart start = ReasoningStart::kContent) {
  ChatOutputOptions o;
  o.tool_parser = std::move(tool_parser);
  o.tools = kTools;
  if (reasoning) {
    o.reasoning = reasoning_syntax(*reasoning);
    o.reasoning_start = start;
  }
  return o;
}

// Parses whole, then at every split into two pieces, then byte by byte; all
// must agree. Returns the whole-text result.
Parsed parse_all_ways(const ChatOutputOptions& o, const std::string& text) {
  ChatOutputParser whole(o);
  Parsed ref = accumulate(whole, {text});
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ChatOutputParser p(o);
    Parsed got = accumulate(p, {text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(got.content, ref.content) << "split at " << cut << " of: " << text;
    EXPECT_EQ(got.reasoning, ref.reasoning) << "split at " << cut;
    EXPECT_EQ(got.calls, ref.calls) << "split at " << cut;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ChatOutputParser p(o);
  Parsed got = accumulate(p, bytes);
  EXPECT_EQ(got.content, ref.content) << "byte by byte: " << text;
  EXPECT_EQ(got.reasoning, ref.reasoning);
  EXPECT_EQ(got.calls, ref.calls);
  // Every announced call's arguments are one JSON object.
  for (const auto& c : ref.calls) {
    EXPECT_NO_THROW(EXPECT_TRUE(Json::parse(c["arguments"].get<std::string>()).is_object())) << c.dump();
  }
  return ref;
}

Json args(const Parsed& p, size_t i) { return Json::parse(p.calls.at(i)["arguments"].get<std::string>()); }

TEST(Qwen3CoderParser, OneCallWithTypedValues) {
  const std::string text =
      "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=ratio>\n0.5\n"
      "</parameter>\n<parameter=note>\nnull\n</parameter>\n</function>\n</tool_call>";
  Parsed p = parse_all_ways(options("qwen3_coder"), text);
  EXPECT_EQ(p.content, "Let me check.\n\n");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0]["name"], "get_weather");
  EXPECT_EQ(args(p, 0), Json::parse(R"({"city": "San Francisco", "days": 3, "metric": true, "ratio": 0.5,
                                        "note": null})"));
  EXPECT_TRUE(p.called);
}

TEST(Qwen3CoderParser, NestedJsonMultilineStringsAndSeveralCalls) {
  const std::string text =
      "<tool_call>\n<function=get_weather>\n<parameter=filter>\n{\"a\": [1, {\"b\": \"</x>\"}], \"c\": {}}\n"
      "</parameter>\n<parameter=hours>\n[6, 12]\n</parameter>\n<parameter=city>\nline one\nline <two>\n"
      "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=search>\n<parameter=query>\n"
      "a < b && c > d\n</parameter>\n</function>\n</tool_call>\nDone.";
  Parsed p = parse_all_ways(options("qwen3_coder"), text);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(args(p, 0)["filter"], Json::parse(R"({"a": [1, {"b": "</x>"}], "c": {}})"));
  EXPECT_EQ(args(p, 0)["hours"], Json::parse("[6, 12]"));
  EXPECT_EQ(args(p, 0)["city"], "line one\nline <two>");
  EXPECT_EQ(p.calls[1]["name"], "search");
  EXPECT_EQ(args(p, 1)["query"], "a < b && c > d");
  EXPECT_EQ(p.content, "\nDone.");
}

TEST(Qwen3CoderParser, UnknownFunctionsNoParametersAndMissingClosers) {
  Parsed p = parse_all_ways(options("qwen3_coder"),
                            "<tool_call>\n<function=launch_rocket>\n<parameter=count>\n3\n</parameter>\n"
                            "</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0]["name"], "launch_rocket");
  EXPECT_EQ(args(p, 0)["count"], "3") << "no schema: the value stays a string (vLLM)";

  p = parse_all_ways(options("qwen3_coder"), "<tool_call>\n<function=search>\n</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(args(p, 0), Json::object());

  // No </parameter> before the next tag; no </function>; no </tool_call>.
  p = parse_all_ways(options("qwen3_coder"),
                     "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2\n</function>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(args(p, 0), Json::parse(R"({"city": "Oslo", "days": 2})"));

  // Cut off mid-value (max_tokens): the call closes with what it has.
  p = parse_all_ways(options("qwen3_coder"), "<tool_call>\n<function=search>\n<parameter=query>\nhalf a que");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(args(p, 0)["query"], "half a que");
}

TEST(Qwen3CoderParser, MalformedCallsStayInContent) {
  for (const std::string& text : {std::string("<tool_call> not a call </tool_call> and more"),
                                 std::string("I will call <tool_call>\n<funcion=x>"),
                                 std::string("<tool_call>\n<function=>\n</function></tool_call>"),
                                 std::string("ends with <tool_call>\n<funct"),
                                 std::string("a < b <tool_ca but no call")}) {
    Parsed p = parse_all_ways(options("qwen3_coder"), text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_FALSE(p.called);
    EXPECT_EQ(p.content, text) << "text was lost";
  }
}

// A name past the length limit is no tag, whether its `>` comes in the same
// piece or later.
TEST(Qwen3CoderParser, OverlongNamesAreNoTagsInEveryPiecing) {
  for (size_t length : {255, 256, 300}) {
    const std::string function = "<tool_call>\n<function=" + std::string(length, 'f') + ">\n</function>\n</tool_call>";
    const Parsed p = parse_all_ways(options("qwen3_coder"), function);
    EXPECT_EQ(p.calls.size(), length < 256 ? 1u : 0u) << length;
  }
  const std::string name(256, 'n');
  const std::string long_param = "<tool_call>\n<function=get_weather>\n<parameter=" + name +
                                 ">\nx\n</parameter>\n</function>\n</tool_call>";
  const Parsed p = parse_all_ways(options("qwen3_coder"), long_param);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(args(p, 0), Json::object());
}

TEST(HermesParser, CallsMalformedJsonAndStringArguments) {
  const std::string text =
      "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"filter\": {\"x\": [1, "
      "2]}}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"q\\\"}\"}\n"
      "</tool_call>";
  Parsed p = parse_all_ways(options("hermes"), text);
  EXPECT_EQ(p.content, "Sure.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(args(p, 0), Json::parse(R"({"city": "Paris", "filter": {"x": [1, 2]}})"));
  EXPECT_EQ(args(p, 1), Json::parse(R"({"query": "q"})"));

  for (const std::string& bad : {std::string("<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": }\n</tool_call>"),
                                std::string("<tool_call>\n[1, 2]\n</tool_call> tail"),
                                std::string("<tool_call>\n{\"name\": \"search\", \"argum")}) {
    Parsed q = parse_all_ways(options("hermes"), bad);
    EXPECT_TRUE(q.calls.empty()) << bad;
    EXPECT_EQ(q.content, bad) << "text was lost";
  }
  // Output nested deeper than a request may be (printing it would recurse
  // that deep) is no call either; its text stays in content.
  const std::string deep = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": " +
                           std::string(2000, '[') + std::string(2000, ']') + "}}\n</tool_call>";
  ChatOutputParser deep_parser(options("hermes"));
  Parsed d = accumulate(deep_parser, {deep});
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, deep);
  // An unterminated block whose JSON is complete is a call.
  Parsed r = parse_all_ways(options("hermes"), "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n");
  EXPECT_EQ(r.calls.size(), 1u);
}

TEST(ReasoningParser, Qwen3StartsFromThePrompt) {
  EXPECT_EQ(reasoning_start(*reasoning_syntax("qwen3"), "<|im_start|>assistant\n<think>\n"), ReasoningStart::kReasoning);
  EXPECT_EQ(reasoning_start(*reasoning_syntax("qwen3"), "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            ReasoningStart::kContent);
  EXPECT_EQ(reasoning_start(*reasoning_syntax("qwen3"), "<think>old</think>answer<|im_end|>\n<|im_start|>assistant\n"),
            ReasoningStart::kMayOpen);
  EXPECT_EQ(reasoning_start(*reasoning_syntax("deepseek_r1"), "<|Assistant|>"), ReasoningStart::kReasoning);

  // Think block opened by the prompt: only </think> in the output.
  Parsed p = parse_all_ways(options("", "qwen3", ReasoningStart::kReasoning), "Let me think.\n</think>\n\nIt is 4.");
  EXPECT_EQ(p.reasoning, "Let me think.\n");
  EXPECT_EQ(p.content, "\n\nIt is 4.");
  // Truncated thought: all reasoning.
  p = parse_all_ways(options("", "qwen3", ReasoningStart::kReasoning), "Still thinking </thin");
  EXPECT_EQ(p.reasoning, "Still thinking </thin");
  EXPECT_EQ(p.content, "");
  // Thinking off: all content, even a stray tag.
  p = parse_all_ways(options("", "qwen3", ReasoningStart::kContent), "Plain answer </think> here");
  EXPECT_EQ(p.content, "Plain answer </think> here");
  // Older templates: the model opens the block itself.
  p = parse_all_ways(options("", "qwen3", ReasoningStart::kMayOpen), "<think>\nhmm\n</think>\n\nyes");
  EXPECT_EQ(p.reasoning, "\nhmm\n");
  EXPECT_EQ(p.content, "\n\nyes");
  p = parse_all_ways(options("", "qwen3", ReasoningStart::kMayOpen), "no thinking <think> here");
  EXPECT_EQ(p.content, "no thinking <think> here");
  // deepseek_r1 strips an opening tag and reads until </think>.
  p = parse_all_ways(options("", "deepseek_r1", ReasoningStart::kReasoning), "<think>a</think>b");
  EXPECT_EQ(p.reasoning, "<think>a");
  EXPECT_EQ(p.content, "b");
}

TEST(ReasoningParser, ToolCallsAfterAndInsideAThought) {
  const auto o = options("qwen3_coder", "qwen3", ReasoningStart::kReasoning);
  Parsed p = parse_all_ways(o, "I need the weather.</think>\n\n<tool_call>\n<function=search>\n<parameter=query>\n"
                               "rain\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(p.reasoning, "I need the weather.");
  EXPECT_EQ(p.content, "\n\n");
  ASSERT_EQ(p.calls.size(), 1u);
  // Qwen3.5 may start a call without closing its thought.
  p = parse_all_ways(o, "Mentions <tool_call> in passing. Then calls.\n<tool_call>\n<function=search>\n"
                        "<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(p.reasoning, "Mentions <tool_call> in passing. Then calls.\n");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(args(p, 0)["query"], "x");
  // Tool-call tags inside reasoning are not calls.
  p = parse_all_ways(options("hermes", "qwen3", ReasoningStart::kReasoning),
                     "<tool_call>{\"name\": \"search\"}</tool_call></think>done");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "done");
}

TEST(ChatOutput, ParallelToolCallsFalseKeepsTheFirst) {
  auto o = options("hermes");
  o.parallel_tool_calls = false;
  Parsed p = parse_all_ways(o, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": "
                               "\"b\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0]["name"], "a");
}

TEST(ChatOutput, ForcedCallTagsCompileForBothFormats) {
  const std::string name = "search";
  const Json named = Json::parse(forced_tool_calls_structural_tag("qwen3_coder", kTools, &name, true));
  EXPECT_EQ(named["format"]["begin"], "<tool_call>\n<function=search>\n");
  const Json required = Json::parse(forced_tool_calls_structural_tag("hermes", kTools, nullptr, false));
  EXPECT_EQ(required["format"]["type"], "tags_with_separator");
  EXPECT_EQ(required["format"]["stop_after_first"], true);
  EXPECT_EQ(required["format"]["tags"].size(), 2u);
}

}  // namespace
}  // namespace hyllm::serve
