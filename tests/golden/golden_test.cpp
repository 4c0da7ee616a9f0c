// The tiny Qwen3.5 models against HF transformers goldens
// (tests/data/tiny_models/*/golden.json, made by tools/goldens/make_goldens.py),
// and the step-planning invariants: batching and chunked prefill change no token.
//
// The goldens are fp32 computations; this backend rounds activations to bf16
// between ops as HF's bf16 path does, so the bounds come from the golden's own
// measurement of HF bf16 against HF fp32 (bf16_logit_max_abs_diff,
// bf16_margin_threshold): tokens are compared where the golden margin clears
// bf16_margin_threshold, logits within twice HF's own bf16 error.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "harness.h"

namespace hyllm::testing {
namespace {

struct GoldenCase {
  std::vector<int32_t> prompt, output;
  std::vector<float> margins;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  std::vector<float> first_logits;
  int comparable = 0, bf16_comparable = 0;
  float bf16_logit_diff = 0;
};

struct Golden {
  float threshold = 0, bf16_threshold = 0;
  std::vector<GoldenCase> cases;
};

Golden load_golden(const std::string& name) {
  std::ifstream f(tiny_model_dir(name) / "golden.json");
  auto j = nlohmann::json::parse(f);
  Golden g;
  g.threshold = j["margin_threshold"];
  g.bf16_threshold = j["bf16_margin_threshold"];
  for (const auto& c : j["cases"]) {
    GoldenCase gc;
    gc.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    gc.output = c["output_ids"].get<std::vector<int32_t>>();
    gc.margins = c["margins"].get<std::vector<float>>();
    for (const auto& step : c["top_logits"]) {
      std::vector<std::pair<int32_t, float>> t;
      for (const auto& e : step) t.emplace_back(e[0].get<int32_t>(), e[1].get<float>());
      gc.top.push_back(t);
    }
    gc.first_logits = c["first_step_logits"].get<std::vector<float>>();
    gc.comparable = c["comparable_steps"];
    gc.bf16_comparable = c["bf16_comparable_steps"];
    gc.bf16_logit_diff = c["bf16_logit_max_abs_diff"];
    g.cases.push_back(gc);
  }
  return g;
}

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

// Bounds from the error HF's own bf16 run showed against fp32 on the case
// (at least 0.1): the typical step within it, the worst step within three
// times it (MoE routing near-ties flip an expert here and not there).
float typical_tolerance(const GoldenCase& c) { return std::max(0.1f, c.bf16_logit_diff); }
float logit_tolerance(const GoldenCase& c) { return std::max(0.1f, 3.0f * c.bf16_logit_diff); }

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ = load_golden(GetParam());
    harness_ = std::make_unique<Harness>(tiny_model_dir(GetParam()));
  }
  Golden golden_;
  std::unique_ptr<Harness> harness_;
};

TEST_P(GoldenTest, TeacherForcedLogitsMatchHf) {
  for (size_t ci = 0; ci < golden_.cases.size(); ++ci) {
    const GoldenCase& c = golden_.cases[ci];
    SeqRun run{c.prompt, static_cast<int>(c.output.size()), {}, c.output};
    SeqResult r = harness_->run({run})[0];
    ASSERT_EQ(r.logits.size(), c.output.size());
    const float tol = logit_tolerance(c);
    float max_err = 0, first_err = 0;
    std::vector<float> step_err;
    int argmax_checked = 0;
    for (size_t i = 0; i < c.first_logits.size(); ++i)
      first_err = std::max(first_err, std::fabs(r.logits[0][i] - c.first_logits[i]));
    for (size_t s = 0; s < c.output.size(); ++s) {
      float e = 0;
      for (auto [id, v] : c.top[s]) e = std::max(e, std::fabs(r.logits[s][id] - v));
      step_err.push_back(e);
      max_err = std::max(max_err, e);
      if (c.margins[s] >= golden_.bf16_threshold) {
        ++argmax_checked;
        EXPECT_EQ(argmax(r.logits[s]), c.output[s]) << "case " << ci << " step " << s << " margin " << c.margins[s];
      }
    }
    EXPECT_LE(first_err, tol) << "case " << ci << " (prompt " << c.prompt.size() << " tokens): first-step logits";
    EXPECT_LE(max_err, tol) << "case " << ci << ": top-5 logits over " << c.output.size() << " steps";
    std::nth_element(step_err.begin(), step_err.begin() + step_err.size() / 2, step_err.end());
    const float median = step_err[step_err.size() / 2];
    EXPECT_LE(median, typical_tolerance(c)) << "case " << ci << ": median step error";
    std::printf("[%s case %zu] prompt %zu: first-step max|dlogit| %.4f, top-5 |dlogit| median %.4f (tol %.3f) "
                "max %.4f (tol %.3f), argmax checked at %d/%zu steps\n",
                GetParam().c_str(), ci, c.prompt.size(), first_err, median, typical_tolerance(c), max_err, tol,
                argmax_checked, c.output.size());
  }
}

// Where our greedy tokens first differ from the golden ones, the inputs so far
// were identical, so the flip must be explained by our logit error at that
// step: the token we chose is among the golden top 5 and the golden margin
// between the two tokens is within the sum of our errors on them.
void expect_legitimate_divergence(const GoldenCase& c, const SeqResult& r, int step, const std::string& what) {
  if (step >= static_cast<int>(c.output.size())) return;
  const auto& top = c.top[step];
  const int32_t ours = r.tokens[step], theirs = c.output[step];
  auto golden_value = [&](int32_t id) -> std::optional<float> {
    for (auto [i, v] : top)
      if (i == id) return v;
    return std::nullopt;
  };
  auto g_ours = golden_value(ours), g_theirs = golden_value(theirs);
  ASSERT_TRUE(g_ours.has_value()) << what << ": step " << step << " chose " << ours << ", not in the golden top 5";
  const float gap = *g_theirs - *g_ours;
  const float err = std::fabs(r.logits[step][ours] - *g_ours) + std::fabs(r.logits[step][theirs] - *g_theirs);
  EXPECT_LE(gap, err + 1e-4f) << what << ": step " << step << " flipped a golden gap of " << gap
                              << " with logit errors summing to " << err;
}

TEST_P(GoldenTest, GreedyTokensMatchHfUpToTheFirstLowMargin) {
  for (size_t ci = 0; ci < golden_.cases.size(); ++ci) {
    const GoldenCase& c = golden_.cases[ci];
    SeqResult r = harness_->run({SeqRun{c.prompt, static_cast<int>(c.output.size()), {}, {}}})[0];
    int same = 0;
    while (same < static_cast<int>(c.output.size()) && r.tokens[same] == c.output[same]) ++same;
    EXPECT_GE(same, c.bf16_comparable) << "case " << ci << ": tokens differ at step " << same;
    expect_legitimate_divergence(c, r, same, "case " + std::to_string(ci));
    std::printf("[%s case %zu] prompt %zu: %d/%zu greedy tokens equal (required %d)\n", GetParam().c_str(), ci,
                c.prompt.size(), same, c.output.size(), c.bf16_comparable);
  }
}

TEST_P(GoldenTest, DecodeAfterChunkedPrefillMatchesHf) {
  const GoldenCase& c = golden_.cases.back();
  SeqResult r = harness_->run({SeqRun{c.prompt, static_cast<int>(c.output.size()), {40, 64, 33}, {}}})[0];
  int same = 0;
  while (same < static_cast<int>(c.output.size()) && r.tokens[same] == c.output[same]) ++same;
  EXPECT_GE(same, c.bf16_comparable) << "tokens differ at step " << same;
  expect_legitimate_divergence(c, r, same, "chunked prefill");
  std::printf("[%s] prompt %zu in chunks of 40, 64, 33...: %d/%zu greedy tokens equal (required %d)\n",
              GetParam().c_str(), c.prompt.size(), same, c.output.size(), c.bf16_comparable);
}

TEST_P(GoldenTest, RejectsTokensOutsideTheVocabulary) {
  const int32_t bad[] = {1, 2, static_cast<int32_t>(harness_->runner().vocab_size())};
  std::vector<int32_t> table(Harness::blocks_per_seq());
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  SamplingParams greedy;
  greedy.temperature = 0;
  SeqWork w;
  w.token_ids = bad;
  w.block_table = table;
  w.state_slot = 0;
  w.sample = true;
  w.sampling = &greedy;
  StepInput in;
  in.seqs.push_back(w);
  try {
    harness_->runner().execute(in);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
}

// Two runs that differ only in how steps are planned round differently in
// bf16 (a GEMM's blocking depends on its row count), which moves logits about
// as much as HF's bf16 run moved them against fp32: logits must stay within
// the case's logit tolerance, and the tokens must be equal at every step until
// one whose reference margin is below twice that step's logit difference
// (where a flip is legitimate; the runs diverge after it).
void expect_same_run(const SeqResult& a, const SeqResult& ref, float logit_bound, const std::string& what) {
  ASSERT_EQ(a.tokens.size(), ref.tokens.size());
  float max_diff = 0;
  size_t compared = 0;
  for (size_t s = 0; s < ref.tokens.size(); ++s) {
    float diff = 0;
    for (size_t i = 0; i < ref.logits[s].size(); ++i) diff = std::max(diff, std::fabs(a.logits[s][i] - ref.logits[s][i]));
    max_diff = std::max(max_diff, diff);
    if (top_margin(ref.logits[s]) < 2 * diff) break;
    EXPECT_EQ(a.tokens[s], ref.tokens[s]) << what << ": step " << s;
    ++compared;
  }
  EXPECT_LE(max_diff, logit_bound) << what;
  std::printf("  %s: %zu/%zu steps compared, max|dlogit| %.2g (bound %.2g)\n", what.c_str(), compared,
              ref.tokens.size(), max_diff, logit_bound);
}

TEST_P(GoldenTest, BatchedSequencesEqualEachAlone) {
  std::vector<SeqRun> runs;
  for (const auto& c : golden_.cases) runs.push_back(SeqRun{c.prompt, 16, {}, {}});
  // Sequences at different positions in one step: the prompts prefill
  // together, then decode together.
  auto batched = harness_->run(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    auto alone = harness_->run({runs[i]})[0];
    expect_same_run(batched[i], alone, logit_tolerance(golden_.cases[i]),
                    GetParam() + " batched case " + std::to_string(i));
  }
}

TEST_P(GoldenTest, ChunkedPrefillEqualsOneStep) {
  const GoldenCase& c = golden_.cases.back();  // the longest prompt, several GDN chunks
  SeqRun whole{c.prompt, 16, {}, {}};
  auto ref = harness_->run({whole})[0];
  for (std::vector<int> chunks : {std::vector<int>{50, 64, 37}, std::vector<int>{1, 63, 64}, std::vector<int>{100}}) {
    SeqRun chunked{c.prompt, 16, chunks, {}};
    // Mixed with another sequence decoding alongside, as the engine schedules.
    SeqRun other{golden_.cases.front().prompt, 20, {}, {}};
    auto got = harness_->run({chunked, other});
    expect_same_run(got[0], ref, logit_tolerance(c),
                    GetParam() + " chunks " + std::to_string(chunks[0]) + "," +
                        std::to_string(chunks.size() > 1 ? chunks[1] : 0));
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, GoldenTest,
                         ::testing::Values("dense_flat_aligned", "dense_nested_tied", "dense_flat_ratio3",
                                           "moe_flat_fused", "moe_nested_per_expert", "moe_flat_per_expert_tied"));

}  // namespace
}  // namespace hyllm::testing
