// `response` objects and their event streams for /v1/responses.
//
// A stream, as vLLM sends it: response.created and response.in_progress (the
// response with no output yet), the items' events as the text arrives, and
// response.completed with the whole response (its status says whether the
// output-token limit cut it short). Every event names its type on an
// `event:` line and carries a sequence_number counting from 0; there is no
// [DONE]. An engine failure ends the stream with an `error` event instead.

#include "serve/api_error.h"
#include "serve/chat_output.h"
#include "serve/response_format.h"
#include "serve/responses_output.h"
#include "serve/sse.h"

namespace hyllm::serve {
namespace {

const char* status_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "incomplete";
    case FinishReason::kAbort: return "cancelled";
    default: return "completed";
  }
}

class ResponsesFormatter final : public ResponseFormatter {
 public:
  ResponsesFormatter(ResponseOptions options, const Tokenizer& tokenizer, ChatOutputOptions parsing,
                     ResponsesShape shape)
      : ResponseFormatter(std::move(options), tokenizer),
        parsing_(std::move(parsing)),
        shape_(std::move(shape)),
        parser_(parsing_),
        output_(!parsing_.tool_parser.empty()) {}

  std::string sse(const Json& payload) const override {
    std::string out = "event: ";
    out += payload.value("type", "message");
    out += '\n';
    out += sse_event(payload);
    return out;
  }

  void stream_head(std::vector<Json>& out) override {
    Json response = response_json(options_.id, options_.created, options_.model, shape_, "in_progress",
                                  Json::array(), nullptr);
    out.push_back(numbered({{"type", "response.created"}, {"sequence_number", 0}, {"response", response}}));
    out.push_back(numbered({{"type", "response.in_progress"}, {"sequence_number", 0}, {"response", response}}));
  }

  void stream_chunks(ChoiceEvent& ev, const Usage&, std::vector<Json>& out) override {
    std::vector<Json> events;
    output_.push(parser_.push(ev.text), events);
    if (ev.finished()) {
      output_.push(parser_.finish(), events);
      output_.finish(events);
    }
    for (auto& e : events) out.push_back(numbered(std::move(e)));
    result_.add(std::move(ev));
  }

  std::string stream_tail(const Usage& usage, const std::optional<ApiError>& error) override {
    if (error) {
      return sse(numbered({{"type", "error"},
                           {"sequence_number", 0},
                           {"code", error->type()},
                           {"message", error->what()},
                           {"param", nullptr}}));
    }
    Json done = {{"type", "response.completed"},
                 {"sequence_number", 0},
                 {"response", final_response(result_, usage, output_.items())}};
    return sse(numbered(std::move(done)));
  }

  Json full_response(std::vector<ChoiceResult>& choices, const Usage& usage) override {
    const ChoiceResult& choice = choices.at(0);
    ChatOutputParser parser(parsing_);
    ResponsesOutput output(!parsing_.tool_parser.empty());
    std::vector<Json> unused;
    output.push(parser.push(choice.text), unused);
    output.push(parser.finish(), unused);
    output.finish(unused);
    return final_response(choice, usage, output.items());
  }

 private:
  const char* chunk_object() const override { return "response"; }

  Json numbered(Json event) {
    event["sequence_number"] = sequence_++;
    return event;
  }

  Json final_response(const ChoiceResult& choice, const Usage& usage, const Json& items) const {
    const int64_t reasoning = count_reasoning_tokens(choice.token_ids, shape_);
    return response_json(options_.id, options_.created, options_.model, shape_, status_name(choice.finish_reason),
                         items, responses_usage_json(usage, reasoning));
  }

  ChatOutputOptions parsing_;
  ResponsesShape shape_;
  ChatOutputParser parser_;  // the stream's
  ResponsesOutput output_;   // the stream's
  ChoiceResult result_;      // the stream's choice, accumulated
  int64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<ResponseFormatter> make_responses_formatter(ResponseOptions options, const Tokenizer& tokenizer,
                                                            ChatOutputOptions parsing, ResponsesShape shape) {
  return std::make_unique<ResponsesFormatter>(std::move(options), tokenizer, std::move(parsing), std::move(shape));
}

}  // namespace hyllm::serve
