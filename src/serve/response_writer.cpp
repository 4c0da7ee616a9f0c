#include "serve/response_writer.h"

#include <chrono>

#include "serve/http_server.h"
#include "serve/openai_json.h"
#include "util/log.h"

namespace hyllm::serve {
namespace {

using Clock = std::chrono::steady_clock;

// How long to wait for engine news before checking that the client is still
// there. Short enough that a disconnect frees the cache within about a step.
constexpr std::chrono::milliseconds kPollInterval{20};

bool client_alive() {
  auto* conn = ConnectionContext::current();
  return conn == nullptr || conn->peer_alive();
}

// Shared by the content provider calls of one stream.
struct StreamState {
  std::unique_ptr<Generation> generation;
  std::unique_ptr<ResponseFormatter> formatter;
  ActivityCounter::Guard guard;
  bool started = false;
  bool finished = false;
};

}  // namespace

void write_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void write_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(error.body(), "application/json");
}

void respond_whole(httplib::Response& res, Generation& generation, ResponseFormatter& formatter) {
  std::vector<ChoiceResult> choices(generation.num_prompts() * static_cast<size_t>(generation.n()));
  auto last_check = Clock::now();
  while (!generation.done()) {
    auto events = generation.next(kPollInterval);
    for (auto& ev : events) choices.at(static_cast<size_t>(ev.index)).add(std::move(ev));
    if (Clock::now() - last_check >= kPollInterval) {
      last_check = Clock::now();
      if (!client_alive()) {
        generation.abort();
        res.status = 499;  // nobody reads it; keeps the access log honest
        return;
      }
    }
  }
  if (auto error = generation.error()) {
    write_error(res, *error);
    return;
  }
  write_json(res, 200, formatter.full_response(choices, generation.usage()));
}

void respond_stream(httplib::Response& res, std::unique_ptr<Generation> generation,
                    std::unique_ptr<ResponseFormatter> formatter, ActivityCounter::Guard guard) {
  auto state = std::make_shared<StreamState>(StreamState{std::move(generation), std::move(formatter),
                                                         std::move(guard), false, false});
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      // Exactly this type: httplib gzips any other text/* response for clients
      // that accept it, and a compressor holds events back until the end.
      "text/event-stream",
      [state](size_t, httplib::DataSink& sink) {
        Generation& gen = *state->generation;
        if (!state->started) {
          state->started = true;
          std::vector<Json> head;
          state->formatter->stream_head(head);
          std::string text;
          for (const auto& payload : head) text += state->formatter->sse(payload);
          if (!text.empty() && !sink.write(text.data(), text.size())) {
            gen.abort();
            return false;
          }
        }
        auto events = gen.next(kPollInterval);
        if (events.empty() && !gen.done()) {
          if (!client_alive()) {
            gen.abort();
            return false;
          }
          return true;
        }
        const Usage usage = gen.usage();
        std::vector<Json> chunks;
        for (auto& ev : events) state->formatter->stream_chunks(ev, usage, chunks);
        for (const auto& chunk : chunks) {
          std::string event = state->formatter->sse(chunk);
          if (!sink.write(event.data(), event.size())) {
            gen.abort();
            return false;
          }
        }
        if (!gen.done()) return true;
        const std::string tail = state->formatter->stream_tail(usage, gen.error());
        if (!sink.write(tail.data(), tail.size())) return false;
        state->finished = true;
        sink.done();
        return true;
      },
      [state](bool success) {
        // The stream ended early (client gone, server stopping): stop the work.
        if (!state->finished) state->generation->abort();
      });
}

}  // namespace hyllm::serve
