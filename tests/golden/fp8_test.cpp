// FP8: the tiny models quantised with `hyllm quantize` to both FP8 formats
// run against their dequantised BF16 reference (the same weights, bf16(Wq*s)).
// What differs is what FP8 inference adds on top of the weights: activation
// quantisation (dynamic per token per 128 columns for block FP8, one static
// scale per tensor for ModelOpt) and, for ModelOpt, the re-quantisation of
// merged projections to one scale.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <tuple>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "model/quantize/quantize.h"
#include "text/tokenizer.h"

namespace hyllm::testing {
namespace {

struct Bounds {
  double rel_rms;      // RMS(logit error) / RMS(reference logits), over all teacher-forced steps
  float token_margin;  // greedy tokens compared while the reference margin is at least this
};

// e4m3 keeps 3 mantissa bits (relative rounding up to 1/16, 16 times bf16's)
// on weights and activations. The trained default model passes that through
// with a few percent error in the logits. The random tiny models amplify
// rounding about tenfold (their bf16 error is already ~3% of the logits'
// RMS), so for them the bound only separates FP8 noise from a broken format
// (a wrong scale or layout gives errors of 100% and more). ModelOpt's one
// static activation scale per tensor, calibrated on a short text, clamps
// what lies outside the calibrated range, hence its looser bound.
Bounds bounds_for(const std::string& model, Fp8Target t) {
  if (model == "hyllm-tiny") return t == Fp8Target::kFp8Block ? Bounds{0.05, 0.5f} : Bounds{0.12, 0.8f};
  return {0.45, 4.0f};
}

std::filesystem::path model_dir(const std::string& name) {
  if (name == "hyllm-tiny") return std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny";
  return tiny_model_dir(name);
}

std::vector<std::vector<int32_t>> prompts_for(const std::string& name) {
  std::vector<std::vector<int32_t>> out;
  if (name == "hyllm-tiny") {
    Tokenizer tok = Tokenizer::from_model_dir(model_dir(name));
    for (const char* text :
         {"The for statement in Python differs a bit from what you may be used to in C or Pascal. Rather than "
          "always iterating over an arithmetic progression of numbers, or giving the user the ability to define "
          "both the iteration step and halting condition, Python's for statement iterates over the items of any "
          "sequence",
          "A list comprehension consists of brackets containing an expression followed by a for clause, then zero "
          "or more for or if clauses. The result will be a new list resulting from evaluating the expression",
          "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in "
          "range(n):\n"})
      out.push_back(tok.encode(text, true));
    return out;
  }
  std::ifstream f(tiny_model_dir(name) / "golden.json");
  auto j = nlohmann::json::parse(f);
  for (const auto& c : j["cases"]) out.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  return std::vector<std::vector<int32_t>>(out.begin() + 1, out.end());
}

// Not one of the prompts below.
constexpr const char* kCalibrationText =
    "Python is an easy to learn, powerful programming language. It has efficient high-level data structures and a "
    "simple but effective approach to object-oriented programming. Python's elegant syntax and dynamic typing, "
    "together with its interpreted nature, make it an ideal language for scripting and rapid application "
    "development in many areas on most platforms.\n\n>>> import math\n>>> math.sqrt(16)\n4.0\n>>> words = "
    "['cat', 'window', 'defenestrate']\n>>> for w in words:\n...     print(w, len(w))\n";

using Param = std::tuple<std::string, Fp8Target>;

class Fp8Test : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    auto [name, target] = GetParam();
    dir_ = std::filesystem::temp_directory_path() /
           ("hyllm_fp8_" + name + (target == Fp8Target::kFp8Block ? "_block_" : "_modelopt_") + std::to_string(::getpid()));
    QuantizeOptions o;
    o.target = target;
    o.dequantized_dir = dir_ / "ref";
    if (name == "hyllm-tiny") {
      // ModelOpt's static input scales come from calibration text, as in
      // practice (random token ids under-represent real activations).
      o.calibration_tokens = Tokenizer::from_model_dir(model_dir(name)).encode(kCalibrationText, true);
    }
    auto cpu = make_cpu_backend();
    report_ = quantize_checkpoint(model_dir(name), dir_ / "fp8", o, *cpu);
    prompts_ = prompts_for(name);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  QuantizeReport report_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_P(Fp8Test, AgreesWithDequantizedReference) {
  auto [name, target] = GetParam();
  const Bounds b = bounds_for(name, target);
  EXPECT_GT(report_.quantized_linears, 0);
  Harness fp8(dir_ / "fp8"), ref(dir_ / "ref");
  const int steps = 16;
  for (size_t ci = 0; ci < prompts_.size(); ++ci) {
    // Teacher-forced on the reference's own greedy tokens: every step compared.
    auto r = ref.run({SeqRun{prompts_[ci], steps, {}, {}}})[0];
    auto q = fp8.run({SeqRun{prompts_[ci], steps, {}, r.tokens}})[0];
    double err2 = 0, ref2 = 0;
    float max_err = 0;
    for (int s = 0; s < steps; ++s)
      for (size_t i = 0; i < r.logits[s].size(); ++i) {
        double d = q.logits[s][i] - r.logits[s][i];
        err2 += d * d;
        ref2 += static_cast<double>(r.logits[s][i]) * r.logits[s][i];
        max_err = std::max(max_err, static_cast<float>(std::fabs(d)));
      }
    const double rel = std::sqrt(err2 / ref2);
    EXPECT_LE(rel, b.rel_rms) << name << " case " << ci;
    // Greedy tokens of the FP8 model itself, until the reference is near a tie.
    auto free = fp8.run({SeqRun{prompts_[ci], steps, {}, {}}})[0];
    int compared = 0;
    for (int s = 0; s < steps && top_margin(r.logits[s]) >= b.token_margin; ++s, ++compared)
      ASSERT_EQ(free.tokens[s], r.tokens[s]) << name << " case " << ci << " step " << s;
    std::printf("[%s %s case %zu] prompt %zu: logits rel RMS err %.4f (bound %.2f), max|d| %.3f; %d/%d greedy tokens "
                "compared (margin >= %.2f)\n",
                name.c_str(), target == Fp8Target::kFp8Block ? "block" : "modelopt", ci, prompts_[ci].size(), rel,
                b.rel_rms, max_err, compared, steps, b.token_margin);
  }
}

// Each activation an FP8 projection reads is quantised once, by the op that
// produces it (the two norms, the gated norm or quantize_fp8 after attention,
// SwiGLU, the moe op for its experts' SwiGLU outputs), and no FP8 GEMM
// quantises its own input. MoE models in block FP8 only: per-tensor FP8
// experts each have their own static input scale.
class Fp8QuantiseOnceTest : public Fp8Test {};

TEST_P(Fp8QuantiseOnceTest, EachFp8InputIsQuantisedOnce) {
  Harness fp8(dir_ / "fp8");
  const int64_t layers = load_model_config(dir_ / "fp8").num_hidden_layers;
  OpCounters& c = fp8.backend().counters();
  c = {};
  const int steps = 3;  // one prefill and two decode forwards
  fp8.run({SeqRun{prompts_[0], steps, {}, {}}});
  EXPECT_EQ(c.linear_self_quantizations, 0);
  // Per layer: the mixer's input, its output projection's, the MLP's, the down projection's.
  EXPECT_EQ(c.fp8_quantizations, steps * layers * 4);
}

INSTANTIATE_TEST_SUITE_P(
    DenseModels, Fp8QuantiseOnceTest,
    ::testing::Combine(::testing::Values("hyllm-tiny", "dense_flat_aligned"),
                       ::testing::Values(Fp8Target::kFp8Block, Fp8Target::kModelOptFp8)),
    [](const ::testing::TestParamInfo<Param>& i) {
      std::string n = std::get<0>(i.param);
      std::replace(n.begin(), n.end(), '-', '_');
      return n + (std::get<1>(i.param) == Fp8Target::kFp8Block ? "_block" : "_modelopt");
    });

INSTANTIATE_TEST_SUITE_P(
    MoeModels, Fp8QuantiseOnceTest,
    ::testing::Combine(::testing::Values("moe_nested_per_expert", "moe_flat_fused"),
                       ::testing::Values(Fp8Target::kFp8Block)),
    [](const ::testing::TestParamInfo<Param>& i) { return std::get<0>(i.param) + "_block"; });

INSTANTIATE_TEST_SUITE_P(
    TinyModels, Fp8Test,
    ::testing::Combine(::testing::Values("hyllm-tiny", "dense_flat_aligned", "moe_nested_per_expert", "moe_flat_fused"),
                       ::testing::Values(Fp8Target::kFp8Block, Fp8Target::kModelOptFp8)),
    [](const ::testing::TestParamInfo<Param>& i) {
      std::string n = std::get<0>(i.param);
      std::replace(n.begin(), n.end(), '-', '_');
      return n + (std::get<1>(i.param) == Fp8Target::kFp8Block ? "_block" : "_modelopt");
    });

}  // namespace
}  // namespace hyllm::testing
