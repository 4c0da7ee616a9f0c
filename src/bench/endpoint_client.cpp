#include "bench/endpoint_client.h"

#include <httplib.h>

#include <chrono>

#include "util/status.h"

namespace hyllm::bench {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

ParsedUrl parse_base_url(const std::string& url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos)
    fail(ErrorCode::kInvalidArgument, "base URL '{}' has no scheme (expected http://host:port)", url);
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http")
    fail(ErrorCode::kUnsupported, "base URL '{}': only http:// is supported", url);
  auto path_start = url.find('/', scheme_end + 3);
  ParsedUrl p;
  p.scheme_host_port = path_start == std::string::npos ? url : url.substr(0, path_start);
  if (path_start != std::string::npos) p.path_prefix = url.substr(path_start);
  while (!p.path_prefix.empty() && p.path_prefix.back() == '/') p.path_prefix.pop_back();
  if (p.scheme_host_port.size() <= scheme_end + 3)
    fail(ErrorCode::kInvalidArgument, "base URL '{}' has no host", url);
  return p;
}

namespace {

httplib::Headers make_headers(const Endpoint& e) {
  httplib::Headers h{{"Content-Type", "application/json"}};
  if (!e.api_key.empty()) h.emplace("Authorization", "Bearer " + e.api_key);
  return h;
}

void configure(httplib::Client& c, const Endpoint& e) {
  auto secs = static_cast<time_t>(e.timeout_s);
  c.set_connection_timeout(30, 0);
  c.set_read_timeout(secs, 0);
  c.set_write_timeout(secs, 0);
  c.set_keep_alive(false);
}

nlohmann::json build_payload(const Endpoint& e, const RequestInput& in) {
  nlohmann::json body;
  body["model"] = in.model;
  if (e.kind == EndpointKind::kCompletions) {
    body["prompt"] = in.prompt;
    body["max_tokens"] = in.max_tokens;
  } else {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", in.prompt}}});
    body["max_completion_tokens"] = in.max_tokens;
  }
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (in.temperature) body["temperature"] = *in.temperature;
  if (in.ignore_eos) body["ignore_eos"] = true;
  for (auto it = in.extra_body.begin(); it != in.extra_body.end(); ++it) body[it.key()] = it.value();
  return body;
}

// Accumulates SSE bytes and hands out complete "data:" payloads.
class SseParser {
 public:
  template <typename F>
  void feed(const char* data, size_t len, F&& on_message) {
    buf_.append(data, len);
    size_t pos;
    while ((pos = find_event_end()) != std::string::npos) {
      std::string event = buf_.substr(0, pos);
      buf_.erase(0, pos + sep_len_);
      std::string payload;
      size_t start = 0;
      while (start <= event.size()) {
        size_t nl = event.find('\n', start);
        std::string line = event.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data:", 0) == 0) {
          std::string v = line.substr(5);
          if (!v.empty() && v[0] == ' ') v.erase(0, 1);
          if (!payload.empty()) payload += '\n';
          payload += v;
        }
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
      if (!payload.empty()) on_message(payload);  // comments and pings carry no data
    }
  }

 private:
  size_t find_event_end() {
    size_t a = buf_.find("\n\n"), b = buf_.find("\r\n\r\n");
    if (b != std::string::npos && (a == std::string::npos || b < a)) {
      sep_len_ = 4;
      return b;
    }
    sep_len_ = 2;
    return a;
  }
  std::string buf_;
  size_t sep_len_ = 2;
};

}  // namespace

RequestResult send_streaming_request(const Endpoint& endpoint, const RequestInput& input) {
  RequestResult out;
  out.prompt_len = input.prompt_len;
  ParsedUrl url;
  try {
    url = parse_base_url(endpoint.base_url);
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  httplib::Client client(url.scheme_host_port);
  configure(client, endpoint);

  httplib::Request req;
  req.method = "POST";
  req.path = url.path_prefix + endpoint.path;
  req.headers = make_headers(endpoint);
  req.body = build_payload(endpoint, input).dump();

  int status = 0;
  std::string error_body;
  bool first = false;
  double most_recent = 0.0;
  SseParser parser;
  std::string parse_error;

  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(len, 4096));
      return true;
    }
    double t = now_s();
    parser.feed(data, len, [&](const std::string& msg) {
      if (msg == "[DONE]") return;
      nlohmann::json j = nlohmann::json::parse(msg, nullptr, false);
      if (j.is_discarded()) {
        parse_error = "invalid JSON in stream: " + msg.substr(0, 200);
        return;
      }
      if (j.contains("error")) {
        parse_error = "error event: " + j["error"].dump();
        return;
      }
      const auto& choices = j.value("choices", nlohmann::json::array());
      if (choices.is_array() && !choices.empty()) {
        const auto& c = choices[0];
        std::string piece;
        if (endpoint.kind == EndpointKind::kCompletions) {
          if (c.contains("text") && c["text"].is_string()) piece = c["text"].get<std::string>();
        } else if (c.contains("delta")) {
          const auto& d = c["delta"];
          if (d.contains("content") && d["content"].is_string()) piece += d["content"].get<std::string>();
          if (d.contains("reasoning_content") && d["reasoning_content"].is_string())
            piece += d["reasoning_content"].get<std::string>();
          if (d.contains("reasoning") && d["reasoning"].is_string()) piece += d["reasoning"].get<std::string>();
        }
        // A closing chunk with no text, only a finish_reason (llama-server
        // sends one after the last token, with the usage), carries no
        // token: it is neither an inter-token gap nor the end of the output.
        const bool closing_only = first && piece.empty() && c.contains("finish_reason") && !c["finish_reason"].is_null();
        if (!closing_only) {
          if (!first) {
            first = true;
            out.ttft = t - out.start_time;
          } else {
            out.itl.push_back(t - most_recent);
          }
          most_recent = t;
        }
        out.generated_text += piece;
      }
      // Usage comes in a chunk of its own (vLLM, hyllm) or on the closing chunk (llama-server).
      if (j.contains("usage") && j["usage"].is_object()) {
        const auto& u = j["usage"];
        if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
          out.output_tokens = u["completion_tokens"].get<int>();
        if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
          out.prompt_len = u["prompt_tokens"].get<int>();
        const auto details = u.find("prompt_tokens_details");
        if (details != u.end() && details->is_object() && details->contains("cached_tokens") &&
            (*details)["cached_tokens"].is_number_integer())
          out.cached_tokens = (*details)["cached_tokens"].get<int>();
      }
    });
    return true;
  };

  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  out.start_time = now_s();
  bool sent = client.send(req, res, err);
  if (!sent) {
    out.error = "request failed: " + httplib::to_string(err);
    if (first) out.error += " (after the stream started)";
    return out;
  }
  if (status != 200) {
    out.error = "HTTP " + std::to_string(status) + ": " + error_body;
    return out;
  }
  if (!parse_error.empty()) {
    out.error = parse_error;
    return out;
  }
  if (!first) {
    out.error = "Never received a valid chunk to calculate TTFT.";
    return out;
  }
  out.latency = most_recent - out.start_time;
  out.success = true;
  return out;
}

nlohmann::json get_json(const Endpoint& endpoint, const std::string& path) {
  ParsedUrl url = parse_base_url(endpoint.base_url);
  httplib::Client client(url.scheme_host_port);
  configure(client, endpoint);
  auto res = client.Get((url.path_prefix + path).c_str(), make_headers(endpoint));
  if (!res) fail(ErrorCode::kUnavailable, "GET {}{}: {}", endpoint.base_url, path, httplib::to_string(res.error()));
  if (res->status / 100 != 2) fail(ErrorCode::kUnavailable, "GET {}{}: HTTP {}: {}", endpoint.base_url, path, res->status, res->body.substr(0, 300));
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::kUnavailable, "GET {}{}: the answer is not JSON", endpoint.base_url, path);
  return j;
}

nlohmann::json post_json(const Endpoint& endpoint, const std::string& path, const nlohmann::json& body) {
  ParsedUrl url = parse_base_url(endpoint.base_url);
  httplib::Client client(url.scheme_host_port);
  configure(client, endpoint);
  auto res = client.Post((url.path_prefix + path).c_str(), make_headers(endpoint), body.dump(), "application/json");
  if (!res) fail(ErrorCode::kUnavailable, "POST {}{}: {}", endpoint.base_url, path, httplib::to_string(res.error()));
  if (res->status / 100 != 2) fail(ErrorCode::kUnavailable, "POST {}{}: HTTP {}: {}", endpoint.base_url, path, res->status, res->body.substr(0, 300));
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::kUnavailable, "POST {}{}: the answer is not JSON", endpoint.base_url, path);
  return j;
}

}  // namespace hyllm::bench
