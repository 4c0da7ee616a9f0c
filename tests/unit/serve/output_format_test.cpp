#include <fmt/format.h>
#include <gtest/gtest.h>

#include "serve/api_error.h"
#include "serve/auth.h"
#include "serve/openai_json.h"
#include "serve/prometheus.h"
#include "serve/metrics_text.h"
#include "serve/sse.h"

namespace hyllm::serve {
namespace {

using json = Json;

class FakeTokenText : public TokenText {
 public:
  std::string text(int32_t token) const override { return fmt::format("t{}", token); }
  std::string bytes(int32_t token) const override { return text(token); }
};

TEST(Sse, FramesOneEventPerLine) {
  EXPECT_EQ(sse_event(json{{"a", "x\ny"}}), "data: {\"a\":\"x\\ny\"}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  auto err = sse_error(bad_request("nope"));
  EXPECT_EQ(err.rfind("data: {\"error\":", 0), 0u);
  EXPECT_EQ(err.substr(err.size() - 2), "\n\n");
  // A partial UTF-8 token never breaks the stream.
  EXPECT_NO_THROW(sse_event(json{{"text", "\xe4\xbd"}}));
}

TEST(OpenAiJson, UsageAndIds) {
  auto u = usage_json({7, 3, std::nullopt});
  EXPECT_EQ(u["total_tokens"], 10);
  EXPECT_TRUE(u["prompt_tokens_details"].is_null());
  EXPECT_EQ(usage_json({7, 3, 4})["prompt_tokens_details"]["cached_tokens"], 4);
  auto a = make_request_id("cmpl-"), b = make_request_id("cmpl-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 5u + 32u);
}

TEST(OpenAiJson, Logprobs) {
  FakeTokenText text;
  std::vector<hyllm::TokenLogprob> toks = {{5, -0.5f, {{5, -0.5f}, {6, -1.5f}, {7, -2.0f}}},
                                           {6, -std::numeric_limits<float>::infinity(), {}}};
  auto chat = chat_logprobs_json(toks, 2, text);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "t5");
  EXPECT_EQ(chat["content"][0]["bytes"], json({116, 53}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(chat["content"][1]["logprob"], -9999.0);

  auto comp = completion_logprobs_json(toks, 1, text, 10);
  EXPECT_EQ(comp["tokens"], json({"t5", "t6"}));
  EXPECT_EQ(comp["text_offset"], json({10, 12}));
  EXPECT_EQ(comp["top_logprobs"][0].size(), 1u);  // t5 is both the top and the sampled token
  EXPECT_EQ(comp["top_logprobs"][1]["t6"], -9999.0);
  EXPECT_EQ(utf8_length("h\xc3\xa9"), 2u);
}

TEST(Auth, KeysAndPaths) {
  ApiKeyAuth off;
  EXPECT_TRUE(off.authorize("/v1/completions", ""));
  ApiKeyAuth on({"secret", "other"});
  EXPECT_TRUE(on.authorize("/v1/completions", "Bearer secret"));
  EXPECT_TRUE(on.authorize("/v1/completions", "bearer other"));
  EXPECT_FALSE(on.authorize("/v1/completions", "Bearer secre"));
  EXPECT_FALSE(on.authorize("/v1/completions", "Bearer secrets"));
  EXPECT_FALSE(on.authorize("/v1/completions", "secret"));
  EXPECT_FALSE(on.authorize("/v1/completions", ""));
  EXPECT_FALSE(on.authorize("/tokenize", ""));
  EXPECT_FALSE(on.authorize("/health/../v1/models", ""));
  EXPECT_FALSE(on.authorize("/v1/models", "Basic c2VjcmV0"));
  for (const char* p : {"/", "/health", "/version", "/metrics"}) EXPECT_TRUE(on.authorize(p, ""));
  for (const char* p : {"//", "/index.html", "//v1/models", ""}) EXPECT_FALSE(on.authorize(p, ""));
  EXPECT_TRUE(is_valid_host_header("localhost:8000"));
  EXPECT_TRUE(is_valid_host_header("[::1]:8000"));
  EXPECT_FALSE(is_valid_host_header("evil.com/v1"));
  EXPECT_FALSE(is_valid_host_header("a?b"));
  EXPECT_FALSE(is_valid_host_header("a b"));
}

TEST(Prometheus, HistogramAndText) {
  hyllm::Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  PrometheusWriter w(Labels{{"model_name", "m\"q"}});
  w.histogram("x:lat", "help", h);
  w.counter("x:tokens", "help", 3);
  const auto& t = w.text();
  EXPECT_NE(t.find("x:lat_bucket{le=\"0.1\",model_name=\"m\\\"q\"} 1.0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x:lat_bucket{le=\"1.0\",model_name=\"m\\\"q\"} 2.0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x:lat_bucket{le=\"+Inf\",model_name=\"m\\\"q\"} 3.0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x:lat_sum{model_name=\"m\\\"q\"} 5.55\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE x:tokens counter\nx:tokens_total{model_name=\"m\\\"q\"} 3.0\n"), std::string::npos);
}

TEST(Metrics, VllmNamesFromEngineStats) {
  EngineStats s(4096);
  s.num_requests_running = 2;
  s.kv_cache_usage = 0.25;
  s.state_slot_usage = 0.5;
  s.recorded_graphs = 7;
  s.prompt_tokens = 12;
  s.request_finished[static_cast<int>(FinishReason::kLength)] = 1;
  s.time_to_first_token.observe(0.02);
  auto text = render_metrics(s, "tiny");
  for (const char* needle : {
           "vllm:num_requests_running{engine=\"0\",model_name=\"tiny\"} 2.0\n",
           "vllm:num_requests_waiting{engine=\"0\",model_name=\"tiny\"} 0.0\n",
           "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"tiny\"} 0.25\n",
           "hyllm:state_slot_usage_perc{engine=\"0\",model_name=\"tiny\"} 0.5\n",
           "hyllm:recorded_graphs{engine=\"0\",model_name=\"tiny\"} 7.0\n",
           "vllm:prompt_tokens_total{engine=\"0\",model_name=\"tiny\"} 12.0\n",
           "vllm:generation_tokens_total{engine=\"0\",model_name=\"tiny\"} 0.0\n",
           "vllm:request_success_total{finished_reason=\"length\",engine=\"0\",model_name=\"tiny\"} 1.0\n",
           "vllm:request_success_total{finished_reason=\"abort\",engine=\"0\",model_name=\"tiny\"} 0.0\n",
           "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"tiny\"} 1.0\n",
           "vllm:time_to_first_token_seconds_bucket{le=\"0.02\",engine=\"0\",model_name=\"tiny\"} 1.0\n",
           "vllm:time_to_first_token_seconds_bucket{le=\"0.01\",engine=\"0\",model_name=\"tiny\"} 0.0\n",
           "# TYPE vllm:num_preemptions counter\n", "vllm:prefix_cache_hits_total", "vllm:request_params_n_bucket",
           "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_bucket",
           "vllm:iteration_tokens_total_bucket", "vllm:request_queue_time_seconds_sum"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

TEST(Metrics, SpecDecodeCountersOnlyWhenSpeculating) {
  EngineStats s(4096);
  EXPECT_EQ(render_metrics(s, "tiny").find("spec_decode"), std::string::npos);
  s.spec_accepted_per_pos = {7, 3};
  s.spec_num_drafts = 9;
  s.spec_num_draft_tokens = 18;
  s.spec_num_accepted_tokens = 10;
  const auto text = render_metrics(s, "tiny");
  for (const char* needle : {
           "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"tiny\"} 9.0\n",
           "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"tiny\"} 18.0\n",
           "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"tiny\"} 10.0\n",
           "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\",engine=\"0\",model_name=\"tiny\"} 7.0\n",
           "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\",engine=\"0\",model_name=\"tiny\"} 3.0\n"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << text;
  }
}

}  // namespace
}  // namespace hyllm::serve
