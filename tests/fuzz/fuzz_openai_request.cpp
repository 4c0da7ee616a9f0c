// OpenAI request bodies through validation into sampling parameters. The
// first input byte picks the endpoint (chat completions, completions,
// tokenize, detokenize); the rest is the body. Chat and completion bodies
// go through the handlers' steps up to the engine: parse and validate, check
// the model name, render the chat template and tokenize (or take the prompt
// ids), resolve the sampling parameters against the context length, and the
// engine's own validation (EngineCore::validate over the embedded model).
//
// Expected outcomes: success, or an error that maps to a 4xx. A 500 (an
// unexpected exception type, kInternal, a library error) is a finding, and
// so is a request the server accepts that the engine then refuses, or
// parameters outside what validation promises.

#include <httplib.h>

#include <cstdint>
#include <memory>

#include "engine/engine_core.h"
#include "serve/api_error.h"
#include "serve/chat_generation.h"
#include "serve/chat_request.h"
#include "serve/completion_request.h"
#include "serve/handlers.h"
#include "serve/json_fields.h"
#include "tiny_server.h"

using namespace hyllm;
using namespace hyllm::serve;

namespace {

struct Setup {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  EngineConfig config = fuzz::tiny_engine_config();
  std::unique_ptr<ModelRunner> runner = fuzz::tiny_runner(*backend, config);
  std::unique_ptr<EngineCore> core = std::make_unique<EngineCore>(*runner, config);
  std::unique_ptr<ServingContext> ctx = fuzz::tiny_serving_context();
};

const Setup& setup() {
  static const Setup* s = new Setup();  // never destroyed: the process ends with it
  return *s;
}

// Stop strings are matched by the server's detokenizing hook; validation
// only needs one to be present.
class UnusedStopHook : public StopStringHook {
 public:
  StopCheck on_tokens(int, std::span<const int32_t>, bool) override { return {}; }
};

// The engine's validation of one prompt with resolved parameters; a refusal
// here after the server accepted the request is a finding.
void submit_check(const Setup& s, const std::vector<int32_t>& ids, const SamplingRequest& sampling) {
  SamplingParams p = resolve_sampling_params(sampling, s.ctx->sampling_defaults, static_cast<int64_t>(ids.size()),
                                             s.ctx->max_model_len, s.ctx->tokenizer->vocab_size());
  if (p.max_tokens < 1 || static_cast<int64_t>(ids.size()) + p.max_tokens > s.ctx->max_model_len) {
    fuzz::finding("resolved max_tokens outside the context");
  }
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) fuzz::finding("resolved min_tokens out of range");
  EngineRequest r;
  r.request_id = "fuzz";
  r.prompt_token_ids = ids;
  r.sampling = std::move(p);
  if (!r.sampling.stop.empty()) r.stop_hook = std::make_shared<UnusedStopHook>();
  try {
    s.core->validate(r);
  } catch (const Error& e) {
    // The one refusal the server leaves to the engine: more KV or state slots
    // than the whole cache (n choices of a long prompt).
    if (e.code() != ErrorCode::kInvalidArgument) fuzz::finding(e.what());
  }
}

void chat(const Setup& s, const std::string& body) {
  ChatRequest req = parse_chat_request(parse_request_json(body));
  s.ctx->check_model(req.model);
  std::vector<int32_t> ids = chat_prompt_ids(*s.ctx, chat_prompt_inputs(req));
  if (ids.empty()) return;  // the handler answers 400
  check_token_ids(ids, s.ctx->tokenizer->vocab_size(), "messages");
  submit_check(s, ids, req.sampling);
}

void completion(const Setup& s, const std::string& body) {
  CompletionRequest req = parse_completion_request(parse_request_json(body));
  s.ctx->check_model(req.model);
  const Tokenizer& tok = *s.ctx->tokenizer;
  for (const PromptInput& p : req.prompts) {
    std::vector<int32_t> ids = p.text ? tok.encode(*p.text, req.add_special_tokens) : p.token_ids;
    if (ids.empty()) continue;  // the handler answers 400
    check_token_ids(ids, tok.vocab_size(), "prompt");
    if (req.truncate_prompt_tokens && static_cast<int64_t>(ids.size()) > *req.truncate_prompt_tokens) {
      ids.erase(ids.begin(), ids.end() - *req.truncate_prompt_tokens);
    }
    if (ids.empty()) continue;
    submit_check(s, ids, req.sampling);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Setup& s = setup();
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    httplib::Response res;
    switch (data[0] % 4) {
      case 0: chat(s, body); break;
      case 1: completion(s, body); break;
      case 2: handle_tokenize(*s.ctx, body, res); break;
      case 3: handle_detokenize(*s.ctx, body, res); break;
    }
  } catch (...) {
    ApiError e = api_error_from_exception(std::current_exception());
    if (e.status() >= 500) fuzz::finding(e.what());
  }
  return 0;
}
