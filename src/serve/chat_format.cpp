// chat.completion bodies for /v1/chat/completions.

#include "serve/response_format.h"

namespace hyllm::serve {
namespace {

class ChatFormatter final : public ResponseFormatter {
 public:
  ChatFormatter(ResponseOptions options, const Tokenizer& tokenizer, std::string echo_prefix,
                std::vector<int32_t> prompt_ids)
      : ResponseFormatter(std::move(options), tokenizer),
        echo_(std::move(echo_prefix)),
        prompt_ids_(std::move(prompt_ids)) {}

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
    choice["delta"] = {{"content", ev.first ? echo_ + ev.text : ev.text}};
    choice["logprobs"] = logprobs(ev.logprobs);
    choice["finish_reason"] = finish_reason_json(ev.finish_reason);
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
      message["content"] = echo_ + c.text;
      message["refusal"] = nullptr;
      message["tool_calls"] = Json::array();
      Json choice;
      choice["index"] = i;
      choice["message"] = std::move(message);
      choice["logprobs"] = logprobs(c.logprobs);
      choice["finish_reason"] = finish_reason_json(c.finish_reason);
      choice["stop_reason"] = stop_reason_json(c.stop_reason);
      if (options_.return_token_ids) choice["token_ids"] = c.token_ids;
      j["choices"].push_back(std::move(choice));
    }
    j["usage"] = usage_json(usage);
    j["prompt_logprobs"] = nullptr;
    if (options_.return_token_ids) j["prompt_token_ids"] = prompt_ids_;
    return j;
  }

 private:
  const char* chunk_object() const override { return "chat.completion.chunk"; }

  Json logprobs(const std::vector<TokenLogprob>& tokens) const {
    if (!options_.logprobs) return nullptr;
    return chat_logprobs_json(tokens, *options_.logprobs, text_);
  }

  std::string echo_;
  std::vector<int32_t> prompt_ids_;
};

}  // namespace

std::unique_ptr<ResponseFormatter> make_chat_formatter(ResponseOptions options, const Tokenizer& tokenizer,
                                                       std::string echo_prefix, std::vector<int32_t> prompt_ids) {
  return std::make_unique<ChatFormatter>(std::move(options), tokenizer, std::move(echo_prefix),
                                         std::move(prompt_ids));
}

}  // namespace hyllm::serve
