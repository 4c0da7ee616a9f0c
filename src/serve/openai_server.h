#pragma once
// The OpenAI-compatible HTTP server: routes, authorisation, limits and the
// server's life: it binds and answers /health with 503 while the model loads,
// serves once set_ready() hands it the model, and on drain() refuses new work
// (503), lets in-flight requests finish within the shutdown timeout, then
// stops.
//
// Routes: GET / (the chat page), /health, /version, /metrics (open); GET
// /v1/models, POST /v1/completions, /v1/chat/completions, /v1/responses, /tokenize,
// /detokenize (need the API key when one is set).

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serve/auth.h"
#include "serve/http_server.h"
#include "serve/response_writer.h"
#include "serve/serving_context.h"

namespace hyllm::serve {

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> api_keys;
  HttpLimits http;
  // The access log: one line per request, /health and /metrics at debug
  // level (probes), the rest at info; none at all when off, none for the
  // paths listed.
  bool access_log = true;
  std::vector<std::string> unlogged_paths;
};

class OpenAIServer {
 public:
  explicit OpenAIServer(ServerOptions options);
  ~OpenAIServer();

  // Binds the port (0 picks a free one) and starts answering; returns the
  // port. Throws Error(kIo) when the address cannot be bound.
  int start();
  // The model is loaded: requests are served from now on.
  void set_ready(std::unique_ptr<ServingContext> context);
  // Stops taking requests (503), drains the engine for up to `timeout`
  // (aborting what is left), waits for responses to flush, then stops the
  // listener. Safe to call from any thread, once or more.
  void drain(std::chrono::milliseconds timeout);
  // Blocks until the listener has stopped.
  void wait();

  const std::vector<std::string>& route_list() const;
  int active_requests() const { return activity_.active(); }

 private:
  enum class State { kLoading, kReady, kDraining, kStopped };

  void install_routes();
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res);
  void post_with_body(const char* path,
                      void (*handler)(OpenAIServer&, const ServingContext&, const std::string&, httplib::Response&));
  void health(httplib::Response& res) const;
  const ServingContext* context() const { return context_ptr_.load(std::memory_order_acquire); }

  ServerOptions options_;
  ApiKeyAuth auth_;
  HttpServer http_;
  ActivityCounter activity_;
  std::atomic<State> state_{State::kLoading};
  std::unique_ptr<ServingContext> context_;
  std::atomic<const ServingContext*> context_ptr_{nullptr};
  std::thread listener_;
  std::mutex drain_mu_;
};

}  // namespace hyllm::serve
