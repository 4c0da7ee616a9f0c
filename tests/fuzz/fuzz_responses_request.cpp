// POST /v1/responses bodies through the real handler (handle_responses):
// parsing and validation, the input items as chat messages, the chat
// template, structured output and tool choice, the engine's own validation,
// generation on the embedded model, and the response object or its event
// stream. The first input byte picks the server: a plain one, or one with
// the agent flags (--reasoning-parser qwen3, --enable-auto-tool-choice, a
// tool-call parser and a grammar compiler for text.format); the rest is the
// body.
//
// Expected outcomes: a 200 whose body is one `response` object, or a stream
// of typed events numbered 0, 1, 2, ... that opens with response.created and
// ends with response.completed; or a 4xx ApiError (a hyllm::Error with a
// client code maps to one). Findings: a 5xx, any other exception (a JSON
// library's type_error means a value was read without checking its type),
// a body that does not parse, a broken stream, and an engine that still
// runs requests after the handler answered.

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "serve/api_error.h"
#include "serve/handlers.h"
#include "serve/response_writer.h"
#include "structured/grammar_compiler.h"
#include "tiny_server.h"

using namespace hyllm;
using namespace hyllm::serve;

namespace {

struct Servers {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<ServingContext> plain;
  std::unique_ptr<ServingContext> agents[2];  // qwen3_coder and hermes tool calls
};

std::unique_ptr<ServingContext> make_context(Backend& backend, const char* tool_call_parser) {
  EngineConfig config = fuzz::tiny_engine_config();
  auto ctx = fuzz::tiny_serving_context();
  ctx->engine = make_engine_client(fuzz::tiny_runner(backend, config), config);
  if (tool_call_parser) {
    ctx->reasoning_parser = "qwen3";
    ctx->tool_call_parser = tool_call_parser;
    ctx->enable_auto_tool_choice = true;
    ctx->grammar_compiler =
        std::make_unique<structured::GrammarCompiler>(*ctx->tokenizer, ctx->model_vocab_size, config.eos_token_ids);
  }
  return ctx;
}

Servers& servers() {
  static Servers* s = [] {
    auto* started = new Servers();  // never destroyed; the engines stop at exit
    started->plain = make_context(*started->backend, nullptr);
    started->agents[0] = make_context(*started->backend, "qwen3_coder");
    started->agents[1] = make_context(*started->backend, "hermes");
    std::atexit([] {
      for (ServingContext* ctx : {servers().plain.get(), servers().agents[0].get(), servers().agents[1].get()}) {
        ctx->engine->shutdown(std::chrono::milliseconds(0));
      }
    });
    return started;
  }();
  return *s;
}

// Drives a streamed answer's content provider as a connection would, to its end.
std::string drain_stream(httplib::Response& res) {
  std::string out;
  bool done = false;
  httplib::DataSink sink;
  sink.write = [&](const char* data, size_t n) {
    out.append(data, n);
    return true;
  };
  sink.is_writable = [] { return true; };
  sink.done = [&] { done = true; };
  while (!done) {
    // A chunked provider ignores the length.
    if (!res.content_provider_(out.size(), 0, sink)) fuzz::finding("the stream's provider gave up with a live client");
  }
  if (res.content_provider_resource_releaser_) res.content_provider_resource_releaser_(true);
  return out;
}

Json parse_or_finding(std::string_view text, const char* what) {
  try {
    return Json::parse(text);
  } catch (const Json::exception&) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(std::min<size_t>(text.size(), 2000)), text.data());
    fuzz::finding(what);
  }
}

void check_response_object(const Json& r) {
  if (!r.is_object() || r.value("object", "") != "response" || !r.contains("output") || !r["output"].is_array()) {
    fuzz::finding("the body is not a response object");
  }
}

// `event: TYPE\ndata: JSON\n\n` blocks numbered from 0, created first and
// completed last (an engine failure would end with an `error` event, which
// the tiny model never causes).
void check_stream(const std::string& text) {
  int64_t expected = 0;
  std::string last_type;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) fuzz::finding("a stream event is not terminated by a blank line");
    const std::string_view block(text.data() + pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    if (!block.starts_with("event: ") || nl == std::string_view::npos ||
        !block.substr(nl + 1).starts_with("data: ")) {
      fuzz::finding("a stream event is not `event:` then `data:`");
    }
    const std::string type(block.substr(7, nl - 7));
    const Json payload = parse_or_finding(block.substr(nl + 7), "a stream event's data is not JSON");
    if (payload.value("type", "") != type) fuzz::finding("an event's `event:` line and its type differ");
    if (payload.value("sequence_number", int64_t{-1}) != expected) fuzz::finding("sequence numbers skip or repeat");
    if (expected == 0 && type != "response.created") fuzz::finding("the stream does not open with response.created");
    ++expected;
    last_type = type;
    if (type == "response.completed") check_response_object(payload["response"]);
  }
  if (last_type != "response.completed") fuzz::finding("the stream does not end with response.completed");
}

void check_idle(const ServingContext& ctx) {
  // The last request has ended when its answer is written; the engine drops
  // it from its gauges within a step.
  for (int i = 0; i < 200; ++i) {
    const EngineStats st = ctx.engine->stats();
    if (st.num_requests_running == 0 && st.num_requests_waiting == 0) return;
    ::usleep(5'000);
  }
  fuzz::finding("the engine still runs requests after the answer");
}

// One request, answered and (when streamed) read to the end. The response
// holds the stream's state, and with it the activity guard, until it goes.
void answer(const ServingContext& ctx, ActivityCounter& activity, const std::string& body) {
  httplib::Response res;
  try {
    handle_responses(ctx, activity, body, res);
  } catch (const ApiError& e) {
    if (e.status() >= 500) fuzz::finding(e.what());
    return;
  } catch (const Error& e) {
    if (api_error_from(e).status() >= 500) fuzz::finding(e.what());
    return;
  } catch (const std::exception& e) {
    fuzz::finding(e.what());
  }
  if (res.status != 200) {
    std::fprintf(stderr, "%d %s\n", res.status, res.body.c_str());
    fuzz::finding("the handler answered with an error instead of throwing it");
  }
  if (res.content_provider_) {
    check_stream(drain_stream(res));
  } else {
    check_response_object(parse_or_finding(res.body, "the response body is not JSON"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Servers& s = servers();
  const ServingContext& ctx = data[0] % 3 == 0 ? *s.plain : *s.agents[data[0] % 3 - 1];
  ActivityCounter activity;
  answer(ctx, activity, std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  if (activity.active() != 0) fuzz::finding("the request is still counted as active");
  check_idle(ctx);
  return 0;
}
