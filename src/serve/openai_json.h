#pragma once
// JSON pieces of OpenAI responses shared by completions and chat: usage,
// logprobs, ids, and the one function that prints JSON (invalid UTF-8 from a
// partial token is replaced, never thrown on).

#include "engine/engine_client.h"
#include "serve/json.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hyllm::serve {

// Prints compactly; invalid UTF-8 becomes U+FFFD instead of an exception.
std::string dump_json(const Json& value);

// "chatcmpl-" + 32 hex digits, "cmpl-" + ..., unique per process.
std::string make_request_id(const char* prefix);
int64_t unix_time_seconds();

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<int64_t> cached_tokens;  // prompt tokens served from the prefix cache
};
Json usage_json(const Usage& usage);

// What a client sees of one token: its text and raw bytes.
class TokenText {
 public:
  virtual ~TokenText() = default;
  virtual std::string text(int32_t token) const = 0;
  virtual std::string bytes(int32_t token) const = 0;
};

// Characters (code points) in UTF-8 text, as Python's len() counts them.
size_t utf8_length(std::string_view text);

// -inf (and NaN) print as -9999.0, as vLLM does: JSON has no infinity.
double printable_logprob(float logprob);

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
Json chat_logprobs_json(const std::vector<TokenLogprob>& tokens, int top_n, const TokenText& text);

// Completions: {tokens, token_logprobs, top_logprobs, text_offset}; offsets
// start at text_offset (the choice's text length in characters before these
// tokens).
Json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, int top_n,
                                        const TokenText& text, size_t text_offset);

// Completions with echo and logprobs: the prompt's tokens in the same four
// lists, from offset 0. The first token has no logprob (null, and null top
// logprobs); `scored` holds the others' (engine prompt logprobs).
Json echoed_prompt_logprobs_json(int32_t first_token, const std::vector<TokenLogprob>& scored, int top_n,
                                 const TokenText& text);
// Appends b's four lists to a's.
void append_completion_logprobs(Json& a, const Json& b);

// vLLM's prompt_logprobs: [null, {"<id>": {logprob, rank, decoded_token}}, ...],
// one entry per prompt token; each dict holds the prompt token and the top_n
// most likely tokens at its position (ranked 1..top_n).
Json prompt_logprobs_json(const std::vector<TokenLogprob>& scored, int top_n, const TokenText& text);

}  // namespace hyllm::serve
