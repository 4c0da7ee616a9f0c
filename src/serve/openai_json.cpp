#include "serve/openai_json.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>

namespace hyllm::serve {

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string make_request_id(const char* prefix) {
  // Random per process, then a counter: unique without locking.
  static const uint64_t base = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<uint64_t> counter{0};
  uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  std::mt19937_64 mix(base ^ (n * 0x9e3779b97f4a7c15ull));
  return fmt::format("{}{:016x}{:016x}", prefix, mix(), base + n);
}

int64_t unix_time_seconds() {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

Json usage_json(const Usage& usage) {
  Json u = {
      {"prompt_tokens", usage.prompt_tokens},
      {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
      {"completion_tokens", usage.completion_tokens},
  };
  if (usage.cached_tokens) {
    u["prompt_tokens_details"] = {{"cached_tokens", *usage.cached_tokens}};
  } else {
    u["prompt_tokens_details"] = nullptr;
  }
  return u;
}

size_t utf8_length(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

double printable_logprob(float logprob) {
  if (std::isnan(logprob) || logprob < -9999.0f) return -9999.0;
  return logprob;
}

namespace {

Json byte_list(const std::string& bytes) {
  Json out = Json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

Json chat_entry(int32_t token, float logprob, const TokenText& text) {
  return {{"token", text.text(token)}, {"logprob", printable_logprob(logprob)}, {"bytes", byte_list(text.bytes(token))}};
}

}  // namespace

Json chat_logprobs_json(const std::vector<TokenLogprob>& tokens, int top_n, const TokenText& text) {
  Json content = Json::array();
  for (const auto& t : tokens) {
    Json entry = chat_entry(t.token, t.logprob, text);
    Json top = Json::array();
    for (size_t i = 0; i < t.top_logprobs.size() && static_cast<int>(i) < top_n; ++i) {
      top.push_back(chat_entry(t.top_logprobs[i].first, t.top_logprobs[i].second, text));
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

Json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, int top_n,
                                        const TokenText& text, size_t text_offset) {
  Json out = {{"text_offset", Json::array()},
                        {"token_logprobs", Json::array()},
                        {"tokens", Json::array()},
                        {"top_logprobs", Json::array()}};
  for (const auto& t : tokens) {
    std::string s = text.text(t.token);
    out["text_offset"].push_back(text_offset);
    out["token_logprobs"].push_back(printable_logprob(t.logprob));
    out["tokens"].push_back(s);
    text_offset += utf8_length(s);
    // As in vLLM, the sampled token is listed with the top alternatives.
    Json top = Json::object();
    for (size_t i = 0; i < t.top_logprobs.size() && static_cast<int>(i) < top_n; ++i) {
      top[text.text(t.top_logprobs[i].first)] = printable_logprob(t.top_logprobs[i].second);
    }
    if (!top.contains(s)) top[s] = printable_logprob(t.logprob);
    out["top_logprobs"].push_back(std::move(top));
  }
  return out;
}

Json echoed_prompt_logprobs_json(int32_t first_token, const std::vector<TokenLogprob>& scored, int top_n,
                                 const TokenText& text) {
  const std::string first = text.text(first_token);
  Json out = {{"text_offset", Json::array({0})},
              {"token_logprobs", Json::array({nullptr})},
              {"tokens", Json::array({first})},
              {"top_logprobs", Json::array({nullptr})}};
  append_completion_logprobs(out, completion_logprobs_json(scored, top_n, text, utf8_length(first)));
  return out;
}

void append_completion_logprobs(Json& a, const Json& b) {
  for (const char* key : {"text_offset", "token_logprobs", "tokens", "top_logprobs"}) {
    for (const Json& v : b.at(key)) a[key].push_back(v);
  }
}

Json prompt_logprobs_json(const std::vector<TokenLogprob>& scored, int top_n, const TokenText& text) {
  auto entry = [&](float logprob, int32_t rank, int32_t token) {
    return Json{{"logprob", printable_logprob(logprob)}, {"rank", rank}, {"decoded_token", text.text(token)}};
  };
  Json out = Json::array({nullptr});
  for (const TokenLogprob& t : scored) {
    Json position = Json::object();
    position[std::to_string(t.token)] = entry(t.logprob, t.rank, t.token);
    for (size_t i = 0; i < t.top_logprobs.size() && static_cast<int>(i) < top_n; ++i) {
      const auto [id, logprob] = t.top_logprobs[i];
      const std::string key = std::to_string(id);
      if (!position.contains(key)) position[key] = entry(logprob, static_cast<int32_t>(i) + 1, id);
    }
    out.push_back(std::move(position));
  }
  return out;
}

}  // namespace hyllm::serve
