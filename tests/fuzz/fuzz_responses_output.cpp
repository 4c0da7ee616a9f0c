// The /v1/responses formatter fed model text: reasoning tags, tool-call
// markup (hermes and qwen3_coder) and arbitrary bytes, in the pieces a stream
// delivers. The first input byte picks how the output is read (reasoning
// parser and where it starts, tool-call parser, parallel calls, how the
// output ended); the rest is the model's text, cut into stream events at NUL
// bytes.
//
// The engine hands the formatter UTF-8 text (the detokenizer holds back an
// incomplete sequence and replaces invalid bytes), so each piece is made
// valid the same way before it goes in; a piece may still end inside a tag.
//
// Checked, besides that nothing throws: every SSE event is `event: TYPE`
// and `data: JSON` with that type; sequence numbers count 0, 1, 2, ...; the
// stream opens with response.created and response.in_progress and ends with
// response.completed; items are opened one at a time and closed before the
// next opens, every delta goes to the open item, and the .done text is its
// deltas joined; the completed response lists the items as they were closed;
// every call's arguments are JSON; and the whole (non-streamed)
// response says what the stream said (see said()).

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "serve/reasoning_parser.h"
#include "serve/response_format.h"
#include "serve/responses_output.h"
#include "text/tokenizer.h"

using namespace hyllm;
using namespace hyllm::serve;

namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer* tok = new Tokenizer(Tokenizer::from_model_dir(fuzz::tiny_model_dir()));
  return *tok;
}

// The request's tools, with a parameter of each JSON type (qwen3_coder
// converts argument text by the parameter's declared type).
const Json& tools() {
  static const Json* t = new Json(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "ratio": {"type": "number"},
      "metric": {"type": "boolean"}, "where": {"type": "object"}, "tags": {"type": "array"},
      "mode": {"enum": ["a", "b"]}, "any": {}}}}},
    {"type": "function", "function": {"name": "noop"}}])"));
  return *t;
}

// Invalid bytes become U+FFFD, as the detokenizer's output has them.
std::string utf8_lossy(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0xC2 && b <= 0xF4) len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (b < 0x80 || (len > 1 && i + len <= s.size() && fuzz::is_utf8(s.substr(i, len)))) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

ChatOutputOptions parsing_for(uint8_t config) {
  ChatOutputOptions p;
  switch (config & 3) {
    case 0: break;
    case 1: p.reasoning = reasoning_syntax("qwen3"); p.reasoning_start = ReasoningStart::kMayOpen; break;
    case 2: p.reasoning = reasoning_syntax("qwen3"); p.reasoning_start = ReasoningStart::kReasoning; break;
    case 3: p.reasoning = reasoning_syntax("deepseek_r1"); p.reasoning_start = ReasoningStart::kReasoning; break;
  }
  static constexpr const char* kToolParsers[] = {"", "hermes", "qwen3_coder", "qwen3_coder"};
  p.tool_parser = kToolParsers[(config >> 2) & 3];
  if (!p.tool_parser.empty()) p.tools = tools();
  p.parallel_tool_calls = (config & 16) != 0;
  return p;
}

std::unique_ptr<ResponseFormatter> formatter_for(const ChatOutputOptions& parsing) {
  const Tokenizer& tok = tokenizer();
  ResponsesShape shape;
  shape.echo = {{"temperature", 1.0}, {"top_p", 1.0}, {"max_output_tokens", 16}, {"tools", Json::array()}};
  if (parsing.reasoning) {
    shape.reasoning_open = tok.token_to_id(parsing.reasoning->open);
    shape.reasoning_close = tok.token_to_id(parsing.reasoning->close);
    shape.starts_in_reasoning = parsing.reasoning_start == ReasoningStart::kReasoning;
  }
  ResponseOptions options;
  options.id = "resp_fuzz";
  options.model = "hyllm-tiny";
  return make_responses_formatter(std::move(options), tok, parsing, std::move(shape));
}

// What a response says, however its items are interleaved: its reasoning,
// its text (blanks aside: blank text before a call is dropped, which a whole
// response, one delta, cannot tell apart), and its calls in order. A stream
// and a whole response must say the same; their items may interleave
// differently, since a whole response is one delta that lists text first.
Json said(const Json& items) {
  std::string reasoning, text;
  Json calls = Json::array();
  for (const Json& item : items) {
    if (item["type"] == "function_call") {
      // JSON, though not always an object: hermes passes on what the model
      // wrote as `arguments` ({"arguments": 6} gives "6"), as vLLM does.
      if (!Json::accept(item["arguments"].get<std::string>())) fuzz::finding("a call's arguments are not JSON");
      calls.push_back({item["name"], item["arguments"]});
      continue;
    }
    std::string& into = item["type"] == "reasoning" ? reasoning : text;
    for (const Json& part : item["content"]) into += part["text"].get<std::string>();
  }
  std::erase_if(text, [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
  return {reasoning, text, calls};
}

// Follows the events of one stream, checking each against what came before.
class StreamChecker {
 public:
  void on_event(const std::string& sse) {
    const size_t nl = sse.find('\n');
    if (!sse.starts_with("event: ") || nl == std::string::npos || !sse.ends_with("\n\n") ||
        sse.compare(nl + 1, 6, "data: ") != 0) {
      fuzz::finding("an event is not `event:` then `data:`");
    }
    const std::string type = sse.substr(7, nl - 7);
    Json e;
    try {
      e = Json::parse(sse.substr(nl + 7));
    } catch (const Json::exception&) {
      fuzz::finding("an event's data is not JSON");
    }
    if (e.value("type", "") != type) fuzz::finding("the `event:` line and the type differ");
    if (e.value("sequence_number", int64_t{-1}) != next_) fuzz::finding("sequence numbers skip or repeat");
    if ((next_ == 0) != (type == "response.created")) fuzz::finding("response.created is not first");
    if ((next_ == 1) != (type == "response.in_progress")) fuzz::finding("response.in_progress is not second");
    if (completed_) fuzz::finding("an event after response.completed");
    ++next_;
    if (type == "response.completed") {
      completed_ = true;
      if (open_) fuzz::finding("the stream completed with an item open");
      if (e["response"]["output"] != closed_) fuzz::finding("the completed response's output differs from the items");
      final_output_ = e["response"]["output"];
    } else if (type == "response.output_item.added") {
      if (open_) fuzz::finding("an item opened while another is open");
      if (e.value("output_index", size_t{0}) != closed_.size()) fuzz::finding("an item's output_index skips");
      open_ = true;
      open_id_ = e["item"]["id"];
      text_.clear();
    } else if (type == "response.output_item.done") {
      if (!open_ || e["item"]["id"] != open_id_) fuzz::finding("an item closed that was not open");
      open_ = false;
      closed_.push_back(e["item"]);
    } else if (type.ends_with(".delta")) {
      if (!open_ || e["item_id"] != open_id_) fuzz::finding("a delta for an item that is not open");
      if (!e["delta"].is_string() || e["delta"].get_ref<const std::string&>().empty()) {
        fuzz::finding("an empty delta");
      }
      text_ += e["delta"].get<std::string>();
    } else if (type == "response.output_text.done" || type == "response.reasoning_text.done") {
      if (!open_ || e["text"] != text_) fuzz::finding("a .done text is not its deltas joined");
    } else if (type == "response.function_call_arguments.done") {
      if (!open_ || e["arguments"] != text_) fuzz::finding("a call's arguments are not its deltas joined");
    }
  }

  void on_end() const {
    if (!completed_) fuzz::finding("the stream did not complete");
  }
  const Json& final_output() const { return final_output_; }

 private:
  int64_t next_ = 0;
  bool completed_ = false;
  bool open_ = false;
  Json open_id_;
  std::string text_;
  Json closed_ = Json::array();
  Json final_output_;
};

void run(uint8_t config, const std::vector<std::string>& pieces) {
  static constexpr FinishReason kEnds[] = {FinishReason::kStop, FinishReason::kLength, FinishReason::kAbort,
                                           FinishReason::kStop};
  const ChatOutputOptions parsing = parsing_for(config);
  const Tokenizer& tok = tokenizer();
  Usage usage;
  usage.prompt_tokens = 5;

  auto stream = formatter_for(parsing);
  StreamChecker checker;
  std::vector<Json> head;
  stream->stream_head(head);
  for (const Json& e : head) checker.on_event(stream->sse(e));
  ChoiceResult whole;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ChoiceEvent ev;
    ev.text = pieces[i];
    ev.token_ids = tok.encode(ev.text, false);
    ev.first = i == 0;
    if (i + 1 == pieces.size()) ev.finish_reason = kEnds[(config >> 5) & 3];
    usage.completion_tokens += static_cast<int64_t>(ev.token_ids.size());
    ChoiceEvent copy = ev;
    std::vector<Json> chunks;
    stream->stream_chunks(ev, usage, chunks);
    for (const Json& e : chunks) checker.on_event(stream->sse(e));
    whole.add(std::move(copy));
  }
  checker.on_event(stream->stream_tail(usage, std::nullopt));
  checker.on_end();

  std::vector<ChoiceResult> choices{std::move(whole)};
  const Json response = formatter_for(parsing)->full_response(choices, usage);
  if (said(response["output"]) != said(checker.final_output())) {
    std::fprintf(stderr, "stream: %s\nwhole:  %s\n", checker.final_output().dump().c_str(),
                 response["output"].dump().c_str());
    fuzz::finding("the whole response's items differ from the stream's");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<std::string> pieces;
  for (std::string_view piece : fuzz::split_nul(fuzz::as_text(data + 1, size - 1), 64)) {
    pieces.push_back(utf8_lossy(piece));
  }
  // Model text is never the client's fault: any exception is a finding.
  try {
    run(data[0], pieces);
  } catch (const std::exception& e) {
    fuzz::finding(e.what());
  }
  return 0;
}
