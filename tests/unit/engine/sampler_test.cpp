#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

namespace hyllm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Row {
  std::vector<float> logits;
  SamplingParams params;
  std::vector<int32_t> prompt, output, banned;
  SeqWork work(uint64_t seed = 0, uint64_t index = 0) const {
    SeqWork w;
    w.sample = true;
    w.sampling = &params;
    w.prompt_ids = prompt;
    w.output_ids = output;
    w.banned_token_ids = banned;
    w.seed = seed;
    w.sample_index = index;
    return w;
  }
};

std::vector<float> logits_of_probs(std::vector<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::map<int32_t, int> histogram(const Row& row, int draws, uint64_t seed) {
  Sampler s;
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) h[s.sample(row.logits, row.work(seed, static_cast<uint64_t>(i))).token]++;
  return h;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  Row row{{0.1f, 2.0f, 2.0f, -1.0f}, {}};
  row.params.temperature = 0.0f;
  Sampler s;
  EXPECT_EQ(s.sample(row.logits, row.work()).token, 1);
}

TEST(Sampler, PenaltiesFollowVllmExactly) {
  Row row{{2.0f, -2.0f, 1.0f, 0.5f, 3.0f}, {}};
  row.params.repetition_penalty = 2.0f;
  row.params.frequency_penalty = 0.5f;
  row.params.presence_penalty = 0.25f;
  row.prompt = {0, 1};
  row.output = {1, 2, 2};
  row.banned = {4};
  std::vector<float> l = row.logits;
  std::vector<int32_t> scratch;
  apply_bans_and_penalties(l, row.work(), scratch);
  EXPECT_FLOAT_EQ(l[0], 1.0f);                       // prompt only: 2 / 2
  EXPECT_FLOAT_EQ(l[1], -4.0f - 0.5f - 0.25f);       // negative: -2 * 2, once in the output
  EXPECT_FLOAT_EQ(l[2], 0.5f - 2 * 0.5f - 0.25f);    // 1 / 2, twice in the output
  EXPECT_FLOAT_EQ(l[3], 0.5f);                       // untouched
  EXPECT_EQ(l[4], kNegInf);                          // banned
}

TEST(Sampler, MinPTopKAndTopPMasksAreExact) {
  const std::vector<float> base = logits_of_probs({0.5, 0.3, 0.15, 0.05});
  std::vector<int32_t> scratch;
  auto kept = [&](SamplingParams p) {
    std::vector<float> l = base;
    apply_temperature_and_masks(l, p, scratch);
    std::vector<int> k;
    for (size_t i = 0; i < l.size(); ++i) k.push_back(l[i] != kNegInf);
    return k;
  };
  SamplingParams p;
  p.min_p = 0.2f;  // threshold 0.1
  EXPECT_EQ(kept(p), (std::vector<int>{1, 1, 1, 0}));
  p = {};
  p.top_k = 2;
  EXPECT_EQ(kept(p), (std::vector<int>{1, 1, 0, 0}));
  p = {};
  p.top_p = 0.75f;  // drops 0.05 and 0.15 (0.2 <= 0.25), not 0.3
  EXPECT_EQ(kept(p), (std::vector<int>{1, 1, 0, 0}));
  p.top_p = 0.9f;   // drops 0.05 only
  EXPECT_EQ(kept(p), (std::vector<int>{1, 1, 1, 0}));
  p.top_p = 0.1f;   // the most likely always stays
  EXPECT_EQ(kept(p), (std::vector<int>{1, 0, 0, 0}));
  p = {};
  p.top_k = 1;      // ties with the k-th stay
  std::vector<float> tie = {1.0f, 3.0f, 3.0f, 0.0f};
  apply_temperature_and_masks(tie, p, scratch);
  EXPECT_EQ(tie[0], kNegInf);
  EXPECT_EQ(tie[1], 3.0f);
  EXPECT_EQ(tie[2], 3.0f);
  p = {};
  p.temperature = 2.0f;
  std::vector<float> t = {4.0f, -2.0f};
  apply_temperature_and_masks(t, p, scratch);
  EXPECT_FLOAT_EQ(t[0], 2.0f);
  EXPECT_FLOAT_EQ(t[1], -1.0f);
}

// The masks by a full sort, as vLLM computes them.
std::vector<int> reference_kept(const std::vector<float>& logits, int top_k, double top_p) {
  const size_t n = logits.size();
  std::vector<int32_t> asc(n);
  std::iota(asc.begin(), asc.end(), 0);
  std::sort(asc.begin(), asc.end(), [&](int32_t a, int32_t b) {
    return logits[a] < logits[b] || (logits[a] == logits[b] && a > b);
  });
  std::vector<int> kept(n, 1);
  if (top_k > 0) {
    const float kth = logits[asc[n - static_cast<size_t>(top_k)]];
    for (size_t i = 0; i < n; ++i) kept[i] = logits[i] >= kth;
  }
  const float mx = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += kept[i] ? std::exp(double(logits[i] - mx)) : 0.0;
  double dropped = 0;
  size_t remaining = static_cast<size_t>(std::count(kept.begin(), kept.end(), 1));
  for (int32_t id : asc) {
    if (!kept[id] || remaining == 1) continue;
    const double pr = std::exp(double(logits[id] - mx)) / z;
    if (dropped + pr > 1.0 - top_p) break;
    dropped += pr;
    kept[id] = 0;
    remaining--;
  }
  return kept;
}

TEST(Sampler, SelectionMasksMatchAFullSortOnALargeVocabulary) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<int32_t> scratch;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> base(5000);
    for (auto& v : base) v = normal(rng);
    SamplingParams p;
    p.top_k = trial % 2 ? static_cast<int>(rng() % 3000) + 1 : 0;
    p.top_p = trial % 3 ? 0.5f + 0.49f * static_cast<float>(trial) / 20.0f : 1.0f;
    std::vector<float> l = base;
    apply_temperature_and_masks(l, p, scratch);
    std::vector<int> got(l.size());
    for (size_t i = 0; i < l.size(); ++i) got[i] = l[i] != kNegInf;
    EXPECT_EQ(got, reference_kept(base, p.top_k, p.top_p)) << "trial " << trial;
  }
}

TEST(Sampler, SampledFrequenciesFollowTheMaskedDistribution) {
  Row row{logits_of_probs({0.5, 0.3, 0.15, 0.05}), {}};
  row.params.temperature = 1.0f;
  const int draws = 20000;
  auto h = histogram(row, draws, 42);
  const double want[] = {0.5, 0.3, 0.15, 0.05};
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(h[t] / double(draws), want[t], 0.015) << t;

  row.params.top_p = 0.75f;  // 0.5 : 0.3 renormalized
  h = histogram(row, draws, 43);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_NEAR(h[0] / double(draws), 0.625, 0.015);

  row.params = {};
  row.params.temperature = 0.5f;  // probabilities squared, renormalized
  h = histogram(row, draws, 44);
  const double z = 0.25 + 0.09 + 0.0225 + 0.0025;
  EXPECT_NEAR(h[0] / double(draws), 0.25 / z, 0.015);
  EXPECT_NEAR(h[1] / double(draws), 0.09 / z, 0.015);
}

TEST(Sampler, SameSeedAndIndexGiveTheSameTokenWhateverCameBefore) {
  Row row{logits_of_probs({0.25, 0.25, 0.25, 0.25}), {}};
  row.params.temperature = 1.0f;
  Sampler a, b;
  std::vector<int32_t> first, second;
  for (uint64_t i = 0; i < 50; ++i) first.push_back(a.sample(row.logits, row.work(7, i)).token);
  // Another sampler, other rows interleaved, same (seed, index) pairs.
  Row other{logits_of_probs({0.1, 0.9}), {}};
  other.params.temperature = 1.0f;
  for (uint64_t i = 0; i < 50; ++i) {
    b.sample(other.logits, other.work(99, i));
    second.push_back(b.sample(row.logits, row.work(7, i)).token);
  }
  EXPECT_EQ(first, second);
  std::vector<int32_t> other_seed;
  for (uint64_t i = 0; i < 50; ++i) other_seed.push_back(a.sample(row.logits, row.work(8, i)).token);
  EXPECT_NE(first, other_seed);
  double mean = 0;
  for (uint64_t i = 0; i < 10000; ++i) mean += sampler_uniform(3, i);
  EXPECT_NEAR(mean / 10000, 0.5, 0.01);
}

TEST(Sampler, LogprobsAreOfTheRawDistribution) {
  Row row{{1.0f, 2.0f, 3.0f, 0.0f}, {}};
  row.params.temperature = 0.0f;
  row.params.repetition_penalty = 10.0f;
  row.prompt = {2};
  row.params.logprobs = 2;
  Sampler s;
  SampledToken t = s.sample(row.logits, row.work());
  EXPECT_EQ(t.token, 1);  // the penalty moved the argmax
  const double z = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(0.0));
  EXPECT_NEAR(t.logprob, 2.0 - z, 1e-6);
  ASSERT_EQ(t.top_logprobs.size(), 2u);
  EXPECT_EQ(t.top_logprobs[0].first, 2);
  EXPECT_NEAR(t.top_logprobs[0].second, 3.0 - z, 1e-6);
  EXPECT_EQ(t.top_logprobs[1].first, 1);
}

TEST(Sampler, LogitBiasIsAddedBeforeSamplingAndLogprobsStayRaw) {
  Row row{logits_of_probs({0.5, 0.3, 0.2}), {}};
  row.params.temperature = 0.0f;
  row.params.logprobs = 0;
  row.params.logit_bias = {{2, 1.0f}};
  Sampler s;
  // log(0.2) + 1 > log(0.5): the bias moves the argmax, and the logprob is the raw one.
  SampledToken t = s.sample(row.logits, row.work());
  EXPECT_EQ(t.token, 2);
  EXPECT_NEAR(t.logprob, std::log(0.2), 1e-6);
  row.params.logit_bias = {{0, -100.0f}};
  row.params.temperature = 1.0f;
  auto h = histogram(row, 2000, 3);
  EXPECT_EQ(h.count(0), 0u);
  // The rest keep their odds: 0.3 against 0.2.
  EXPECT_NEAR(h[1] / 2000.0, 0.6, 0.05);
  // A bias does not lift a banned token.
  row.params.logit_bias = {{0, 100.0f}};
  row.banned = {0};
  EXPECT_EQ(histogram(row, 500, 4).count(0), 0u);
  // Ids past the vocabulary are ignored here (requests are validated before).
  row.banned = {};
  row.params.logit_bias = {{1, 100.0f}, {7, 100.0f}};
  row.params.temperature = 0.0f;
  EXPECT_EQ(s.sample(row.logits, row.work()).token, 1);
}

TEST(Sampler, BannedTokensAreNeverSampled) {
  Row row{logits_of_probs({0.97, 0.01, 0.01, 0.01}), {}};
  row.params.temperature = 1.0f;
  row.banned = {0};
  auto h = histogram(row, 2000, 5);
  EXPECT_EQ(h.count(0), 0u);
  row.params.temperature = 0.0f;
  Sampler s;
  EXPECT_NE(s.sample(row.logits, row.work()).token, 0);
}

}  // namespace
}  // namespace hyllm

namespace hyllm {
namespace {

TEST(Sampler, TokenBitmaskComesFirstAndLogprobsSeeIt) {
  // 70 tokens (3 bitmask words); only 5, 33 and 64 allowed.
  Row row;
  std::mt19937 rng(2);
  std::normal_distribution<float> n(0.0f, 2.0f);
  for (int i = 0; i < 70; ++i) row.logits.push_back(n(rng));
  row.logits[7] = 50.0f;  // the unconstrained favourite is masked
  std::vector<uint32_t> mask(3, 0u);
  for (int t : {5, 33, 64}) mask[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
  Sampler s;
  row.params.temperature = 0.0f;
  const int32_t greedy = s.sample(row.logits, row.work(), mask).token;
  int32_t best = 5;
  for (int t : {33, 64}) best = row.logits[static_cast<size_t>(t)] > row.logits[static_cast<size_t>(best)] ? t : best;
  EXPECT_EQ(greedy, best);
  row.params.temperature = 1.0f;
  row.params.logprobs = 4;
  double total = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    SampledToken t = s.sample(row.logits, row.work(9, i), mask);
    EXPECT_TRUE(t.token == 5 || t.token == 33 || t.token == 64) << t.token;
    // Logprobs are of the masked distribution: three tokens share all mass.
    ASSERT_EQ(t.top_logprobs.size(), 4u);
    total = 0;
    for (int k = 0; k < 3; ++k) total += std::exp(t.top_logprobs[static_cast<size_t>(k)].second);
    EXPECT_NEAR(total, 1.0, 1e-5);
    EXPECT_EQ(t.top_logprobs[3].second, kNegInf);
  }
  // A mask that allows nothing gives no token (-1, the row's request fails
  // alone), never a masked token and never an exception that would end the step.
  std::vector<uint32_t> none(3, 0u);
  row.params.temperature = 0.0f;
  EXPECT_EQ(s.sample(row.logits, row.work(), none).token, -1);
  row.params.temperature = 1.0f;
  EXPECT_EQ(s.sample(row.logits, row.work(), none).token, -1);
}

}  // namespace
}  // namespace hyllm
