#include "bench/endpoint_client.h"

#include <gtest/gtest.h>

#include "bench/serve_benchmark.h"
#include "fake_openai_server.h"
#include "util/status.h"

namespace hyllm::bench {
namespace {

using testing::FakeOpenAIServer;
using testing::Script;

RequestInput input() {
  RequestInput in;
  in.model = "fake-model";
  in.prompt = "hello";
  in.prompt_len = 3;
  in.max_tokens = 4;
  in.ignore_eos = true;
  in.temperature = 0.0;
  return in;
}

// Timings on a loaded 2-core machine only ever run late, never early, so
// the checks are one-sided with generous slack above.
TEST(EndpointClient, MeasuresTtftItlAndUsage) {
  Script s;
  s.ttft_s = 0.15;
  s.itl_s = 0.05;
  s.tokens = 5;
  s.ping_comments = true;
  FakeOpenAIServer server(s);
  Endpoint ep{server.url()};
  RequestResult r = send_streaming_request(ep, input());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_GE(r.ttft, 0.15);
  EXPECT_LT(r.ttft, 0.15 + 0.5);
  ASSERT_EQ(r.itl.size(), 4u);
  for (double g : r.itl) {
    EXPECT_GE(g, 0.04);
    EXPECT_LT(g, 0.05 + 0.5);
  }
  EXPECT_EQ(r.output_tokens, 5);
  EXPECT_EQ(r.prompt_len, 17);  // replaced by the server's usage
  EXPECT_EQ(r.cached_tokens, 0);
  EXPECT_EQ(r.generated_text, "t0t1t2t3t4");
  EXPECT_NEAR(r.latency, r.ttft + r.itl[0] + r.itl[1] + r.itl[2] + r.itl[3], 1e-9);
  auto body = nlohmann::json::parse(server.last_body);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["max_tokens"], 4);
  EXPECT_EQ(body["temperature"], 0.0);
}

TEST(EndpointClient, ReadsCachedTokensFromUsage) {
  Script s;
  s.ttft_s = s.itl_s = 0.0;
  s.usage_cached_tokens = 16;
  FakeOpenAIServer server(s);
  RequestResult r = send_streaming_request(Endpoint{server.url()}, input());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.cached_tokens, 16);
}

TEST(EndpointClient, StallCountsIntoTtft) {
  Script s;
  s.stall_s = 0.3;
  FakeOpenAIServer server(s);
  RequestResult r = send_streaming_request(Endpoint{server.url()}, input());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_GE(r.ttft, 0.35);
}

TEST(EndpointClient, HttpErrorIsAFailureNotAnException) {
  Script s;
  s.status = 400;
  FakeOpenAIServer server(s);
  RequestResult r = send_streaming_request(Endpoint{server.url()}, input());
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("HTTP 400"), std::string::npos);
  EXPECT_NE(r.error.find("scripted failure"), std::string::npos);
}

TEST(EndpointClient, DroppedConnectionIsAFailure) {
  Script s;
  s.drop_after_first = true;
  s.tokens = 3;
  FakeOpenAIServer server(s);
  RequestResult r = send_streaming_request(Endpoint{server.url()}, input());
  EXPECT_FALSE(r.success);
  EXPECT_FALSE(r.error.empty());
}

TEST(EndpointClient, MalformedEventIsAFailure) {
  Script s;
  s.bad_json = true;
  FakeOpenAIServer server(s);
  RequestResult r = send_streaming_request(Endpoint{server.url()}, input());
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("invalid JSON"), std::string::npos);
}

TEST(EndpointClient, NoServerIsAFailure) {
  Endpoint ep{"http://127.0.0.1:1"};
  ep.timeout_s = 2;
  RequestResult r = send_streaming_request(ep, input());
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("request failed"), std::string::npos);
}

TEST(EndpointClient, NoUsageFallsBackToChunkCount) {
  Script s;
  s.usage = false;
  s.tokens = 3;
  FakeOpenAIServer server(s);
  RequestResult r = send_streaming_request(Endpoint{server.url()}, input());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 0);
  EXPECT_EQ(r.prompt_len, 3);
  auto m = calculate_metrics({r}, 1.0, {99}, {});
  EXPECT_EQ(m.total_output, 3);
}

// llama-server closes a stream with a text-less chunk that carries the
// finish_reason and the usage: the usage counts, the chunk is no token.
TEST(EndpointClient, ClosingChunkWithUsageIsNoToken) {
  Script s;
  s.ttft_s = 0.0;
  s.itl_s = 0.01;
  s.tokens = 3;
  s.closing_chunk_after_s = 0.3;
  FakeOpenAIServer server(s);
  RequestResult r = send_streaming_request(Endpoint{server.url()}, input());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.prompt_len, 17);
  EXPECT_EQ(r.itl.size(), 2u);
  EXPECT_EQ(r.generated_text, "t0t1t2");
  EXPECT_NEAR(r.latency, r.ttft + r.itl[0] + r.itl[1], 1e-9);  // ends at the last token, not 0.3 s later
}

TEST(EndpointClient, FirstModelFromServer) {
  FakeOpenAIServer server(Script{});
  EXPECT_EQ(first_served_model(Endpoint{server.url()}), "fake-model");
  EXPECT_THROW(first_served_model(Endpoint{"http://127.0.0.1:1"}), Error);
}

TEST(EndpointClient, BaseUrlParsing) {
  auto p = parse_base_url("http://localhost:8000/api/");
  EXPECT_EQ(p.scheme_host_port, "http://localhost:8000");
  EXPECT_EQ(p.path_prefix, "/api");
  EXPECT_THROW(parse_base_url("localhost:8000"), Error);
  EXPECT_THROW(parse_base_url("https://x"), Error);
}

}  // namespace
}  // namespace hyllm::bench
