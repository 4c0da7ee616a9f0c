#pragma once
// The only engine types the server sees. An EngineClient owns the engine
// thread (which owns the scheduler, the cache and the model executor); callers
// on any thread submit token-id requests and read one ResponseStream each.
//
// Semantics follow vLLM V1:
//  - one RequestOutput per engine step per request that has news (new tokens
//    or a finish); outputs are never merged, so a server can send one SSE
//    event per output;
//  - n > 1 choices share the prompt's computation, then run as independent
//    sequences; a choice's output tokens survive preemption (recompute), and
//    each token is reported once;
//  - abort(request_id) frees the request's KV blocks and state slots within one
//    step and ends its stream with FinishReason::kAbort;
//  - an exception while serving one request ends that request with
//    FinishReason::kError and a message; the engine keeps running.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_stats.h"
#include "engine/sampling_params.h"
#include "engine/token_logprob.h"
#include "engine/token_constraint.h"

namespace hyllm {

class ModelExecutor;

// What the caller's detokenizer says about the tokens just appended to one choice.
struct StopCheck {
  // Set when a stop string matched: the choice finishes with kStop and this
  // string as stop_reason. (The caller trims the text; the engine keeps the tokens.)
  std::optional<std::string> matched_stop;
  // Text for these tokens, passed through unchanged in CompletionOutput::text,
  // so a caller that detokenizes here need not do it twice. May stay empty.
  std::string text;
};

// Supplied per request by the caller; the engine calls it on its own thread,
// for each choice in order, exactly once per appended token (never again for
// tokens recomputed after preemption). It is not called for a token that ends
// the choice as EOS or a stop_token_id (vLLM does not detokenize that token);
// it is called for the token that reaches max_tokens, and a stop string
// matched there wins over kLength, as in vLLM. `may_stop` is false while the
// choice has no more than min_tokens tokens (vLLM checks stop strings only
// after min_tokens); a match returned then is ignored. An exception thrown
// here fails only this request (kError).
class StopStringHook {
 public:
  virtual ~StopStringHook() = default;
  virtual StopCheck on_tokens(int choice_index, std::span<const int32_t> new_token_ids,
                              bool may_stop) = 0;
};

struct EngineRequest {
  std::string request_id;                // unique among live requests
  std::vector<int32_t> prompt_token_ids; // non-empty, each < vocab size
  SamplingParams sampling;               // max_tokens already resolved by the caller
  std::chrono::steady_clock::time_point arrival_time = std::chrono::steady_clock::now();
  std::shared_ptr<StopStringHook> stop_hook;  // needed only when sampling.stop is non-empty
  // Structured output: empty, or one constraint per choice (sampling.n of
  // them); choice i samples only tokens constraints[i] allows.
  std::vector<std::shared_ptr<TokenConstraint>> constraints;
  // vLLM's cache_salt: when set, this request hits only prefixes cached by
  // requests with the same salt (a per-tenant prefix cache).
  std::string cache_salt;
};

// stop_reason as vLLM reports it: the stop token id, the matched stop string,
// or nothing (EOS, length, abort, error).
using StopReason = std::variant<std::monostate, int32_t, std::string>;

struct CompletionOutput {
  int index = 0;                        // choice index, 0..n-1
  std::vector<int32_t> new_token_ids;   // since this choice's previous output
  std::vector<TokenLogprob> logprobs;   // parallel to new_token_ids when sampling.logprobs is set
  std::string text;                     // concatenated StopCheck::text of these tokens
  FinishReason finish_reason = FinishReason::kNone;  // kNone while running
  StopReason stop_reason;
  int num_output_tokens = 0;            // cumulative for this choice
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct RequestOutput {
  std::string request_id;
  // Only the choices with news in this step, in choice order.
  std::vector<CompletionOutput> outputs;
  int num_prompt_tokens = 0;
  int num_cached_tokens = 0;            // prompt tokens served from the prefix cache
  // sampling.prompt_logprobs set: the prompt's tokens 1..P-1, each given the
  // tokens before it (top_logprobs: prompt_logprobs entries), in the
  // request's first output only; empty elsewhere.
  std::vector<TokenLogprob> prompt_logprobs;
  bool finished = false;                // every choice has finished: the stream's last output
  std::string error_message;            // set when a choice finished with kError
  int error_status = 500;               // its HTTP status: 400 when the request's own limits caused it
};

// The outputs of one request, in order. Written by the engine thread, read by
// one consumer (any thread). Thread-safe.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Waits up to `timeout` for the next output. Returns nullopt on timeout or
  // once the final output (finished == true) has been taken; ended() tells which.
  virtual std::optional<RequestOutput> next(std::chrono::milliseconds timeout) = 0;
  // True once the final output has been taken.
  virtual bool ended() const = 0;
  virtual const std::string& request_id() const = 0;
};

enum class EngineState { kStarting, kReady, kDraining, kStopped, kDead };

class EngineClient {
 public:
  virtual ~EngineClient() = default;

  // Starts the engine thread (make_engine_client already did; idempotent).
  virtual void start() = 0;
  // Throws Error(kInvalidArgument) for a request that can never run: empty
  // prompt, token id out of vocabulary, bad sampling values, prompt + max_tokens
  // above max_model_len (the message contains "maximum context length is"),
  // more KV or state slots than the whole cache, a live duplicate request_id.
  // Throws Error(kUnavailable) when the engine is draining, stopped or dead.
  virtual std::shared_ptr<ResponseStream> submit(EngineRequest request) = 0;
  // Submits every request at once, as vLLM's offline generate() adds a whole
  // batch before its first step: the engine's next step sees all of them,
  // where requests submitted one by one may find a step already started with
  // the first few. All or nothing: submit's errors (and an id repeated
  // within the batch) refuse the whole batch. The streams come in order.
  virtual std::vector<std::shared_ptr<ResponseStream>> submit_batch(std::vector<EngineRequest> requests) = 0;
  // Ends the request with kAbort within one step; unknown or finished ids are ignored.
  virtual void abort(const std::string& request_id) = 0;
  virtual EngineStats stats() const = 0;
  // Forgets every cached prefix (POST /reset_prefix_cache) between two steps
  // and says whether it did: false while requests run, unless
  // reset_running_requests, which preempts them first (they recompute).
  // Throws Error(kUnavailable) when the engine is not running.
  virtual bool reset_prefix_cache(bool reset_running_requests) = 0;
  // Stops accepting requests, lets running ones finish for up to
  // `drain_timeout`, aborts the rest (kAbort) and joins the engine thread.
  virtual void shutdown(std::chrono::milliseconds drain_timeout) = 0;
  virtual EngineState state() const = 0;
  bool is_ready() const { return state() == EngineState::kReady; }
  virtual const EngineConfig& config() const = 0;
};

// Validates the config, sizes and allocates the cache through the executor
// (logging the KV capacity and the maximum concurrency at max_model_len), and
// starts the engine thread. Throws Error(kInvalidArgument) when max_model_len
// exceeds the KV capacity (vLLM's message) or the config is invalid.
std::unique_ptr<EngineClient> make_engine_client(std::unique_ptr<ModelExecutor> executor,
                                                 EngineConfig config);

}  // namespace hyllm
