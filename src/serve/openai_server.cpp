#include "serve/openai_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "serve/api_error.h"
#include "serve/chat_page.h"
#include "serve/handlers.h"
#include "serve/limits.h"
#include "serve/metrics_text.h"
#include "util/log.h"
#include "util/status.h"
#include "util/version.h"

namespace hyllm::serve {
namespace {

struct Route {
  const char* method;
  const char* path;
  bool json_body = true;  // a POST whose body is JSON (else the body is ignored)
};
constexpr Route kRoutes[] = {
    {"GET", "/"},                {"GET", "/health"},          {"GET", "/version"},
    {"GET", "/metrics"},         {"GET", "/v1/models"},       {"POST", "/v1/completions"},
    {"POST", "/v1/chat/completions"}, {"POST", "/v1/responses"}, {"POST", "/tokenize"}, {"POST", "/detokenize"},
    {"POST", "/reset_prefix_cache", false},
};

// vLLM's boolean query parameters: true/false, 1/0, yes/no, on/off.
bool query_flag(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  std::string v = req.get_param_value(name);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  throw ApiError(400, fmt::format("{}: expected a boolean, got '{}'", name, v), name);
}

bool always_available(const std::string& path) { return ApiKeyAuth::is_public_path(path); }

// Answers with an error; when the request body was left unread the
// connection closes after the response, so that its bytes are never parsed as
// a request.
void reject(httplib::Response& res, const ApiError& error, bool close) {
  write_error(res, error);
  if (close) {
    res.set_header("Connection", "close");
    if (auto* conn = ConnectionContext::current()) conn->close_after_response();
  }
}

bool has_body(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  return req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0";
}

// Content-Length as declared (0 when absent; unparsable counts as too large).
uint64_t declared_length(const httplib::Request& req) {
  if (!req.has_header("Content-Length")) return 0;
  const std::string v = req.get_header_value("Content-Length");
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9' || n > UINT64_MAX / 16) return UINT64_MAX;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return v.empty() ? UINT64_MAX : n;
}

bool is_json_content_type(const std::string& value) {
  std::string media = value.substr(0, value.find(';'));
  media.erase(media.find_last_not_of(" \t") + 1);
  std::transform(media.begin(), media.end(), media.begin(), [](unsigned char c) { return std::tolower(c); });
  return media == "application/json";
}

const char* status_message(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Request body too large";
    case 414: return "Request URI too long";
    case 431: return "Request header fields too large";
    default: return "Request failed";
  }
}

}  // namespace

OpenAIServer::OpenAIServer(ServerOptions options)
    : options_(std::move(options)), auth_(options_.api_keys), http_(options_.http) {
  install_routes();
}

OpenAIServer::~OpenAIServer() {
  if (state_ != State::kStopped) {
    state_ = State::kStopped;
    http_.stop_listening();
  }
  if (listener_.joinable()) listener_.join();
}

const std::vector<std::string>& OpenAIServer::route_list() const {
  static const std::vector<std::string> routes = [] {
    std::vector<std::string> out;
    for (const auto& r : kRoutes) out.push_back(fmt::format("Route: {}, Methods: {}", r.path, r.method));
    return out;
  }();
  return routes;
}

int OpenAIServer::start() {
  errno = 0;  // a failed address lookup sets none: an older one must not be reported
  int port = http_.bind(options_.host, options_.port);
  if (port < 0) {
    fail(ErrorCode::kIo, "cannot listen on {}:{}: {}", options_.host, options_.port,
         errno ? std::strerror(errno) : "not an address of this host");
  }
  listener_ = std::thread([this] {
    if (!http_.serve()) log::error("the HTTP listener stopped with an error");
  });
  return port;
}

void OpenAIServer::set_ready(std::unique_ptr<ServingContext> context) {
  context_ = std::move(context);
  context_ptr_.store(context_.get(), std::memory_order_release);
  State loading = State::kLoading;
  state_.compare_exchange_strong(loading, State::kReady);
}

void OpenAIServer::drain(std::chrono::milliseconds timeout) {
  std::lock_guard lock(drain_mu_);
  if (state_ == State::kStopped) return;
  state_ = State::kDraining;
  log::info("Shutting down: new requests get 503; draining in-flight requests for up to {:.1f} s",
            timeout.count() / 1000.0);
  if (const ServingContext* ctx = context()) ctx->engine->shutdown(timeout);
  // The engine has ended every request; give their responses a moment to
  // reach the clients.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (activity_.active() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  state_ = State::kStopped;
  http_.stop_listening();
  log::info("Server stopped");
}

void OpenAIServer::wait() {
  if (listener_.joinable()) listener_.join();
}

void OpenAIServer::health(httplib::Response& res) const {
  switch (state_.load()) {
    case State::kLoading: reject(res, unavailable("Loading model"), false); return;
    case State::kDraining:
    case State::kStopped: reject(res, unavailable("The server is shutting down"), false); return;
    case State::kReady: break;
  }
  const ServingContext* ctx = context();
  if (!ctx || !ctx->engine->is_ready()) {
    reject(res, unavailable("The engine is not running"), false);
    return;
  }
  res.status = 200;
}

httplib::Server::HandlerResponse OpenAIServer::pre_route(const httplib::Request& req, httplib::Response& res) {
  using HR = httplib::Server::HandlerResponse;
  if (req.method == "POST" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
    // A request with neither has an empty body (RFC 9112 6.3), as `curl -X
    // POST` sends it; the library would instead read to the end of the
    // connection, and answer 400 when its read timeout ends the wait. The
    // library's request object is not const: handlers just see it so.
    const_cast<httplib::Request&>(req).set_header("Content-Length", "0");
  }
  const bool body = has_body(req);
  if (req.has_header("Host") && !is_valid_host_header(req.get_header_value("Host"))) {
    reject(res, bad_request("Invalid Host header"), body);
    return HR::Handled;
  }
  // Authorise the path the router will match, before anything else: nothing
  // outside the public list is reachable (or even probed) without a key.
  if (!auth_.authorize(req.path, req.get_header_value("Authorization"))) {
    reject(res, unauthorized(), body);
    return HR::Handled;
  }
  const Route* route = nullptr;
  bool path_known = false;
  for (const auto& r : kRoutes) {
    if (req.path != r.path) continue;
    path_known = true;
    if (req.method == r.method || (req.method == "HEAD" && std::strcmp(r.method, "GET") == 0)) route = &r;
  }
  if (!route) {
    reject(res, ApiError(path_known ? 405 : 404, path_known ? "Method Not Allowed" : "Not Found"), body);
    return HR::Handled;
  }
  if (req.method != "POST" && body) {
    reject(res, bad_request("This endpoint takes no request body"), true);
    return HR::Handled;
  }
  if (req.method == "POST" && route->json_body) {
    const std::string encoding = req.get_header_value("Content-Encoding");
    if (!encoding.empty() && encoding != "identity") {
      reject(res, ApiError(415, "Content-Encoding is not supported; send the JSON body uncompressed"), true);
      return HR::Handled;
    }
    if (!is_json_content_type(req.get_header_value("Content-Type"))) {
      reject(res, bad_request("Unsupported Media Type: Only 'application/json' is allowed"), true);
      return HR::Handled;
    }
    if (declared_length(req) > kMaxRequestBodyBytes) {
      reject(res, ApiError(413, fmt::format("Request body too large (limit {} bytes)", kMaxRequestBodyBytes)), true);
      return HR::Handled;
    }
  }
  if (!always_available(req.path)) {
    State s = state_.load();
    if (s == State::kLoading) {
      reject(res, unavailable("The model is still loading"), body);
      return HR::Handled;
    }
    if (s != State::kReady) {
      reject(res, unavailable("The server is shutting down"), true);
      return HR::Handled;
    }
  }
  return HR::Unhandled;
}

void OpenAIServer::post_with_body(
    const char* path, void (*handler)(OpenAIServer&, const ServingContext&, const std::string&, httplib::Response&)) {
  http_.Post(path, [this, handler](const httplib::Request&, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
    std::string body;
    bool too_large = false;
    const bool ok = reader([&](const char* data, size_t len) {
      if (body.size() + len > kMaxRequestBodyBytes) {
        too_large = true;
        return false;
      }
      body.append(data, len);
      return true;
    });
    if (too_large) {
      reject(res, ApiError(413, fmt::format("Request body too large (limit {} bytes)", kMaxRequestBodyBytes)), true);
      return;
    }
    if (!ok) {
      reject(res, bad_request("Could not read the request body"), true);
      return;
    }
    const ServingContext* ctx = context();
    if (!ctx) {
      reject(res, unavailable("The model is still loading"), false);
      return;
    }
    try {
      handler(*this, *ctx, body, res);
    } catch (...) {
      ApiError e = api_error_from_exception(std::current_exception());
      if (e.status() >= 500) log::error("request failed: {}", e.what());
      write_error(res, e);
    }
  });
}

void OpenAIServer::install_routes() {
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    try {
      return pre_route(req, res);
    } catch (...) {
      write_error(res, api_error_from_exception(std::current_exception()));
      return httplib::Server::HandlerResponse::Handled;
    }
  });
  http_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    // Statuses the library sets itself (malformed requests, caps) get the
    // OpenAI error shape too, and the connection closes: what follows the
    // bad request on it cannot be trusted.
    auto* conn = ConnectionContext::current();
    if (conn && conn->head_too_large()) res.status = 431;
    reject(res, ApiError(res.status, status_message(res.status)), res.status != 404);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    write_error(res, api_error_from_exception(ep));
  });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (!options_.access_log) return;
    for (const std::string& path : options_.unlogged_paths) {
      if (req.path == path) return;
    }
    const bool quiet = req.path == "/health" || req.path == "/metrics";
    auto level = quiet ? spdlog::level::debug : spdlog::level::info;
    spdlog::log(level, "{}:{} - \"{} {} {}\" {}", req.remote_addr, req.remote_port, req.method, req.path,
                req.version, res.status);
  });

  http_.Get("/", [](const httplib::Request&, httplib::Response& res) { write_chat_page(res); });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
  http_.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    write_json(res, 200, Json{{"version", kVersion}});
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const ServingContext* ctx = context();
    std::string text = ctx ? render_metrics(ctx->engine->stats(), ctx->model_name()) : render_metrics(EngineStats(), "");
    res.status = 200;
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const ServingContext* ctx = context();
    if (!ctx) return reject(res, unavailable("The model is still loading"), false);
    write_json(res, 200, models_json(*ctx));
  });
  post_with_body("/v1/completions", [](OpenAIServer& s, const ServingContext& ctx, const std::string& body,
                                       httplib::Response& res) { handle_completions(ctx, s.activity_, body, res); });
  post_with_body("/v1/chat/completions",
                 [](OpenAIServer& s, const ServingContext& ctx, const std::string& body, httplib::Response& res) {
                   handle_chat_completions(ctx, s.activity_, body, res);
                 });
  post_with_body("/v1/responses", [](OpenAIServer& s, const ServingContext& ctx, const std::string& body,
                                     httplib::Response& res) { handle_responses(ctx, s.activity_, body, res); });
  http_.Post("/reset_prefix_cache", [this](const httplib::Request& req, httplib::Response& res) {
    const ServingContext* ctx = context();
    if (!ctx) return reject(res, unavailable("The model is still loading"), false);
    try {
      const bool reset_running = query_flag(req, "reset_running_requests");
      log::info("Resetting prefix cache...");
      if (!ctx->engine->reset_prefix_cache(reset_running)) {
        throw ApiError(409, "Prefix cache reset failed: requests are running (reset_running_requests=true "
                            "preempts them)");
      }
      res.status = 200;
    } catch (...) {
      write_error(res, api_error_from_exception(std::current_exception()));
    }
  });
  post_with_body("/tokenize", [](OpenAIServer&, const ServingContext& ctx, const std::string& body,
                                 httplib::Response& res) { handle_tokenize(ctx, body, res); });
  post_with_body("/detokenize", [](OpenAIServer&, const ServingContext& ctx, const std::string& body,
                                   httplib::Response& res) { handle_detokenize(ctx, body, res); });
}

}  // namespace hyllm::serve
