// Structured output as the engine sees it: a TokenConstraint's mask decides
// every sampled token, each appended token is reported to it once (forced
// ones included), forced tokens are computed in the next step as one chunk,
// and a constraint that rejects or throws fails only its own request.

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine_test_util.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm::testing {
namespace {

// Allows only multiples of `step`; after each accepted token t it forces
// t + 1 and t + 2 (the "grammar text" that follows it), unless disabled.
class MultiplesConstraint : public TokenConstraint {
 public:
  MultiplesConstraint(int vocab, int step, bool force) : vocab_(vocab), step_(step), force_(force) {}
  bool fill_next_token_bitmask(std::span<uint32_t> mask) override {
    ++fills;
    std::fill(mask.begin(), mask.end(), 0u);
    for (int t = 0; t < vocab_; t += step_) mask[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
    return true;
  }
  bool accept_token(int32_t token) override {
    accepted.push_back(token);
    if (reject_next) return false;
    return true;
  }
  std::vector<int32_t> forced_tokens(int max_tokens) override {
    if (!force_ || accepted.empty()) return {};
    std::vector<int32_t> out;
    const int32_t last = accepted.back();
    for (int32_t t : {last + 1, last + 2}) {
      if (static_cast<int>(out.size()) < max_tokens && t < vocab_) out.push_back(t);
    }
    forced.insert(forced.end(), out.begin(), out.end());
    return out;
  }
  int vocab_, step_;
  bool force_;
  bool reject_next = false;
  int fills = 0;
  std::vector<int32_t> accepted, forced;
};

TEST(EngineConstraint, MaskDecidesEverySampledTokenAndForcedTokensFollow) {
  EngineConfig config = small_config();
  // Prefix caching splits chunks at block boundaries to snapshot GDN state;
  // this test pins the chunking that forced tokens cause on their own.
  config.enable_prefix_caching = false;
  FakeExecutor ex;
  std::vector<int> chunk_sizes;
  ex.on_step = [&](const StepInput& in) {
    for (const SeqWork& w : in.seqs) {
      if (w.start_pos > 0) chunk_sizes.push_back(static_cast<int>(w.token_ids.size()));
    }
  };
  EngineCore core(ex, config);
  std::mt19937 rng(3);
  EngineRequest r = make_request("c", random_prompt(rng, 9, 64), 12, 1);
  r.sampling.temperature = 1.0f;
  r.sampling.ignore_eos = true;
  auto c = std::make_shared<MultiplesConstraint>(64, 8, true);
  r.constraints = {c};
  core.add_request(r);
  Results res = run_all(core, {{"c", 1}}, 100000, /*jump_forward=*/true);
  const auto& out = res.by_request.at("c").at(0).tokens;
  ASSERT_EQ(out.size(), 12u);
  // Sampled, forced, forced, sampled, ...: max_tokens cuts the last group.
  for (size_t i = 0; i < out.size(); ++i) {
    if (i % 3 == 0) {
      EXPECT_EQ(out[i] % 8, 0) << "sampled token " << i << " is not allowed";
    } else {
      EXPECT_EQ(out[i], out[i - 1] + 1);
    }
  }
  EXPECT_EQ(c->accepted.size(), 4u) << "forced tokens are not accepted twice";
  EXPECT_EQ(c->fills, 4);
  // Each forced pair is computed with the sampled token before it: chunks of 3.
  for (size_t i = 0; i + 1 < chunk_sizes.size(); ++i) EXPECT_EQ(chunk_sizes[i], 3) << i;
}

// Enough constrained choices share the steps that their grammars advance on
// the worker pool: the same tokens, each accepted once, forced tokens after
// them, and a rejection still fails only its own request.
TEST(EngineConstraint, ManyConstrainedChoicesGiveTheSameTokensOnThePool) {
  EngineConfig config = small_config();
  config.enable_prefix_caching = false;
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(7);
  std::vector<std::shared_ptr<MultiplesConstraint>> cs;
  std::map<std::string, int> expect;
  for (int i = 0; i < 8; ++i) {
    const std::string id = "c" + std::to_string(i);
    EngineRequest r = make_request(id, random_prompt(rng, 5 + i, 64), 12, 1);
    r.sampling.temperature = 1.0f;
    r.sampling.ignore_eos = true;
    cs.push_back(std::make_shared<MultiplesConstraint>(64, 8, true));
    if (i == 3) cs.back()->reject_next = true;
    r.constraints = {cs.back()};
    core.add_request(r);
    expect[id] = 1;
  }
  Results res = run_all(core, expect, 100000, /*jump_forward=*/true);
  for (int i = 0; i < 8; ++i) {
    const auto& choice = res.by_request.at("c" + std::to_string(i)).at(0);
    if (i == 3) {
      EXPECT_EQ(choice.finish, FinishReason::kError);
      continue;
    }
    ASSERT_EQ(choice.tokens.size(), 12u) << i;
    for (size_t t = 0; t < choice.tokens.size(); ++t) {
      if (t % 3 == 0) {
        EXPECT_EQ(choice.tokens[t] % 8, 0) << "request " << i << " token " << t;
      } else {
        EXPECT_EQ(choice.tokens[t], choice.tokens[t - 1] + 1) << "request " << i << " token " << t;
      }
    }
    EXPECT_EQ(cs[static_cast<size_t>(i)]->accepted.size(), 4u) << i;
    EXPECT_EQ(cs[static_cast<size_t>(i)]->fills, 4) << i;
  }
}

TEST(EngineConstraint, RejectionFailsOnlyThatRequest) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(4);
  EngineRequest bad = make_request("bad", random_prompt(rng, 5, 64), 6, 1);
  auto c = std::make_shared<MultiplesConstraint>(64, 4, false);
  c->reject_next = true;
  bad.constraints = {c};
  core.add_request(bad);
  core.add_request(make_request("good", random_prompt(rng, 5, 64), 6, 1));
  Results res = run_all(core, {{"bad", 1}, {"good", 1}});
  EXPECT_EQ(res.by_request.at("bad").at(0).finish, FinishReason::kError);
  EXPECT_NE(res.by_request.at("good").at(0).finish, FinishReason::kError);
}

// A grammar that is complete but has no stop token to offer allows nothing.
class NothingAllowedConstraint : public TokenConstraint {
 public:
  bool fill_next_token_bitmask(std::span<uint32_t> mask) override {
    std::fill(mask.begin(), mask.end(), 0u);
    return true;
  }
  bool accept_token(int32_t) override { return true; }
  std::vector<int32_t> forced_tokens(int) override { return {}; }
};

TEST(EngineConstraint, MaskThatAllowsNothingFailsOnlyThatRequest) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  int shared_steps = 0;
  ex.on_step = [&](const StepInput& in) {
    int sampled = 0;
    for (const SeqWork& w : in.seqs) sampled += w.sample ? 1 : 0;
    if (sampled == 2) ++shared_steps;
  };
  EngineCore core(ex, config);
  std::mt19937 rng(6);
  for (float temperature : {0.0f, 1.0f}) {
    const std::string bad = "bad" + std::to_string(temperature), good = "good" + std::to_string(temperature);
    EngineRequest b = make_request(bad, random_prompt(rng, 5, 64), 6, 1);
    b.sampling.temperature = temperature;
    b.sampling.ignore_eos = true;
    b.constraints = {std::make_shared<NothingAllowedConstraint>()};
    EngineRequest g = make_request(good, random_prompt(rng, 5, 64), 6, 1);
    g.sampling.temperature = temperature;
    g.sampling.ignore_eos = true;
    core.add_request(b);
    core.add_request(g);
    shared_steps = 0;
    Results res = run_all(core, {{bad, 1}, {good, 1}});
    ASSERT_GT(shared_steps, 0) << "the two requests never shared a step";
    EXPECT_EQ(res.by_request.at(bad).at(0).finish, FinishReason::kError);
    EXPECT_EQ(res.by_request.at(good).at(0).finish, FinishReason::kLength) << "temperature " << temperature;
    EXPECT_EQ(res.by_request.at(good).at(0).tokens.size(), 6u);
  }
}

TEST(EngineConstraint, OneConstraintPerChoice) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(5);
  EngineRequest r = make_request("n", random_prompt(rng, 5, 64), 4, 2);
  r.constraints = {std::make_shared<MultiplesConstraint>(64, 4, false)};
  EXPECT_THROW(core.validate(r), Error);
  r.constraints.push_back(std::make_shared<MultiplesConstraint>(64, 4, false));
  core.validate(r);
}

}  // namespace
}  // namespace hyllm::testing
