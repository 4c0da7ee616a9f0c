// The threaded EngineClient: concurrent submitters, streams, abort, shutdown.

#include "engine/engine_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine_test_util.h"
#include "util/status.h"

namespace hyllm::testing {
namespace {

using namespace std::chrono_literals;

std::vector<int32_t> drain(ResponseStream& s, FinishReason* finish, int* outputs) {
  std::vector<int32_t> tokens;
  while (!s.ended()) {
    auto out = s.next(5s);
    if (!out) {
      ADD_FAILURE() << "stream timed out";
      break;
    }
    (*outputs)++;
    for (const auto& c : out->outputs) {
      EXPECT_LE(c.new_token_ids.size(), 1u);
      tokens.insert(tokens.end(), c.new_token_ids.begin(), c.new_token_ids.end());
      if (c.finished()) *finish = c.finish_reason;
    }
  }
  return tokens;
}

TEST(EngineClient, ConcurrentSubmittersEachGetTheirOwnTokens) {
  EngineConfig config = small_config();
  auto client = make_engine_client(std::make_unique<FakeExecutor>(), config);
  EXPECT_TRUE(client->is_ready());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 5; ++i) {
        auto r = make_request("t" + std::to_string(t) + "-" + std::to_string(i), random_prompt(rng, 3 + i * 5, 64), 8);
        auto want = solo(r, config)[0].tokens;
        auto stream = client->submit(r);
        FinishReason finish = FinishReason::kNone;
        int outputs = 0;
        if (drain(*stream, &finish, &outputs) != want || finish != FinishReason::kLength || outputs != 8) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const EngineStats stats = client->stats();
  EXPECT_EQ(stats.request_finished[static_cast<size_t>(FinishReason::kLength)], 40u);
  EXPECT_EQ(stats.generation_tokens, 320u);
  EXPECT_EQ(stats.time_to_first_token.count, 40u);
  EXPECT_EQ(stats.e2e_request_latency.count, 40u);
  EXPECT_EQ(stats.num_requests_running, 0);
  client->shutdown(1s);
  EXPECT_EQ(client->state(), EngineState::kStopped);
}

TEST(EngineClient, AbortEndsTheStreamAndDuplicatesAndBadRequestsAreRefused) {
  EngineConfig config = small_config();
  FakeExecutor::Options slow;
  slow.step_delay = 2ms;  // 100 tokens take 200 ms: the abort lands mid-request
  auto client = make_engine_client(std::make_unique<FakeExecutor>(slow), config);
  auto stream = client->submit(make_request("long", std::vector<int32_t>(10, 1), 100));
  try {
    client->submit(make_request("long", {1}, 1));
    ADD_FAILURE() << "duplicate id accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_THROW(client->submit(make_request("big", std::vector<int32_t>(100, 1), 100)), Error);
  auto first = stream->next(5s);
  ASSERT_TRUE(first.has_value());
  client->abort("long");
  FinishReason finish = FinishReason::kNone;
  int outputs = 0;
  const auto tokens = drain(*stream, &finish, &outputs);
  EXPECT_EQ(finish, FinishReason::kAbort);
  EXPECT_LT(tokens.size(), 99u);
  EXPECT_TRUE(stream->ended());
  EXPECT_FALSE(stream->next(1ms).has_value());
  client->shutdown(0s);
}

TEST(EngineClient, ShutdownDrainsThenAbortsAndRefusesNewWork) {
  EngineConfig config = small_config();
  {
    auto client = make_engine_client(std::make_unique<FakeExecutor>(), config);
    auto stream = client->submit(make_request("short", {1, 2, 3}, 5));
    client->shutdown(10s);  // enough to finish
    FinishReason finish = FinishReason::kNone;
    int outputs = 0;
    EXPECT_EQ(drain(*stream, &finish, &outputs).size(), 5u);
    EXPECT_EQ(finish, FinishReason::kLength);
    try {
      client->submit(make_request("late", {1}, 1));
      ADD_FAILURE() << "accepted after shutdown";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    }
  }
  {
    auto client = make_engine_client(std::make_unique<FakeExecutor>(), config);
    auto stream = client->submit(make_request("long", {1, 2, 3}, 120));
    client->shutdown(0s);
    FinishReason finish = FinishReason::kNone;
    int outputs = 0;
    drain(*stream, &finish, &outputs);
    EXPECT_EQ(finish, FinishReason::kAbort);
  }
}

}  // namespace
}  // namespace hyllm::testing
