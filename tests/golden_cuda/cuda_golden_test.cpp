// Model parity of the CUDA backend (bf16 activations, as HF's bf16 path):
//  - tiny models vs their HF goldens: teacher-forced argmax at every step whose
//    golden margin clears the golden's bf16_margin_threshold, and greedy tokens
//    equal up to bf16_comparable_steps (the rules of tests/golden);
//  - the default model vs its fp32 goldens: teacher-forced argmax where the
//    margin is large (the goldens' rule for bf16 implementations);
//  - CUDA greedy tokens equal the CPU reference's up to the first step whose
//    margin is below twice their logit difference;
//  - many sequences in one batch give the tokens each gives alone.
// The CUDA runs sample on the GPU (the runner's device sampler), so the greedy
// tokens checked are the ones the engine would emit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "harness.h"

namespace hyllm::testing {
namespace {

// Teacher-forced steps of the default model compared when the fp32 margin is
// at least this: far above bf16's logit error on an 11M-parameter model.
constexpr float kDefaultModelMargin = 0.25f;

struct Case {
  std::vector<int32_t> prompt, output;
  std::vector<float> margins;
  int bf16_comparable = -1;
};

struct Golden {
  float bf16_threshold = 0;
  std::vector<Case> cases;
};

Golden load(const std::filesystem::path& file, bool tiny) {
  std::ifstream f(file);
  auto j = nlohmann::json::parse(f);
  Golden g;
  g.bf16_threshold = tiny ? j["bf16_margin_threshold"].get<float>() : kDefaultModelMargin;
  for (const auto& c : j["cases"]) {
    Case k;
    k.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    k.output = c["output_ids"].get<std::vector<int32_t>>();
    k.margins = c["margins"].get<std::vector<float>>();
    if (tiny) k.bf16_comparable = c["bf16_comparable_steps"];
    g.cases.push_back(k);
  }
  return g;
}

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

// Tokens equal while the reference's margin clears twice the logit difference.
int agreeing_steps(const SeqResult& a, const SeqResult& ref) {
  int s = 0;
  for (; s < static_cast<int>(ref.tokens.size()); ++s) {
    float diff = 0;
    for (size_t i = 0; i < ref.logits[s].size(); ++i) diff = std::max(diff, std::fabs(a.logits[s][i] - ref.logits[s][i]));
    if (top_margin(ref.logits[s]) < 2 * diff) break;
    if (a.tokens[s] != ref.tokens[s]) return -(s + 1);
  }
  return s;
}

struct ModelParam {
  std::string name;
  std::filesystem::path dir, golden;
  bool tiny;
};

class CudaParity : public ::testing::TestWithParam<ModelParam> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    golden_ = load(GetParam().golden, GetParam().tiny);
    // The real runner path: tokens from the GPU sampler (logits also kept for
    // the margin rules), decode steps replayed from CUDA graphs.
    gpu_ = std::make_unique<Harness>(
        GetParam().dir, make_cuda_backend(0), 1024,
        [](Backend& be) { return std::shared_ptr<DeviceSampler>(make_cuda_sampler(be)); },
        [](Backend& be) -> GraphRecorder {
          return [&be](const std::function<void()>& body) { return cuda_capture_graph(be, body); };
        });
  }
  Golden golden_;
  std::unique_ptr<Harness> gpu_;
};

TEST_P(CudaParity, TeacherForcedArgmaxMatchesGolden) {
  int checked = 0, total = 0;
  for (size_t ci = 0; ci < golden_.cases.size(); ++ci) {
    const Case& c = golden_.cases[ci];
    SeqResult r = gpu_->run({SeqRun{c.prompt, static_cast<int>(c.output.size()), {}, c.output}})[0];
    for (size_t s = 0; s < c.output.size(); ++s) {
      ++total;
      if (c.margins[s] < golden_.bf16_threshold) continue;
      ++checked;
      EXPECT_EQ(argmax(r.logits[s]), c.output[s]) << GetParam().name << " case " << ci << " step " << s;
    }
  }
  std::printf("[%s] teacher-forced argmax equal at %d/%d steps with margin >= %.3f\n", GetParam().name.c_str(),
              checked, total, golden_.bf16_threshold);
}

TEST_P(CudaParity, GreedyTokensMatchGoldenAndCpu) {
  Harness cpu(GetParam().dir, make_cpu_backend());
  for (size_t ci = 0; ci < golden_.cases.size(); ++ci) {
    const Case& c = golden_.cases[ci];
    const SeqRun run{c.prompt, static_cast<int>(c.output.size()), {}, {}};
    SeqResult g = gpu_->run({run})[0];
    SeqResult h = cpu.run({run})[0];
    int same = 0;
    while (same < static_cast<int>(c.output.size()) && g.tokens[same] == c.output[same]) ++same;
    if (c.bf16_comparable >= 0) {
      EXPECT_GE(same, c.bf16_comparable) << GetParam().name << " case " << ci;
    }
    const int with_cpu = agreeing_steps(g, h);
    EXPECT_GE(with_cpu, 0) << GetParam().name << " case " << ci << ": cuda and cpu tokens differ at step "
                           << -with_cpu - 1 << " where the margin is large";
    std::printf("[%s case %zu] greedy: %d/%zu tokens equal the golden%s; equal to the cpu backend for %d steps "
                "(until a low-margin step)\n",
                GetParam().name.c_str(), ci, same, c.output.size(),
                c.bf16_comparable >= 0 ? (" (required " + std::to_string(c.bf16_comparable) + ")").c_str() : "",
                with_cpu);
  }
  EXPECT_GT(gpu_->runner().graph_replays(), 0) << "no decode step was replayed from a CUDA graph";
}

TEST_P(CudaParity, ConcurrentSequencesEqualEachAlone) {
  std::vector<SeqRun> runs;
  for (const auto& c : golden_.cases) runs.push_back(SeqRun{c.prompt, 16, {}, {}});
  while (runs.size() < static_cast<size_t>(Harness::kMaxSeqs)) runs.push_back(runs[runs.size() % golden_.cases.size()]);
  runs.resize(Harness::kMaxSeqs);
  auto batched = gpu_->run(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    auto alone = gpu_->run({runs[i]})[0];
    const int agree = agreeing_steps(batched[i], alone);
    EXPECT_GE(agree, 0) << GetParam().name << " sequence " << i << ": batched differs from alone at step "
                        << -agree - 1;
  }
}

std::vector<ModelParam> models() {
  const std::filesystem::path root(HYLLM_SOURCE_DIR);
  std::vector<ModelParam> v;
  for (const char* n : {"dense_flat_aligned", "dense_nested_tied", "dense_flat_ratio3", "moe_flat_fused",
                        "moe_nested_per_expert", "moe_flat_per_expert_tied"}) {
    v.push_back({n, root / "tests/data/tiny_models" / n, root / "tests/data/tiny_models" / n / "golden.json", true});
  }
  v.push_back({"hyllm_tiny", root / "models/hyllm-tiny", root / "tests/data/default_model/goldens.json", false});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Models, CudaParity, ::testing::ValuesIn(models()),
                         [](const ::testing::TestParamInfo<ModelParam>& i) { return i.param.name; });

}  // namespace
}  // namespace hyllm::testing
