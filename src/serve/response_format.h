#pragma once
// The bodies of completions and chat responses, streamed (one chunk per
// choice event) and whole, in vLLM's field order and null conventions.

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/chat_output.h"
#include "serve/generation.h"
#include "serve/json.h"
#include "serve/openai_json.h"
#include "serve/sampling_request.h"
#include "text/tokenizer.h"

namespace hyllm::serve {

// Token strings and bytes for logprobs, from the tokenizer. Without one
// (--skip-tokenizer-init), or when the request asks with
// return_tokens_as_token_ids, a token is spelled "token_id:N", as vLLM spells
// it: ids are unambiguous where several tokens decode to the same text.
class TokenizerText final : public TokenText {
 public:
  explicit TokenizerText(const Tokenizer* tokenizer, bool spell_ids = false)
      : tokenizer_(tokenizer), spell_ids_(spell_ids || tokenizer == nullptr) {}
  std::string text(int32_t token) const override;
  std::string bytes(int32_t token) const override;

 private:
  const Tokenizer* tokenizer_;
  bool spell_ids_;
};

// A whole choice, accumulated from its events.
struct ChoiceResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprob> logprobs;
  std::shared_ptr<const std::vector<TokenLogprob>> prompt_logprobs;  // see ChoiceEvent
  FinishReason finish_reason = FinishReason::kNone;
  StopReason stop_reason;
  void add(ChoiceEvent&& ev);
};

Json finish_reason_json(FinishReason reason);  // null while running
Json stop_reason_json(const StopReason& reason);

struct ResponseOptions {
  std::string id;
  int64_t created = 0;
  std::string model;
  std::optional<int> logprobs;      // top-N when logprobs were asked for
  std::optional<int> prompt_logprobs;  // top-N when prompt logprobs were asked for (or echo with logprobs)
  bool include_usage = false;        // stream: a last chunk with usage
  bool continuous_usage = false;     // stream: usage on every chunk
  bool return_token_ids = false;
  bool tokens_as_token_ids = false;  // logprobs' tokens spelled "token_id:N"
};

// The top entries shown per prompt position: -1 (the whole vocabulary) shows all.
inline std::optional<int> prompt_logprobs_shown(std::optional<int> requested) {
  if (requested && *requested == -1) return std::numeric_limits<int>::max();
  return requested;
}

// A completions or chat response's options: its id, the served model name,
// the creation time (now), and what the request's sampling fields ask to show.
ResponseOptions response_options(std::string id, std::string model, const SamplingRequest& sampling);

class ResponseFormatter {
 public:
  ResponseFormatter(ResponseOptions options, const Tokenizer* tokenizer)
      : options_(std::move(options)), text_(tokenizer, options_.tokens_as_token_ids) {}
  ResponseFormatter(ResponseOptions options, const Tokenizer& tokenizer)
      : ResponseFormatter(std::move(options), &tokenizer) {}
  virtual ~ResponseFormatter() = default;

  const ResponseOptions& options() const { return options_; }
  // The SSE payloads for one choice event. `usage` is the running usage, for
  // continuous_usage_stats.
  virtual void stream_chunks(ChoiceEvent& ev, const Usage& usage, std::vector<Json>& out) = 0;
  // The last chunk when include_usage: no choices, the final usage.
  Json usage_chunk(const Usage& usage) const;
  virtual Json full_response(std::vector<ChoiceResult>& choices, const Usage& usage) = 0;

  // A stream's framing. Chat and completions send bare `data:` events and
  // nothing before the first token; they end with an error event when the
  // engine failed, the usage chunk when asked for, and [DONE]. The Responses
  // API names each event's type, opens with the response's creation, and
  // ends with the whole response instead.
  virtual std::string sse(const Json& payload) const;
  virtual void stream_head(std::vector<Json>& out) { (void)out; }
  virtual std::string stream_tail(const Usage& usage, const std::optional<ApiError>& error);

 protected:
  Json chunk_header(const char* object) const;
  void add_chunk_usage(Json& chunk, const Usage& usage) const;
  virtual const char* chunk_object() const = 0;

  ResponseOptions options_;
  TokenizerText text_;
};

// /v1/completions: text_completion objects. Echo puts each prompt's text in
// front of its choices; echo_only (echo with max_tokens 0) shows the prompt
// alone, leaving out the one token the engine computed. A null tokenizer:
// see TokenizerText.
std::unique_ptr<ResponseFormatter> make_completion_formatter(ResponseOptions options, const Tokenizer* tokenizer,
                                                             std::vector<std::string> echo_prompts,
                                                             std::vector<std::vector<int32_t>> prompt_ids, int n,
                                                             bool echo_only = false);

// /v1/chat/completions: chat.completion(.chunk) objects; a choice's first
// chunk is the role delta {"role": "assistant", "content": ""}. With
// `parsing` enabled, text is split into reasoning, content and tool calls.
std::unique_ptr<ResponseFormatter> make_chat_formatter(ResponseOptions options, const Tokenizer& tokenizer,
                                                       std::string echo_prefix, std::vector<int32_t> prompt_ids,
                                                       ChatOutputOptions parsing = {});

// /v1/responses: one `response` object (see responses_output.h), or its
// stream of typed events.
struct ResponsesShape;
std::unique_ptr<ResponseFormatter> make_responses_formatter(ResponseOptions options, const Tokenizer& tokenizer,
                                                            ChatOutputOptions parsing, ResponsesShape shape);

}  // namespace hyllm::serve
