#pragma once
// One HTTP request's generation: one engine request per prompt (a completions
// batch has several), turned into per-choice events of new text, token ids,
// logprobs and finish reasons. Choices are numbered prompt * n + i, as in vLLM.
// Used by one thread; abort() may be called from the same thread at any time
// (the destructor aborts whatever is still running).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "serve/api_error.h"
#include "serve/choice_text.h"
#include "serve/openai_json.h"
#include "text/tokenizer.h"

namespace hyllm::serve {

struct ChoiceEvent {
  int index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprob> logprobs;
  size_t text_offset = 0;  // characters of this choice's text before `text`
  bool first = false;      // the choice's first event
  // On a choice's first event, when its prompt asked for prompt logprobs and
  // the engine has sent them (tokens 1..P-1 of the prompt); else null.
  std::shared_ptr<const std::vector<TokenLogprob>> prompt_logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  StopReason stop_reason;
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct GenerationOptions {
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  std::string cache_salt;  // EngineRequest::cache_salt of every prompt
};

class Generation {
 public:
  // request_id names the engine requests (with a suffix per prompt). n and
  // the stop strings are the same for every prompt. A null tokenizer
  // (--skip-tokenizer-init) gives events with token ids and empty text.
  Generation(EngineClient& engine, const Tokenizer* tokenizer, std::string request_id, int n,
             std::vector<std::string> stop, GenerationOptions options);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits one prompt with its resolved parameters (max_tokens may differ
  // per prompt); throws hyllm::Error from the engine's validation
  // (kInvalidArgument -> 400, kUnavailable -> 503).
  // constraints: structured output, empty or one per choice.
  void add_prompt(std::vector<int32_t> prompt_token_ids, SamplingParams sampling,
                  std::vector<std::shared_ptr<TokenConstraint>> constraints = {});

  // Waits up to `timeout` for news from any prompt; returns the events of one
  // engine step (empty on timeout). An engine-side failure ends its choices
  // with kError; error() tells why, with the HTTP status it deserves.
  std::vector<ChoiceEvent> next(std::chrono::milliseconds timeout);
  bool done() const { return unfinished_ == 0; }
  void abort();

  Usage usage() const;
  std::optional<ApiError> error() const;
  const std::vector<int32_t>& prompt_ids(size_t prompt) const { return prompts_.at(prompt).ids; }
  size_t num_prompts() const { return prompts_.size(); }
  int n() const { return n_; }

 private:
  struct Prompt {
    std::vector<int32_t> ids;
    std::shared_ptr<RequestText> text;
    std::shared_ptr<ResponseStream> stream;
    bool wants_prompt_logprobs = false;
    std::shared_ptr<const std::vector<TokenLogprob>> prompt_logprobs;  // once the engine sent them
    int num_cached_tokens = 0;
    bool ended = false;
  };
  struct ChoiceState {
    size_t chars = 0;
    int64_t tokens = 0;
    bool started = false;
    bool finished = false;
  };
  void handle(size_t prompt, RequestOutput out, std::vector<ChoiceEvent>& events);

  EngineClient& engine_;
  const Tokenizer* tokenizer_;
  std::string request_id_;
  int n_;
  std::vector<std::string> stop_;
  GenerationOptions options_;
  std::vector<Prompt> prompts_;
  std::vector<ChoiceState> choices_;
  size_t unfinished_ = 0;  // prompts whose stream has not ended
  size_t cursor_ = 0;      // round-robin start among prompts
  std::string error_;
  int error_status_ = 500;
};

}  // namespace hyllm::serve
