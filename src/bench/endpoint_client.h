#pragma once
// One streamed request to an OpenAI-compatible endpoint, timed the way
// `vllm bench serve` times it (see metrics.h). Never throws for server or
// network faults: they come back as RequestResult{success=false, error}.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"

namespace hyllm::bench {

enum class EndpointKind { kCompletions, kChat };

struct Endpoint {
  std::string base_url;      // "http://127.0.0.1:8000"
  std::string path = "/v1/completions";
  EndpointKind kind = EndpointKind::kCompletions;
  std::string api_key;       // sent as a Bearer token when set
  double timeout_s = 6 * 3600.0;
};

struct RequestInput {
  std::string model;
  std::string prompt;
  int prompt_len = 0;        // expected, replaced by usage.prompt_tokens
  int max_tokens = 0;
  bool ignore_eos = false;
  std::optional<double> temperature;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into the payload
};

// Seconds on the monotonic clock every measurement uses.
double now_s();

RequestResult send_streaming_request(const Endpoint& endpoint, const RequestInput& input);

// Splits "scheme://host:port[/prefix]" into its parts; throws on a bad URL.
struct ParsedUrl {
  std::string scheme_host_port;  // for httplib::Client
  std::string path_prefix;       // "" or "/prefix"
};
ParsedUrl parse_base_url(const std::string& url);

// GET/POST helpers for the small JSON endpoints (/v1/models, /tokenize, ...).
// Throws hyllm::Error(kUnavailable) on network errors or non-2xx answers.
nlohmann::json get_json(const Endpoint& endpoint, const std::string& path);
nlohmann::json post_json(const Endpoint& endpoint, const std::string& path, const nlohmann::json& body);

}  // namespace hyllm::bench
