// text_completion bodies for /v1/completions.

#include "serve/response_format.h"

namespace hyllm::serve {
namespace {

class CompletionFormatter final : public ResponseFormatter {
 public:
  CompletionFormatter(ResponseOptions options, const Tokenizer* tokenizer, std::vector<std::string> echo_prompts,
                      std::vector<std::vector<int32_t>> prompt_ids, int n, bool echo_only)
      : ResponseFormatter(std::move(options), tokenizer),
        echo_(std::move(echo_prompts)),
        prompt_ids_(std::move(prompt_ids)),
        n_(n),
        echo_only_(echo_only) {}

  void stream_chunks(ChoiceEvent& ev, const Usage& usage, std::vector<Json>& out) override {
    const size_t prompt = static_cast<size_t>(ev.index / n_);
    const bool echo = prompt < echo_.size();
    // Offsets count the whole choice text, the echoed prompt included.
    const size_t offset = ev.text_offset + (echo ? utf8_length(echo_[prompt]) : 0);
    Json choice;
    choice["index"] = ev.index;
    choice["text"] = (ev.first && echo ? echo_[prompt] : std::string()) + (echo_only_ ? std::string() : ev.text);
    choice["logprobs"] = logprobs(echo_only_ ? kNone : ev.logprobs, offset,
                                  ev.first && echo ? ev.prompt_logprobs.get() : nullptr, prompt);
    choice["finish_reason"] = finish_reason_json(ev.finish_reason);
    choice["stop_reason"] = stop_reason_json(ev.stop_reason);
    if (options_.return_token_ids) {
      if (ev.first) choice["prompt_token_ids"] = prompt_ids_.at(prompt);
      choice["token_ids"] = echo_only_ ? std::vector<int32_t>() : ev.token_ids;
    }
    Json chunk = chunk_header(chunk_object());
    chunk["choices"] = Json::array({std::move(choice)});
    add_chunk_usage(chunk, usage);
    out.push_back(std::move(chunk));
  }

  Json full_response(std::vector<ChoiceResult>& choices, const Usage& usage) override {
    Json j = chunk_header(chunk_object());
    j["choices"] = Json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      auto& c = choices[i];
      const size_t prompt = i / static_cast<size_t>(n_);
      std::string prefix = prompt < echo_.size() ? echo_[prompt] : std::string();
      Json choice;
      choice["index"] = i;
      choice["text"] = prefix + (echo_only_ ? std::string() : c.text);
      const bool echo = prompt < echo_.size();
      choice["logprobs"] = logprobs(echo_only_ ? kNone : c.logprobs, utf8_length(prefix),
                                    echo ? c.prompt_logprobs.get() : nullptr, prompt);
      choice["finish_reason"] = finish_reason_json(c.finish_reason);
      choice["stop_reason"] = stop_reason_json(c.stop_reason);
      choice["prompt_logprobs"] = options_.prompt_logprobs && c.prompt_logprobs
                                      ? prompt_logprobs_json(*c.prompt_logprobs, *options_.prompt_logprobs, text_)
                                      : Json(nullptr);
      if (options_.return_token_ids) {
        choice["prompt_token_ids"] = prompt_ids_.at(prompt);
        choice["token_ids"] = echo_only_ ? std::vector<int32_t>() : c.token_ids;
      }
      j["choices"].push_back(std::move(choice));
    }
    j["usage"] = usage_json(usage);
    return j;
  }

 private:
  const char* chunk_object() const override { return "text_completion"; }

  // With echo, `scored` (the prompt's logprobs) puts the prompt's tokens first.
  Json logprobs(const std::vector<TokenLogprob>& tokens, size_t offset, const std::vector<TokenLogprob>* scored,
                size_t prompt) const {
    if (!options_.logprobs) return nullptr;
    Json out = completion_logprobs_json(tokens, *options_.logprobs, text_, offset);
    if (!scored) return out;
    Json echoed = echoed_prompt_logprobs_json(prompt_ids_.at(prompt).front(), *scored, *options_.logprobs, text_);
    append_completion_logprobs(echoed, out);
    return echoed;
  }

  // echo without generation shows no output token: these stand for them.
  inline static const std::vector<TokenLogprob> kNone;

  std::vector<std::string> echo_;
  std::vector<std::vector<int32_t>> prompt_ids_;
  int n_;
  bool echo_only_;
};

}  // namespace

std::unique_ptr<ResponseFormatter> make_completion_formatter(ResponseOptions options, const Tokenizer* tokenizer,
                                                             std::vector<std::string> echo_prompts,
                                                             std::vector<std::vector<int32_t>> prompt_ids, int n,
                                                             bool echo_only) {
  return std::make_unique<CompletionFormatter>(std::move(options), tokenizer, std::move(echo_prompts),
                                               std::move(prompt_ids), n, echo_only);
}

}  // namespace hyllm::serve
