// chat.completion bodies for /v1/chat/completions.

#include <map>

#include "serve/chat_output.h"
#include "serve/response_format.h"

namespace hyllm::serve {
namespace {

class ChatFormatter final : public ResponseFormatter {
 public:
  ChatFormatter(ResponseOptions options, const Tokenizer& tokenizer, std::string echo_prefix,
                std::vector<int32_t> prompt_ids, ChatOutputOptions parsing)
      : ResponseFormatter(std::move(options), tokenizer),
        echo_(std::move(echo_prefix)),
        prompt_ids_(std::move(prompt_ids)),
        parsing_(std::move(parsing)) {}

  void stream_chunks(ChoiceEvent& ev, const Usage& usage, std::vector<Json>& out) override {
    if (ev.first) {
      // vLLM sends the role on its own before the choice's first content, in
      // the same step (never ahead of the first token).
      Json choice;
      choice["index"] = ev.index;
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
      choice["logprobs"] = nullptr;
      choice["finish_reason"] = nullptr;
      Json chunk = chunk_header(chunk_object());
      chunk["choices"] = Json::array({std::move(choice)});
      if (options_.return_token_ids) chunk["prompt_token_ids"] = prompt_ids_;
      add_chunk_usage(chunk, usage);
      out.push_back(std::move(chunk));
    }
    Json choice;
    choice["index"] = ev.index;
    Json finish = finish_reason_json(ev.finish_reason);
    if (!parsing_.enabled()) {
      choice["delta"] = {{"content", ev.first ? echo_ + ev.text : ev.text}};
    } else {
      ChatOutputParser& parser = parsers_.try_emplace(ev.index, parsing_).first->second;
      ChatDelta d = parser.push(ev.text);
      if (ev.finished()) d.append(parser.finish());
      if (ev.first) d.content = echo_ + d.content;
      // Like vLLM, a step whose text is all held back sends nothing.
      if (d.empty() && !ev.finished() && ev.logprobs.empty() && !options_.return_token_ids) return;
      choice["delta"] = delta_json(d);
      if (ev.finish_reason == FinishReason::kStop && parser.called_tools()) finish = "tool_calls";
    }
    choice["logprobs"] = logprobs(ev.logprobs);
    choice["finish_reason"] = std::move(finish);
    if (ev.finished()) choice["stop_reason"] = stop_reason_json(ev.stop_reason);
    if (options_.return_token_ids) choice["token_ids"] = ev.token_ids;
    Json chunk = chunk_header(chunk_object());
    chunk["choices"] = Json::array({std::move(choice)});
    add_chunk_usage(chunk, usage);
    out.push_back(std::move(chunk));
  }

  Json full_response(std::vector<ChoiceResult>& choices, const Usage& usage) override {
    Json j = chunk_header("chat.completion");
    j["choices"] = Json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      auto& c = choices[i];
      Json message;
      message["role"] = "assistant";
      Json finish = finish_reason_json(c.finish_reason);
      if (!parsing_.enabled()) {
        message["content"] = echo_ + c.text;
        message["refusal"] = nullptr;
        message["tool_calls"] = Json::array();
      } else {
        ChatOutputParser parser(parsing_);
        ChatDelta d = parser.push(c.text);
        d.append(parser.finish());
        d.content = echo_ + d.content;
        message["content"] = d.content.empty() ? Json(nullptr) : Json(d.content);
        message["refusal"] = nullptr;
        message["tool_calls"] = tool_calls_json(d.tool_calls);
        if (parsing_.reasoning) message["reasoning"] = d.reasoning.empty() ? Json(nullptr) : Json(d.reasoning);
        if (c.finish_reason == FinishReason::kStop && parser.called_tools()) finish = "tool_calls";
      }
      Json choice;
      choice["index"] = i;
      choice["message"] = std::move(message);
      choice["logprobs"] = logprobs(c.logprobs);
      choice["finish_reason"] = std::move(finish);
      choice["stop_reason"] = stop_reason_json(c.stop_reason);
      if (options_.return_token_ids) choice["token_ids"] = c.token_ids;
      j["choices"].push_back(std::move(choice));
    }
    j["usage"] = usage_json(usage);
    // Every choice shares the prompt and carries the same ones (a choice that
    // ended before any token carries none).
    const std::vector<TokenLogprob>* scored = nullptr;
    for (const ChoiceResult& c : choices) {
      if (!scored) scored = c.prompt_logprobs.get();
    }
    j["prompt_logprobs"] = options_.prompt_logprobs && scored
                               ? prompt_logprobs_json(*scored, *options_.prompt_logprobs, text_)
                               : Json(nullptr);
    if (options_.return_token_ids) j["prompt_token_ids"] = prompt_ids_;
    return j;
  }

 private:
  const char* chunk_object() const override { return "chat.completion.chunk"; }

  Json logprobs(const std::vector<TokenLogprob>& tokens) const {
    if (!options_.logprobs) return nullptr;
    return chat_logprobs_json(tokens, *options_.logprobs, text_);
  }

  static Json delta_json(const ChatDelta& d) {
    Json delta = Json::object();
    if (!d.reasoning.empty()) delta["reasoning"] = d.reasoning;
    if (!d.content.empty() || (d.reasoning.empty() && d.tool_calls.empty())) delta["content"] = d.content;
    if (!d.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCallDelta& t : d.tool_calls) {
        Json call;
        call["index"] = t.index;
        if (t.id) call["id"] = *t.id;
        if (t.name) call["type"] = "function";
        Json fn = Json::object();
        if (t.name) fn["name"] = *t.name;
        fn["arguments"] = t.arguments;
        call["function"] = std::move(fn);
        calls.push_back(std::move(call));
      }
      delta["tool_calls"] = std::move(calls);
    }
    return delta;
  }

  std::string echo_;
  std::vector<int32_t> prompt_ids_;
  ChatOutputOptions parsing_;
  std::map<int, ChatOutputParser> parsers_;  // per choice index, while streaming
};

}  // namespace

std::unique_ptr<ResponseFormatter> make_chat_formatter(ResponseOptions options, const Tokenizer& tokenizer,
                                                       std::string echo_prefix, std::vector<int32_t> prompt_ids,
                                                       ChatOutputOptions parsing) {
  return std::make_unique<ChatFormatter>(std::move(options), tokenizer, std::move(echo_prefix),
                                         std::move(prompt_ids), std::move(parsing));
}

}  // namespace hyllm::serve
