// Harness: the GPU sampler against the host sampler (engine/sampler.h) on the
// same logits and parameters: tokens must be equal, logprobs within fp32;
// and its scoring rows against engine/logprobs.h's score_token.
#include <algorithm>

#include "backend/device_sampler.h"
#include "cuda_test_util.h"
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "engine/token_constraint.h"

namespace hyllm::test {
namespace {

struct RowSpec {
  SamplingParams params;
  std::vector<int32_t> prompt, output, banned;
  uint64_t seed = 0, index = 0;
};

TEST_F(CudaOpTest, SamplerMatchesHost) {
  Rng rng(seed_);
  auto sampler = make_cuda_sampler(*gpu_);
  int64_t mismatches = 0, rows_checked = 0;
  double max_lp_err = 0.0;
  // (vocab, rows, kind of row 0): many rows, then single rows (a batch-1
  // decode step) of the modes with the most steps over the vocabulary.
  struct Batch {
    int64_t V;
    int R, first_kind;
  };
  for (const Batch b : {Batch{5000, 48, 0}, Batch{248320, 6, 0}, Batch{248320, 1, 0}, Batch{248320, 1, 5},
                        Batch{248320, 1, 6}, Batch{248320, 1, 2}}) {
    const int64_t V = b.V;
    const int R = b.R;
    std::vector<RowSpec> specs;
    for (int r = 0; r < R; ++r) {
      RowSpec s;
      SamplingParams& p = s.params;
      const int kind = (r + b.first_kind) % 8;
      p.temperature = kind == 0 ? 0.0f : static_cast<float>(rng.uniform(0.3, 1.5));
      if (kind == 1 || kind == 5) p.top_k = static_cast<int>(rng.integer(1, 60));
      if (kind == 2 || kind == 5) p.top_p = static_cast<float>(rng.uniform(0.2, 0.95));
      if (kind == 3) p.min_p = static_cast<float>(rng.uniform(0.01, 0.3));
      if (kind == 4 || kind == 0) {
        p.repetition_penalty = static_cast<float>(rng.uniform(1.05, 1.5));
        p.frequency_penalty = static_cast<float>(rng.uniform(0.0, 0.8));
        p.presence_penalty = static_cast<float>(rng.uniform(0.0, 0.8));
      }
      if (kind == 6) p.logprobs = static_cast<int>(rng.integer(0, R == 1 ? 32 : 8));
      for (int i = 0; i < 30; ++i) s.prompt.push_back(static_cast<int32_t>(rng.integer(0, V - 1)));
      for (int i = 0; i < 12; ++i) s.output.push_back(static_cast<int32_t>(rng.integer(0, 40)));  // repeats
      if (r % 3 == 0) s.banned = {static_cast<int32_t>(rng.integer(0, V - 1)), 7};
      s.seed = rng.gen()();
      s.index = static_cast<uint64_t>(rng.integer(0, 1000));
      specs.push_back(std::move(s));
    }
    HostTensor logits = f32_tensor({R, V});
    logits.fill_normal(rng, 3.0);
    Mirror dlogits(*gpu_, logits);
    std::vector<DeviceSamplingRow> rows;
    for (const RowSpec& s : specs) {
      DeviceSamplingRow d;
      d.temperature = s.params.temperature;
      d.top_p = s.params.top_p;
      d.top_k = s.params.top_k;
      d.min_p = s.params.min_p;
      d.repetition_penalty = s.params.repetition_penalty;
      d.frequency_penalty = s.params.frequency_penalty;
      d.presence_penalty = s.params.presence_penalty;
      d.num_logprobs = s.params.logprobs.value_or(-1);
      d.seed = s.seed;
      d.sample_index = s.index;
      d.banned_ids = s.banned;
      d.prompt_ids = s.prompt;
      d.output_ids = s.output;
      rows.push_back(d);
    }
    const auto got = sampler->sample(dlogits.view(), rows);
    Sampler host;
    for (int r = 0; r < R; ++r) {
      SeqWork w;
      w.sample = true;
      w.sampling = &specs[r].params;
      w.prompt_ids = specs[r].prompt;
      w.output_ids = specs[r].output;
      w.banned_token_ids = specs[r].banned;
      w.seed = specs[r].seed;
      w.sample_index = specs[r].index;
      const SampledToken want =
          host.sample(std::span<const float>(logits.buf.data_as<const float>() + r * V, static_cast<size_t>(V)), w);
      ++rows_checked;
      if (got[r].token != want.token) {
        ++mismatches;
        ADD_FAILURE() << "row " << r << " V=" << V << " kind " << (r + b.first_kind) % 8 << ": gpu " << got[r].token
                      << " host " << want.token << " (seed " << seed_ << ")";
      }
      if (specs[r].params.logprobs) {
        max_lp_err = std::max(max_lp_err, static_cast<double>(std::fabs(got[r].logprob - want.logprob)));
        ASSERT_EQ(got[r].top_logprobs.size(), want.top_logprobs.size());
        for (size_t i = 0; i < want.top_logprobs.size(); ++i) {
          EXPECT_EQ(got[r].top_logprobs[i].first, want.top_logprobs[i].first);
          max_lp_err = std::max(max_lp_err, static_cast<double>(std::fabs(got[r].top_logprobs[i].second -
                                                                          want.top_logprobs[i].second)));
        }
      }
    }
  }
  auto& e = error_table()["sampler token mismatches"];
  e.first = std::max(e.first, static_cast<double>(mismatches));
  auto& l = error_table()["sampler logprob abs error"];
  l.first = std::max(l.first, max_lp_err);
  l.second = 1e-5;
  EXPECT_LE(max_lp_err, 1e-5);
  EXPECT_EQ(rows_checked, 58);
}

// Structured output: rows with a token bitmask (sparse, dense, one token,
// and none) beside unmasked rows, every sampler mode; the GPU applies the
// mask inside its kernel and must pick what the host picks.
TEST_F(CudaOpTest, MaskedSamplerMatchesHost) {
  Rng rng(seed_ + 1);
  auto sampler = make_cuda_sampler(*gpu_);
  for (int64_t V : {int64_t{5000}, int64_t{248320}}) {
    const int R = 16;
    const size_t W = static_cast<size_t>((V + 31) / 32);
    std::vector<SamplingParams> params(R);
    std::vector<std::vector<uint32_t>> masks(R);
    for (int r = 0; r < R; ++r) {
      SamplingParams& p = params[r];
      const int kind = r % 4;
      p.temperature = kind == 0 ? 0.0f : static_cast<float>(rng.uniform(0.5, 1.2));
      if (kind == 1) p.top_k = 20;
      if (kind == 2) p.top_p = 0.8f;
      if (kind == 3) p.logprobs = 5;
      const int density = (r / 4) % 4;  // 0: no mask, 1: one token, 2: sparse, 3: dense
      if (density == 0) continue;
      masks[r].assign(W, 0u);
      auto allow = [&](int64_t t) { masks[r][static_cast<size_t>(t / 32)] |= 1u << (t % 32); };
      if (density == 1) allow(rng.integer(0, V - 1));
      for (int64_t t = 0; density >= 2 && t < V; ++t) {
        if (rng.uniform(0.0, 1.0) < (density == 2 ? 0.002 : 0.6)) allow(t);
      }
      allow(rng.integer(0, V - 1));
    }
    HostTensor logits = f32_tensor({R, V});
    logits.fill_normal(rng, 3.0);
    Mirror dlogits(*gpu_, logits);
    std::vector<DeviceSamplingRow> rows;
    std::vector<uint64_t> seeds;
    for (int r = 0; r < R; ++r) {
      DeviceSamplingRow d;
      d.temperature = params[r].temperature;
      d.top_p = params[r].top_p;
      d.top_k = params[r].top_k;
      d.num_logprobs = params[r].logprobs.value_or(-1);
      seeds.push_back(rng.gen()());
      d.seed = seeds.back();
      d.sample_index = static_cast<uint64_t>(r);
      d.allowed = masks[r];
      rows.push_back(d);
    }
    const auto got = sampler->sample(dlogits.view(), rows);
    Sampler host;
    for (int r = 0; r < R; ++r) {
      SeqWork w;
      w.sample = true;
      w.sampling = &params[r];
      w.seed = seeds[r];
      w.sample_index = static_cast<uint64_t>(r);
      const SampledToken want = host.sample(
          std::span<const float>(logits.buf.data_as<const float>() + r * V, static_cast<size_t>(V)), w, masks[r]);
      EXPECT_EQ(got[r].token, want.token) << "row " << r << " V=" << V << " (seed " << seed_ << ")";
      if (!masks[r].empty()) {
        EXPECT_TRUE(bitmask_allows(masks[r], got[r].token)) << "row " << r << " sampled a masked token";
      }
      if (params[r].logprobs) {
        EXPECT_NEAR(got[r].logprob, want.logprob, 1e-5);
        ASSERT_EQ(got[r].top_logprobs.size(), want.top_logprobs.size());
        for (size_t i = 0; i < want.top_logprobs.size(); ++i) {
          if (std::isinf(want.top_logprobs[i].second)) continue;  // fewer allowed tokens than asked
          EXPECT_EQ(got[r].top_logprobs[i].first, want.top_logprobs[i].first);
          EXPECT_NEAR(got[r].top_logprobs[i].second, want.top_logprobs[i].second, 1e-5);
        }
      }
    }
  }
}

// Prompt scoring: rows with a target token (the best, a tie with other
// tokens, a mid-ranked and the least likely one, with 0 to 32 top entries)
// beside sampled rows; their logprob, rank and top entries must be the host's
// score_token of the same row, and the sampled rows' tokens the host sampler's.
TEST_F(CudaOpTest, SamplerScoresTargetsAsTheHost) {
  Rng rng(seed_ + 2);
  auto sampler = make_cuda_sampler(*gpu_);
  for (int64_t V : {int64_t{5000}, int64_t{248320}}) {
    const int R = 12;
    HostTensor logits = f32_tensor({R, V});
    logits.fill_normal(rng, 3.0);
    float* l = logits.buf.data_as<float>();
    // Row 1's target ties with three other tokens at the row's maximum: they
    // do not outrank it.
    const float top = *std::max_element(l + V, l + 2 * V);
    for (const int64_t t : {int64_t{3}, int64_t{40}, V / 2, V - 1}) l[V + t] = top;
    Mirror dlogits(*gpu_, logits);
    std::vector<DeviceSamplingRow> rows(R);
    std::vector<SamplingParams> params(R);
    std::vector<int32_t> targets(R, -1);
    for (int r = 0; r < R; ++r) {
      DeviceSamplingRow& d = rows[r];
      const float* row = l + r * V;
      if (r % 4 == 3) {  // a sampled row between scoring rows
        params[r].temperature = 0.8f;
        params[r].logprobs = 2;
        d.temperature = 0.8f;
        d.num_logprobs = 2;
        d.seed = static_cast<uint64_t>(r);
        continue;
      }
      int32_t t = static_cast<int32_t>(rng.integer(0, V - 1));
      if (r == 0) t = static_cast<int32_t>(std::max_element(row, row + V) - row);
      if (r == 1) t = 40;
      if (r == 2) t = static_cast<int32_t>(std::min_element(row, row + V) - row);
      targets[r] = t;
      d.temperature = 0.0f;
      d.num_logprobs = r == 4 ? 32 : r % 3 == 0 ? 0 : static_cast<int>(rng.integer(1, 20));
      d.target = t;
    }
    const auto got = sampler->sample(dlogits.view(), rows);
    ASSERT_EQ(got.size(), static_cast<size_t>(R));
    std::vector<double> logprobs;
    std::vector<int32_t> order;
    Sampler host;
    for (int r = 0; r < R; ++r) {
      std::span<const float> row(l + r * V, static_cast<size_t>(V));
      if (targets[r] < 0) {
        SeqWork w;
        w.sample = true;
        w.sampling = &params[r];
        w.seed = static_cast<uint64_t>(r);
        const SampledToken want = host.sample(row, w);
        EXPECT_EQ(got[r].token, want.token) << "sampled row " << r << " V=" << V;
        EXPECT_EQ(got[r].rank, 0) << "sampled row " << r;
        continue;
      }
      const TokenLogprob want = score_token(row, targets[r], rows[r].num_logprobs, logprobs, order);
      EXPECT_EQ(got[r].token, targets[r]) << "row " << r << " V=" << V;
      EXPECT_NEAR(got[r].logprob, want.logprob, 1e-5) << "row " << r << " V=" << V;
      EXPECT_EQ(got[r].rank, want.rank) << "row " << r << " V=" << V;
      ASSERT_EQ(got[r].top_logprobs.size(), want.top_logprobs.size()) << "row " << r;
      for (size_t i = 0; i < want.top_logprobs.size(); ++i) {
        EXPECT_EQ(got[r].top_logprobs[i].first, want.top_logprobs[i].first) << "row " << r << " entry " << i;
        EXPECT_NEAR(got[r].top_logprobs[i].second, want.top_logprobs[i].second, 1e-5);
      }
    }
    EXPECT_EQ(got[0].rank, 1);
    EXPECT_EQ(got[1].rank, 1) << "tokens tied with the target do not outrank it";
    EXPECT_EQ(got[2].rank, V);
  }
}

}  // namespace
}  // namespace hyllm::test
