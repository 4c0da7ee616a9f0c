// hyllm chat: an interactive client for a running OpenAI-compatible server,
// like `vllm chat`. Replies stream as they are generated; EOF (Ctrl-D) exits.
//
//   hyllm chat [--url http://localhost:8000/v1] [--model-name NAME] [--api-key KEY]
//              [--system-prompt TEXT] [-q MESSAGE]

#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "command.h"
#include "util/env.h"
#include "util/status.h"

namespace hyllm::app {
namespace {

using Json = nlohmann::ordered_json;

struct ChatOptions {
  std::string url = "http://localhost:8000/v1";
  std::string model_name;
  std::string api_key;
  std::string system_prompt;
  std::string quick;
  int max_tokens = 0;  // 0: the server's default (up to the context length)
};

// "http://host:port/v1" -> client for "http://host:port" and the path "/v1".
struct Endpoint {
  std::string origin;
  std::string prefix;
};

Endpoint split_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) fail(ErrorCode::kInvalidArgument, "--url {}: expected http://host:port/v1", url);
  const size_t path_start = url.find('/', scheme_end + 3);
  Endpoint e;
  e.origin = url.substr(0, path_start);
  e.prefix = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!e.prefix.empty() && e.prefix.back() == '/') e.prefix.pop_back();
  return e;
}

std::string error_text(int status, const std::string& body) {
  try {
    auto j = Json::parse(body);
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message")) return fmt::format("{} {}", status, e["message"].get<std::string>());
      return fmt::format("{} {}", status, e.dump());
    }
  } catch (const std::exception&) {
  }
  return fmt::format("{} {}", status, body);
}

class ChatClient {
 public:
  explicit ChatClient(const ChatOptions& o) : options_(o), endpoint_(split_url(o.url)), client_(endpoint_.origin) {
    if (!client_.is_valid()) fail(ErrorCode::kInvalidArgument, "--url {}: not a usable URL", o.url);
    client_.set_connection_timeout(10, 0);
    client_.set_read_timeout(3600, 0);
    if (!options_.api_key.empty()) client_.set_bearer_token_auth(options_.api_key.c_str());
  }

  std::string pick_model() {
    if (!options_.model_name.empty()) return options_.model_name;
    auto res = client_.Get((endpoint_.prefix + "/models").c_str());
    if (!res) {
      fail(ErrorCode::kUnavailable, "cannot reach {}: {}", options_.url, httplib::to_string(res.error()));
    }
    if (res->status != 200) fail(ErrorCode::kUnavailable, "GET /models: {}", error_text(res->status, res->body));
    auto j = Json::parse(res->body);
    if (!j.contains("data") || j["data"].empty()) fail(ErrorCode::kNotFound, "the server lists no models");
    return j["data"][0]["id"].get<std::string>();
  }

  // Streams one reply to stdout and returns its text.
  std::string send(const std::string& model, const Json& messages) {
    Json body = {{"model", model}, {"messages", messages}, {"stream", true}};
    if (options_.max_tokens > 0) body["max_completion_tokens"] = options_.max_tokens;
    httplib::Request req;
    req.method = "POST";
    req.path = endpoint_.prefix + "/chat/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    int status = 0;
    std::string pending, reply, raw;
    bool done = false;
    req.response_handler = [&](const httplib::Response& r) {
      status = r.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      if (status != 200) {
        raw.append(data, len);
        return true;
      }
      pending.append(data, len);
      for (size_t end; !done && (end = pending.find("\n\n")) != std::string::npos;) {
        std::string event = pending.substr(0, end);
        pending.erase(0, end + 2);
        handle_event(event, reply, done);
      }
      return true;
    };
    auto res = client_.send(req);
    if (!res) fail(ErrorCode::kUnavailable, "request failed: {}", httplib::to_string(res.error()));
    if (status != 200) fail(ErrorCode::kUnavailable, "{}", error_text(status, raw));
    std::fputc('\n', stdout);
    std::fflush(stdout);
    return reply;
  }

 private:
  static void handle_event(const std::string& event, std::string& reply, bool& done) {
    for (size_t start = 0; start < event.size();) {
      size_t end = event.find('\n', start);
      if (end == std::string::npos) end = event.size();
      std::string line = event.substr(start, end - start);
      start = end + 1;
      if (line.rfind("data: ", 0) != 0) continue;
      std::string data = line.substr(6);
      if (data == "[DONE]") {
        done = true;
        return;
      }
      auto j = Json::parse(data, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) fail(ErrorCode::kInternal, "the server failed mid-stream: {}", j["error"].dump());
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const auto& delta = j["choices"][0]["delta"];
      if (delta.contains("content") && delta["content"].is_string()) {
        const std::string piece = delta["content"].get<std::string>();
        reply += piece;
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
      }
    }
  }

  ChatOptions options_;
  Endpoint endpoint_;
  httplib::Client client_;
};

int run_chat(ChatOptions o) {
  if (o.api_key.empty() && env().api_key) o.api_key = *env().api_key;
  ChatClient client(o);
  const std::string model = client.pick_model();
  Json messages = Json::array();
  if (!o.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", o.system_prompt}});
  if (!o.quick.empty()) {
    messages.push_back({{"role", "user"}, {"content", o.quick}});
    client.send(model, messages);
    return 0;
  }
  std::printf("Using model: %s\nPlease enter a message for the chat model:\n", model.c_str());
  const bool interactive = isatty(STDIN_FILENO);
  for (;;) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    std::string line;
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    std::string reply = client.send(model, messages);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

void setup_chat(CLI::App& sub, int& exit_code) {
  auto o = std::make_shared<ChatOptions>();
  sub.add_option("--url", o->url, "Base URL of the server's OpenAI API")->capture_default_str();
  sub.add_option("--model-name", o->model_name, "Model to use (default: the first one the server lists)");
  sub.add_option("--api-key", o->api_key, "API key (default: HYLLM_API_KEY or VLLM_API_KEY)");
  sub.add_option("--system-prompt", o->system_prompt, "A system message to start the conversation");
  sub.add_option("-q,--quick", o->quick, "Send this one message, print the reply and exit");
  sub.add_option("--max-tokens", o->max_tokens, "Longest reply in tokens (default: the server's)");
  sub.callback([o, &exit_code] { exit_code = run_chat(*o); });
}

const CommandRegistration kRegistration{"chat", "Chat with a running server, replies streamed", setup_chat};

}  // namespace
}  // namespace hyllm::app
