// The memory profile step and dummy weights made by fill_random, on the CPU
// backend: the profile leaves the runner as it was, and generated weights
// (bf16, and e4m3 codes with their scales for the FP8 formats) are the bytes
// the host dummy source reads.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "engine/runner/model_runner.h"
#include "model/loader/dummy_weights.h"
#include "model/model.h"
#include "model/qwen3_5.h"
#include "runner_test_util.h"

namespace hyllm {
namespace {

using test::small_model_options;
using test::small_runner_options;
using test::tiny_model;

std::unique_ptr<ModelRunner> make_runner(Backend& be, LoadFormat format = LoadFormat::kAuto) {
  ModelOptions mo = small_model_options();
  mo.load_format = format;
  return std::make_unique<ModelRunner>(load_model(tiny_model(), be, mo), small_runner_options());
}

std::vector<int32_t> greedy(ModelRunner& r, int steps) {
  SamplingParams greedy_params;
  greedy_params.temperature = 0.0f;
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7};
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
  int32_t pos = 0;
  for (int s = 0; s < steps; ++s) {
    StepInput in;
    SeqWork w;
    w.seq_id = 1;
    w.token_ids = std::span<const int32_t>(tokens).subspan(static_cast<size_t>(pos));
    w.start_pos = pos;
    w.block_table = table;
    w.state_slot = 0;
    w.sample = true;
    w.sampling = &greedy_params;
    in.seqs.push_back(w);
    StepOutput out = r.execute(in);
    pos = static_cast<int32_t>(tokens.size());
    tokens.push_back(out.sampled.at(0).token);
  }
  return tokens;
}

TEST(ProfileRun, LeavesTheRunnerAsItWas) {
  auto be = make_cpu_backend();
  auto plain = make_runner(*be);
  plain->allocate_cache({16, 8, 2});
  const std::vector<int32_t> want = greedy(*plain, 6);

  auto profiled = make_runner(*be);
  profiled->profile_run();  // 256 tokens in 8 sequences, on a temporary cache
  profiled->allocate_cache({16, 8, 2});
  EXPECT_EQ(greedy(*profiled, 6), want);
}

// A cache budget past the host's available memory is refused when it is
// asked for, not found out by the kernel killing the process as it is zeroed.
TEST(CacheBudget, MoreThanTheHostHasIsRefused) {
  auto be = make_cpu_backend();
  RunnerOptions ro = small_runner_options();
  ro.cache_memory_bytes = be->memory_info().total_bytes * 2;
  ModelRunner runner(load_model(tiny_model(), *be, small_model_options()), ro);
  try {
    runner.cache_memory_budget();
    ADD_FAILURE() << "a budget of twice the host's memory was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("--kv-cache-memory"), std::string::npos) << e.what();
  }
  ro.cache_memory_bytes = size_t{64} << 20;
  ModelRunner small(load_model(tiny_model(), *be, small_model_options()), ro);
  EXPECT_EQ(small.cache_memory_budget(), size_t{64} << 20);
}

// The embedded model's config as stored, or declaring one of the FP8 formats
// (its dummy weights then are e4m3 codes with scales).
ModelConfig tiny_config(QuantMethod method) {
  ModelConfig cfg = load_model_config(tiny_model());
  cfg.quant.method = method;
  cfg.quant.excluded_modules = {"lm_head", "embed_tokens", "linear_attn.in_proj_a", "linear_attn.in_proj_b"};
  if (method == QuantMethod::kModelOptFp8) cfg.quant.kv_cache_quant_algo = "FP8";
  return cfg;
}

class FillRandom : public ::testing::TestWithParam<QuantMethod> {};

TEST_P(FillRandom, GeneratedDummyTensorsEqualTheHostBytes) {
  auto be = make_cpu_backend();
  const ModelConfig cfg = tiny_config(GetParam());
  DummyWeights w(cfg, 7);
  int generated = 0;
  for (const TensorInfo& t : w.tensors()) {
    const auto g = w.generated(t.name);
    if (!g) continue;
    ++generated;
    std::vector<std::byte> host(t.nbytes), dev(t.nbytes);
    w.read(t.name, host.data());
    DeviceBuffer buf(*be, t.dtype, t.shape);
    fill_random(*be, {buf.view(), g->stream, g->normal ? RandomDistribution::kNormal : RandomDistribution::kUniform,
                      g->offset, g->scale});
    be->copy_to_host(dev.data(), buf.data(), t.nbytes);
    ASSERT_EQ(std::memcmp(host.data(), dev.data(), t.nbytes), 0) << t.name;
  }
  EXPECT_GT(generated, 10);
  // Only A_log is made on the host: every FP8 weight and scale is generated.
  for (const TensorInfo& t : w.tensors()) {
    if (!t.name.ends_with("A_log")) {
      EXPECT_TRUE(w.generated(t.name).has_value()) << t.name;
    }
  }
}

// The dummy source without its recipes: every tensor goes through the host.
class HostOnly final : public WeightSource {
 public:
  explicit HostOnly(const WeightSource& inner) : inner_(inner) { index_tensors(); }
  const std::vector<TensorInfo>& tensors() const override { return inner_.tensors(); }
  void read(const std::string& name, void* dst) const override { inner_.read(name, dst); }
  std::string describe() const override { return "host-only " + inner_.describe(); }

 private:
  const WeightSource& inner_;
};

// A dummy model made on the device and the same model made through the host
// have bit-identical weights: the same bytes, tokens and logits.
void expect_same_through_either_path(const ModelConfig& cfg, uint64_t seed) {
  auto be = make_cpu_backend();
  DummyWeights w(cfg, seed);
  HostOnly host(w);
  const ModelOptions mo = small_model_options();
  const RunnerOptions ro = small_runner_options();
  ModelRunner device_made(make_qwen3_5(cfg, w, *be, mo), ro);
  ModelRunner host_made(make_qwen3_5(cfg, host, *be, mo), ro);
  device_made.allocate_cache({16, 8, 2});
  host_made.allocate_cache({16, 8, 2});
  EXPECT_EQ(device_made.model().weight_bytes(), host_made.model().weight_bytes());
  EXPECT_EQ(greedy(device_made, 5), greedy(host_made, 5));
  ASSERT_FALSE(host_made.last_logits().empty());
  EXPECT_EQ(device_made.last_logits(), host_made.last_logits());  // bit-identical weights
  for (float v : device_made.last_logits()) ASSERT_TRUE(std::isfinite(v));
}

TEST_P(FillRandom, DummyModelIsTheSameThroughEitherPath) { expect_same_through_either_path(tiny_config(GetParam()), 3); }

// MoE experts in FP8 with whole 128-row blocks (as every real checkpoint):
// the dummy codes (and block scales; ModelOpt's are scalars read on the host)
// are filled on the device in place, the same bytes the host path pads and
// uploads.
TEST_P(FillRandom, DummyMoeExpertsAreTheSameThroughEitherPath) {
  if (GetParam() == QuantMethod::kNone) GTEST_SKIP() << "BF16 experts have one path";
  ModelConfig cfg = load_model_config(std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/tiny_models/moe_flat_fused");
  cfg.moe_intermediate_size = 128;
  cfg.quant.method = GetParam();
  cfg.quant.excluded_modules = {"lm_head", "embed_tokens", "linear_attn.in_proj_a", "linear_attn.in_proj_b",
                                "mlp.gate", "shared_expert_gate"};
  expect_same_through_either_path(cfg, 5);
}

INSTANTIATE_TEST_SUITE_P(Formats, FillRandom,
                         ::testing::Values(QuantMethod::kNone, QuantMethod::kFp8Block, QuantMethod::kModelOptFp8),
                         [](const ::testing::TestParamInfo<QuantMethod>& i) {
                           return std::string(quant_method_name(i.param));
                         });

}  // namespace
}  // namespace hyllm
