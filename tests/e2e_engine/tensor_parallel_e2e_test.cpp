// Tensor parallelism on the CPU backend: ranks as threads with the
// in-process communicator, each holding its share of the heads and
// intermediate columns. Every head and every logit is computed whole on one
// rank, and a row-parallel projection's partial sums are added in fp32 and
// rounded once, so the split model's numbers differ from the unsplit one's
// only in the order of fp32 additions inside those projections (and, for
// MoE, in each expert's bf16 rounding of its partial output). That order is
// not the unsplit GEMM's, so a bf16 rounding now and then lands one ulp
// apart: greedy tokens are equal except where the unsplit model's best two
// are nearly tied (see expect_same_greedy_tokens).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/cpu_communicator.h"
#include "backend/ops.h"
#include "engine/runner/tensor_parallel_executor.h"
#include "engine_e2e_util.h"
#include "util/log.h"

namespace hyllm::e2e {
namespace {

namespace fs = std::filesystem;

fs::path tiny_model_dir(const std::string& name) {
  return name == "hyllm-tiny" ? fs::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny"
                              : fs::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / name;
}

// An engine over `size` CPU ranks of the model in `dir`; pad_decode_steps
// pads decode steps on every rank as CUDA graphs do (RunnerOptions).
struct ParallelEngine {
  std::unique_ptr<TensorParallelExecutor> executor;
  std::unique_ptr<EngineCore> core;

  ParallelEngine(const fs::path& dir, int size, const EngineConfig& config, bool pad_decode_steps = false) {
    std::vector<std::unique_ptr<Backend>> backends;
    auto comms = make_cpu_communicators(size);
    for (int r = 0; r < size; ++r) {
      backends.push_back(make_cpu_backend());
      backends.back()->set_communicator(comms[static_cast<size_t>(r)]);
    }
    executor = std::make_unique<TensorParallelExecutor>(std::move(backends), [&](int rank, Backend& backend,
                                                                                 auto share) {
      RunnerOptions ro = runner_options(config);
      ro.samples = rank == 0;
      ro.pad_decode_steps = pad_decode_steps;
      if (size > 1 && config.num_speculative_tokens > 0) ro.share_samples = std::move(share);
      return std::make_unique<ModelRunner>(load_model(dir, backend, model_options(config)), ro);
    });
    core = std::make_unique<EngineCore>(*executor, config);
  }
};

std::map<std::string, Choice> run_unsplit(const fs::path& dir, const EngineConfig& config,
                                          const std::vector<EngineRequest>& requests) {
  ParallelEngine one(dir, 1, config);
  return run_together(*one.core, requests);
}

struct Case {
  std::string model;
  int size;
  bool moe = false;
};

class TensorParallelE2E : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { spdlog::set_level(spdlog::level::warn); }
};

// The split model's tokens against the unsplit model's, in the spirit of the
// CUDA goldens' margin rule: equal until, at most, one position per request
// where the unsplit model's best token leads the split model's choice by no
// more than three times the noise (after which the runs go their own ways;
// the noise grows along a sequence, so the largest one seen stands for the
// one at the flip, with room). The noise is the largest logprob difference of
// a token both runs chose, and it must itself stay small: a wrong cut of any
// tensor moves logprobs by far more.
constexpr float kNoiseBound = 0.25f;
constexpr float kMoeNoiseBound = 0.5f;

struct Agreement {
  int equal_requests = 0;
  int tie_flips = 0;
  float noise = 0;  // the largest |logprob difference| of a token both chose
};

// A MoE model's flips cannot be judged this way: a partial sum a bf16 ulp
// off can flip a near tie among the router's logits, which changes the
// experts and so the output by much more than the final logits' margin shows
// (the layer test TensorParallelLayers.MoeSplitSumsToTheWholeMoe pins the
// MoE cut down instead). For MoE only a looser noise bound (a flip that keeps
// the argmax still moves the logprobs) and the share of equal requests are
// checked.
Agreement expect_same_greedy_tokens(const std::vector<EngineRequest>& requests,
                                    const std::map<std::string, Choice>& want,
                                    const std::map<std::string, Choice>& got, bool moe) {
  Agreement a;
  std::vector<std::pair<const EngineRequest*, size_t>> flips;  // (request, first differing token)
  for (const auto& r : requests) {
    const std::string key = r.request_id + "#0";
    const Choice& w = want.at(key);
    const Choice& g = got.at(key);
    EXPECT_EQ(w.tokens.size(), static_cast<size_t>(r.sampling.max_tokens)) << r.request_id;
    EXPECT_EQ(g.tokens.size(), w.tokens.size()) << r.request_id;
    size_t i = 0;
    for (; i < std::min(w.tokens.size(), g.tokens.size()) && w.tokens[i] == g.tokens[i]; ++i)
      a.noise = std::max(a.noise, std::fabs(w.logprobs[i] - g.logprobs[i]));
    if (i == w.tokens.size()) {
      ++a.equal_requests;
    } else {
      flips.emplace_back(&r, i);
    }
  }
  EXPECT_LE(a.noise, moe ? kMoeNoiseBound : kNoiseBound);
  a.tie_flips = static_cast<int>(flips.size());
  if (moe) return a;
  for (const auto& [r, i] : flips) {
    const std::string key = r->request_id + "#0";
    const auto& top = want.at(key).top_logprobs[i];
    const int32_t chosen = got.at(key).tokens[i];
    auto it = std::find_if(top.begin(), top.end(), [&](const auto& e) { return e.first == chosen; });
    if (it == top.end()) {
      ADD_FAILURE() << r->request_id << " diverges at token " << i << " to " << chosen
                    << ", which is not among the unsplit model's best " << top.size();
      continue;
    }
    EXPECT_LE(top[0].second - it->second, 3 * a.noise)
        << r->request_id << " diverges at token " << i << " where the unsplit model's best leads by "
        << top[0].second - it->second;
  }
  return a;
}

TEST_P(TensorParallelE2E, ThirtyTwoConcurrentGreedyRequestsGiveTheUnsplitTokens) {
  const Case c = GetParam();
  const fs::path dir = tiny_model_dir(c.model);
  const EngineConfig config = wide_config();
  // The split engine pads its decode steps (the unsplit one does not): padding rows must not reach real ones.
  ParallelEngine split(dir, c.size, config, true);
  auto requests = random_requests(32, 7, split.executor->vocab_size(), config.max_model_len);
  for (auto& r : requests) r.sampling.logprobs = 5;
  const auto want = run_unsplit(dir, config, requests);
  const auto got = run_together(*split.core, requests);
  const Agreement a = expect_same_greedy_tokens(requests, want, got, c.moe);
  // Near ties are rare: most requests agree to the last token.
  EXPECT_GE(a.equal_requests, c.moe ? 16 : 24) << a.tie_flips << " requests flipped";
  std::printf("%s tp%d: %d of 32 requests equal to the last token, %d flipped, largest logprob "
              "difference %.4f\n", c.model.c_str(), c.size, a.equal_requests, a.tie_flips, a.noise);
  // Every rank holds the same cache geometry, and all of it is free again.
  EXPECT_EQ(split.core->scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(split.core->scheduler().slot_pool().num_used(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TensorParallelE2E,
    ::testing::Values(Case{"hyllm-tiny", 2}, Case{"hyllm-tiny", 4}, Case{"dense_flat_aligned", 2},
                      Case{"dense_flat_aligned", 4}, Case{"dense_flat_ratio3", 2}, Case{"dense_nested_tied", 2},
                      Case{"moe_flat_fused", 2, true}, Case{"moe_flat_fused", 4, true},
                      Case{"moe_flat_per_expert_tied", 2, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.model + "_tp" + std::to_string(info.param.size);
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

TEST(TensorParallelE2ESpeculative, MtpDraftsOverTwoRanksGiveTheUnsplitTokens) {
  // Every rank accepts drafts and rolls back like rank 0, from rank 0's
  // samples, and the MTP head is split like the model.
  spdlog::set_level(spdlog::level::warn);
  const fs::path dir = tiny_model_dir("hyllm-tiny");
  const EngineConfig plain = wide_config();
  EngineConfig spec = plain;
  spec.num_speculative_tokens = 2;
  ParallelEngine split(dir, 2, spec);
  auto requests = random_requests(32, 9, split.executor->vocab_size(), plain.max_model_len);
  for (auto& r : requests) r.sampling.logprobs = 5;
  const auto want = run_unsplit(dir, plain, requests);
  const auto got = run_together(*split.core, requests);
  const Agreement a = expect_same_greedy_tokens(requests, want, got, false);
  EXPECT_GE(a.equal_requests, 24) << a.tie_flips << " requests flipped";
  const EngineStats s = split.core->stats();
  EXPECT_GT(s.spec_num_accepted_tokens, 0u);  // the trained head's drafts are accepted
  EXPECT_GT(split.executor->times().draft_s, 0.0);
  EXPECT_EQ(split.core->scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(split.core->scheduler().slot_pool().num_used(), 0);
}

TEST(TensorParallelE2EErrors, ASizeThatDoesNotDivideTheHeadsIsRefusedNamingTheField) {
  spdlog::set_level(spdlog::level::warn);
  try {
    ParallelEngine e(tiny_model_dir("moe_nested_per_expert"), 2, wide_config());  // 3 GDN value heads
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("linear_num_value_heads"), std::string::npos) << e.what();
  }
}

TEST(TensorParallelE2EErrors, ARankThatFailsToLoadDoesNotHangTheOthers) {
  spdlog::set_level(spdlog::level::warn);
  std::vector<std::unique_ptr<Backend>> backends;
  auto comms = make_cpu_communicators(2);
  for (int r = 0; r < 2; ++r) {
    backends.push_back(make_cpu_backend());
    backends.back()->set_communicator(comms[static_cast<size_t>(r)]);
  }
  try {
    TensorParallelExecutor executor(std::move(backends), [](int rank, Backend& backend,
                                                            auto) -> std::unique_ptr<ModelRunner> {
      if (rank == 1) fail(ErrorCode::kNotFound, "rank 1 has no model");
      // Rank 0 waits in a collective for rank 1, which never comes.
      std::vector<float> x(4, 1.0f);
      TensorView v(x.data(), DType::kF32, Shape{1, 4}, backend.device());
      all_reduce(backend, {v, v});
      return nullptr;
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound) << e.what();
  }
}

}  // namespace
}  // namespace hyllm::e2e
