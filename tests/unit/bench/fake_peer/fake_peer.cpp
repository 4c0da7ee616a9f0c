// A stand-in peer server for `hyllm bench compare` tests: a real process that
// prints a startup configuration line, then serves /health, /version,
// /v1/models, /tokenize, /detokenize and streamed /v1/completions.
//   fake_peer PORT VERSION "NON_DEFAULT_ARGS" [TOKEN_DELAY_MS]

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace {
httplib::Server* g_server = nullptr;
void on_term(int) {
  if (g_server) g_server->stop();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: fake_peer PORT VERSION ARGS [TOKEN_DELAY_MS]\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string version = argv[2];
  const int delay_ms = argc > 4 ? std::atoi(argv[4]) : 2;
  std::printf("INFO fake peer starting\nINFO non-default args: %s\n", argv[3]);
  std::fflush(stdout);

  httplib::Server server;
  g_server = &server;
  std::signal(SIGTERM, on_term);
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.Get("/version", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(nlohmann::json{{"version", version}}.dump(), "application/json");
  });
  server.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"object":"list","data":[{"id":"m","object":"model","root":"m"}]})", "application/json");
  });
  server.Post("/tokenize", [](const httplib::Request& req, httplib::Response& res) {
    auto j = nlohmann::json::parse(req.body);
    std::string p = j.value("prompt", "");
    nlohmann::json ids = nlohmann::json::array();
    size_t i = 0;
    while (i < p.size()) {
      while (i < p.size() && p[i] == ' ') ++i;
      size_t s = i;
      while (i < p.size() && p[i] != ' ') ++i;
      if (i > s) ids.push_back(std::atoi(p.c_str() + s + 1));
    }
    res.set_content(nlohmann::json{{"tokens", ids}, {"count", ids.size()}}.dump(), "application/json");
  });
  server.Post("/v1/completions", [delay_ms](const httplib::Request& req, httplib::Response& res) {
    auto j = nlohmann::json::parse(req.body);
    const int n = j.value("max_tokens", 4);
    res.set_chunked_content_provider("text/event-stream", [n, delay_ms](size_t, httplib::DataSink& sink) {
      for (int i = 0; i < n; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        std::string ev = "data: {\"choices\":[{\"index\":0,\"text\":\" x\"}]}\n\n";
        if (!sink.write(ev.data(), ev.size())) return false;
      }
      std::string u = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":" +
                      std::to_string(n) + "}}\n\ndata: [DONE]\n\n";
      sink.write(u.data(), u.size());
      sink.done();
      return true;
    });
  });
  server.listen("127.0.0.1", port);
  return 0;
}
