#pragma once
// A scripted OpenAI-compatible server for the benchmark client's tests: each
// completion streams tokens at known times, and scripts add stalls, errors,
// malformed events and dropped connections.

#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace hyllm::bench::testing {

struct Script {
  double ttft_s = 0.05;
  double itl_s = 0.02;
  int tokens = 4;
  bool usage = true;
  int usage_prompt_tokens = 17;
  int usage_cached_tokens = -1;     // >= 0: sent as prompt_tokens_details.cached_tokens
  int status = 200;                 // a non-200 status answers with an error body
  bool drop_after_first = false;    // close the connection mid-stream
  bool bad_json = false;            // emit an event that is not JSON
  bool ping_comments = false;       // ": ping" keep-alive lines between events
  double stall_s = 0.0;             // sleep before the first byte
  // llama-server's ending: after the last token, one more chunk whose choice
  // has no text but the finish_reason, with the usage on it.
  double closing_chunk_after_s = -1.0;
};

class FakeOpenAIServer {
 public:
  explicit FakeOpenAIServer(Script script) : script_(script) {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model","root":"fake"}]})",
                      "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      last_body = req.body;
      const Script s = script_;
      if (s.status != 200) {
        res.status = s.status;
        res.set_content(R"({"error":{"message":"scripted failure","type":"BadRequestError","code":400}})",
                        "application/json");
        return;
      }
      res.set_chunked_content_provider("text/event-stream", [s](size_t, httplib::DataSink& sink) {
        auto sleep = [](double sec) { std::this_thread::sleep_for(std::chrono::duration<double>(sec)); };
        sleep(s.stall_s + s.ttft_s);
        for (int i = 0; i < s.tokens; ++i) {
          if (i > 0) sleep(s.itl_s);
          if (s.ping_comments) sink.write(": ping\n\n", 8);
          nlohmann::json chunk = {{"id", "cmpl-1"}, {"object", "text_completion"}, {"model", "fake-model"},
                                  {"choices", {{{"index", 0}, {"text", "t" + std::to_string(i)}, {"finish_reason", nullptr}}}},
                                  {"usage", nullptr}};
          std::string ev = "data: " + chunk.dump() + "\n\n";
          sink.write(ev.data(), ev.size());
          if (s.drop_after_first) return false;  // httplib closes the connection
          if (s.bad_json && i == 0) sink.write("data: {not json\n\n", 17);
        }
        if (s.closing_chunk_after_s >= 0) {
          sleep(s.closing_chunk_after_s);
          nlohmann::json last = {{"id", "cmpl-1"}, {"object", "text_completion"},
                                 {"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}},
                                 {"usage", {{"prompt_tokens", s.usage_prompt_tokens}, {"completion_tokens", s.tokens},
                                            {"total_tokens", s.usage_prompt_tokens + s.tokens}}}};
          std::string ev = "data: " + last.dump() + "\n\n";
          sink.write(ev.data(), ev.size());
        } else if (s.usage) {
          nlohmann::json u = {{"id", "cmpl-1"}, {"choices", nlohmann::json::array()},
                              {"usage", {{"prompt_tokens", s.usage_prompt_tokens}, {"completion_tokens", s.tokens},
                                         {"total_tokens", s.usage_prompt_tokens + s.tokens}}}};
          if (s.usage_cached_tokens >= 0)
            u["usage"]["prompt_tokens_details"] = {{"cached_tokens", s.usage_cached_tokens}};
          std::string ev = "data: " + u.dump() + "\n\n";
          sink.write(ev.data(), ev.size());
        }
        sink.write("data: [DONE]\n\n", 14);
        sink.done();
        return true;
      });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeOpenAIServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::string last_body;

 private:
  Script script_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace hyllm::bench::testing
