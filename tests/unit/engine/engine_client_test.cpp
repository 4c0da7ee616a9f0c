// The threaded EngineClient: concurrent submitters, streams, abort, shutdown.

#include "engine/engine_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
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

// submit_batch: every request is in the engine's first step (one by one,
// the first could start a step alone), each stream gets its request's tokens,
// and a batch with a bad request or a repeated id is refused whole.
TEST(EngineClient, ABatchSubmittedAtOnceIsScheduledTogetherOrRefusedWhole) {
  EngineConfig config = small_config();  // 8 sequences, 32 tokens a step
  auto executor = std::make_unique<FakeExecutor>();
  std::mutex mu;
  std::vector<size_t> step_seqs;
  executor->on_step = [&](const StepInput& in) {
    std::lock_guard lock(mu);
    step_seqs.push_back(in.seqs.size());
  };
  auto client = make_engine_client(std::move(executor), config);
  std::mt19937 rng(7);
  auto batch = [&](const std::string& tag) {
    std::vector<EngineRequest> b;
    for (int i = 0; i < 8; ++i) b.push_back(make_request(tag + std::to_string(i), random_prompt(rng, 4, 64), 3));
    return b;
  };

  std::vector<EngineRequest> bad = batch("bad");
  bad[5].prompt_token_ids.assign(200, 1);  // past max_model_len
  EXPECT_THROW(client->submit_batch(bad), Error);
  std::vector<EngineRequest> repeated = batch("rep");
  repeated[6].request_id = repeated[2].request_id;
  try {
    client->submit_batch(repeated);
    ADD_FAILURE() << "a repeated id was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }

  std::vector<EngineRequest> good = batch("good");
  good[0].request_id = bad[0].request_id;  // free: the refused batch submitted nothing
  good[1].request_id = repeated[0].request_id;  // free too: the refused batch's entries were taken back
  const auto streams = client->submit_batch(good);
  ASSERT_EQ(streams.size(), good.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    FinishReason finish = FinishReason::kNone;
    int outputs = 0;
    EXPECT_EQ(drain(*streams[i], &finish, &outputs), solo(good[i], config)[0].tokens) << good[i].request_id;
    EXPECT_EQ(finish, FinishReason::kLength);
  }
  EXPECT_EQ(client->stats().request_finished[static_cast<size_t>(FinishReason::kLength)], 8u);
  std::lock_guard lock(mu);
  ASSERT_FALSE(step_seqs.empty());
  EXPECT_EQ(step_seqs.front(), 8u) << "the batch's first step holds all of its requests";
  client->shutdown(1s);
}

}  // namespace
}  // namespace hyllm::testing
