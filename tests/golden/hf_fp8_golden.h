#pragma once
// The HF FP8 golden (tests/data/tiny_models/dense_flat_aligned/golden_hf_fp8.json,
// made by tools/goldens/make_fp8_goldens.py on the GPU machine): the tiny
// model quantised to Qwen block FP8 by hyllm's quantiser, and what HF
// transformers' own FP8 path computes on it. Shared by the CPU and the CUDA
// golden tests. The checks are the golden's compare_rule:
//  - the checkpoint the test quantises has the bytes the golden was made from
//    (FNV-1a 64 of model.safetensors);
//  - teacher-forced on the golden tokens: the argmax equals them wherever the
//    golden margin clears margin_threshold, and the top-5 and first-step
//    logits are within the case's tolerance: the golden's logit_tolerance,
//    widened to sqrt(2) x HF FP8's own largest logit error against the exact
//    (dequantised, fp32) model. Both quantise activations by the same rule,
//    but from inputs that differ by bf16 rounding (HF's torch bf16 layers vs
//    hyllm's fused kernels); e4m3 rounds those inputs to different codes
//    here and there, and this random model amplifies each such flip, so the
//    two FP8 runs carry independent FP8 noise and differ by up to sqrt(2)
//    times it (measured on the H200 and the CPU: 1.0-2.6 against HF's
//    2.4-2.7). A broken format (wrong scales, a dropped block) is off by
//    far more;
//  - greedy: tokens equal the golden's up to comparable_steps, and where they
//    first differ the flip is explained by the logit errors (the token chosen
//    is in the golden top 5 and the golden gap between the two tokens is
//    within the sum of the errors on them).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "model/quantize/quantize.h"

namespace hyllm::testing {

struct HfFp8Case {
  std::vector<int32_t> prompt, output;
  std::vector<float> margins, first_logits;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  int comparable = 0;
  float tolerance = 0;
};

struct HfFp8Golden {
  float threshold = 0;
  std::string checkpoint_hash;
  std::vector<HfFp8Case> cases;
};

inline std::filesystem::path hf_fp8_golden_file() { return tiny_model_dir("dense_flat_aligned") / "golden_hf_fp8.json"; }

inline HfFp8Golden load_hf_fp8_golden() {
  std::ifstream f(hf_fp8_golden_file());
  const auto j = nlohmann::json::parse(f);
  HfFp8Golden g;
  g.threshold = j.at("margin_threshold").get<float>();
  g.checkpoint_hash = j.at("reference").at("fp8_checkpoint_fnv1a64").get<std::string>();
  for (const auto& c : j.at("cases")) {
    HfFp8Case k;
    k.prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    k.output = c.at("output_ids").get<std::vector<int32_t>>();
    k.margins = c.at("margins").get<std::vector<float>>();
    k.first_logits = c.at("first_step_logits").get<std::vector<float>>();
    for (const auto& step : c.at("top_logits")) {
      std::vector<std::pair<int32_t, float>> t;
      for (const auto& e : step) t.emplace_back(e[0].get<int32_t>(), e[1].get<float>());
      k.top.push_back(t);
    }
    k.comparable = c.at("comparable_steps").get<int>();
    k.tolerance = std::max(c.at("logit_tolerance").get<float>(),
                           std::sqrt(2.0f) * c.at("fp8_logit_max_abs_diff").get<float>());
    g.cases.push_back(std::move(k));
  }
  return g;
}

inline std::string fnv1a64_hex(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::istreambuf_iterator<char> it(f), end; it != end; ++it) {
    h ^= static_cast<unsigned char>(*it);
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

// dense_flat_aligned quantised as `hyllm quantize --format fp8-block` does,
// into `dir`; fails the test when the bytes are not the golden's.
inline void quantize_for_hf_fp8_golden(const std::filesystem::path& dir, const HfFp8Golden& g) {
  QuantizeOptions o;
  o.target = Fp8Target::kFp8Block;
  auto cpu = make_cpu_backend();
  quantize_checkpoint(tiny_model_dir("dense_flat_aligned"), dir, o, *cpu);
  ASSERT_EQ(fnv1a64_hex(dir / "model.safetensors"), g.checkpoint_hash)
      << "the quantiser's output is not the checkpoint the golden was made from: re-run "
         "tools/goldens/make_fp8_goldens.py (tools/goldens/README.md)";
}

inline int argmax_of(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

inline void check_hf_fp8_teacher_forced(Harness& h, const HfFp8Golden& g, const std::string& what) {
  for (size_t ci = 0; ci < g.cases.size(); ++ci) {
    const HfFp8Case& c = g.cases[ci];
    SeqResult r = h.run({SeqRun{c.prompt, static_cast<int>(c.output.size()), {}, c.output}})[0];
    ASSERT_EQ(r.logits.size(), c.output.size());
    float first_err = 0, max_err = 0;
    int checked = 0;
    for (size_t i = 0; i < c.first_logits.size(); ++i)
      first_err = std::max(first_err, std::fabs(r.logits[0][i] - c.first_logits[i]));
    for (size_t s = 0; s < c.output.size(); ++s) {
      for (auto [id, v] : c.top[s]) max_err = std::max(max_err, std::fabs(r.logits[s][id] - v));
      if (c.margins[s] < g.threshold) continue;
      ++checked;
      EXPECT_EQ(argmax_of(r.logits[s]), c.output[s]) << what << " case " << ci << " step " << s;
    }
    EXPECT_LE(first_err, c.tolerance) << what << " case " << ci << ": first-step logits";
    EXPECT_LE(max_err, c.tolerance) << what << " case " << ci << ": top-5 logits";
    std::printf("[%s HF FP8 case %zu] prompt %zu: first-step max|dlogit| %.4f, top-5 max|dlogit| %.4f (tol %.3f), "
                "argmax checked at %d/%zu steps (margin >= %.3f)\n",
                what.c_str(), ci, c.prompt.size(), first_err, max_err, c.tolerance, checked, c.output.size(),
                g.threshold);
  }
}

inline void check_hf_fp8_greedy(Harness& h, const HfFp8Golden& g, const std::string& what) {
  for (size_t ci = 0; ci < g.cases.size(); ++ci) {
    const HfFp8Case& c = g.cases[ci];
    SeqResult r = h.run({SeqRun{c.prompt, static_cast<int>(c.output.size()), {}, {}}})[0];
    int same = 0;
    while (same < static_cast<int>(c.output.size()) && r.tokens[same] == c.output[same]) ++same;
    EXPECT_GE(same, c.comparable) << what << " case " << ci << ": tokens differ at step " << same;
    if (same < static_cast<int>(c.output.size())) {
      // The inputs so far were the golden's: the flip must come from logit error.
      auto golden_value = [&](int32_t id) -> std::optional<float> {
        for (auto [i, v] : c.top[same])
          if (i == id) return v;
        return std::nullopt;
      };
      const int32_t ours = r.tokens[same], theirs = c.output[same];
      const auto g_ours = golden_value(ours), g_theirs = golden_value(theirs);
      EXPECT_TRUE(g_ours.has_value()) << what << " case " << ci << " step " << same << " chose " << ours
                                      << ", not in the golden top 5";
      if (g_ours && g_theirs) {
        const float err = std::fabs(r.logits[same][ours] - *g_ours) + std::fabs(r.logits[same][theirs] - *g_theirs);
        EXPECT_LE(*g_theirs - *g_ours, err + 1e-4f) << what << " case " << ci << " step " << same;
      }
    }
    std::printf("[%s HF FP8 case %zu] prompt %zu: %d/%zu greedy tokens equal (required %d)\n", what.c_str(), ci,
                c.prompt.size(), same, c.output.size(), c.comparable);
  }
}

}  // namespace hyllm::testing
