// Harness: moe_route and moe_experts (fused and per-expert layouts, shared
// expert with and without its gate, decode and prefill token counts).
#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

TEST_F(CudaOpTest, MoeRoute) {
  Rng rng(seed_);
  for (auto [E, k] : std::vector<std::pair<int64_t, int64_t>>{{8, 2}, {6, 3}, {256, 8}, {512, 10}}) {
    const int64_t T = 1 + rng.integer(0, 70);
    for (DType dt : {DType::kBF16, DType::kF32}) {
      HostTensor logits(dt, {T, E}), ids(DType::kI32, {T, k}), w = f32_tensor({T, k});
      logits.fill_normal(rng, 2.0);
      moe_route(*cpu_, {logits.view(), ids.view(), w.view(), k});
      Mirror dl(*gpu_, logits), dids(*gpu_, ids), dw(*gpu_, w);
      dids.poison();
      dw.poison();
      moe_route(*gpu_, {dl.view(), dids.view(), dw.view(), k});
      expect_equal("moe_route ids", dids, ids);
      expect_close("moe_route weights", dw, w, 1e-5);
    }
  }
}

struct MoeCase {
  const char* name;
  int64_t E, k, H, I, T;
  bool fused, shared, shared_gate;
};

class MoeExpertsTest : public CudaOpTest, public ::testing::WithParamInterface<MoeCase> {};

TEST_P(MoeExpertsTest, MatchesCpu) {
  const MoeCase& c = GetParam();
  Rng rng(seed_);
  HostTensor x = bf16_tensor({c.T, c.H}), logits = f32_tensor({c.T, c.E}), ids(DType::kI32, {c.T, c.k}),
             tw = f32_tensor({c.T, c.k});
  x.fill_normal(rng);
  logits.fill_normal(rng, 2.0);
  moe_route(*cpu_, {logits.view(), ids.view(), tw.view(), c.k});
  HostTensor gate_up = bf16_tensor({c.E, 2 * c.I, c.H}), down = bf16_tensor({c.E, c.H, c.I});
  gate_up.fill_normal(rng, 0.1);
  down.fill_normal(rng, 0.1);
  HostTensor shared = bf16_tensor({c.T, c.H}), sg = bf16_tensor({c.T, 1}), out = bf16_tensor({c.T, c.H});
  shared.fill_normal(rng);
  sg.fill_normal(rng, 2.0);
  Mirror dx(*gpu_, x), dids(*gpu_, ids), dtw(*gpu_, tw), dgu(*gpu_, gate_up), ddown(*gpu_, down),
      dshared(*gpu_, shared), dsg(*gpu_, sg), dout(*gpu_, out);
  dout.poison();
  // Per-expert views slice the fused tensors (gate rows [0, I), up rows [I, 2I)).
  auto experts = [&](const TensorView& gu, const TensorView& dn) {
    MoeExpertWeights w;
    if (c.fused) {
      w.gate_up = LinearWeight::bf16(gu);
      w.down = LinearWeight::bf16(dn);
      return w;
    }
    for (int64_t e = 0; e < c.E; ++e) {
      auto* base = static_cast<uint16_t*>(gu.data()) + e * 2 * c.I * c.H;
      w.expert_gate.push_back(LinearWeight::bf16(TensorView(base, DType::kBF16, {c.I, c.H}, gu.device())));
      w.expert_up.push_back(LinearWeight::bf16(TensorView(base + c.I * c.H, DType::kBF16, {c.I, c.H}, gu.device())));
      w.expert_down.push_back(LinearWeight::bf16(
          TensorView(static_cast<uint16_t*>(dn.data()) + e * c.H * c.I, DType::kBF16, {c.H, c.I}, dn.device())));
    }
    return w;
  };
  MoeExpertsArgs ca{x.view(), ids.view(), tw.view(), experts(gate_up.view(), down.view()), {}, {}, out.view()};
  MoeExpertsArgs ga{dx.view(), dids.view(), dtw.view(), experts(dgu.view(), ddown.view()), {}, {}, dout.view()};
  if (c.shared) {
    ca.shared = shared.view();
    ga.shared = dshared.view();
    if (c.shared_gate) {
      ca.shared_gate = sg.view();
      ga.shared_gate = dsg.view();
    }
  }
  moe_experts(*cpu_, ca);
  run_gpu_poisoned([&] { moe_experts(*gpu_, ga); }, {&dout});
  expect_close(std::string("moe_experts ") + (c.fused ? "fused" : "per-expert"), dout, out, kTolMoe);
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeExpertsTest,
                         ::testing::Values(MoeCase{"tiny_fused", 8, 2, 64, 32, 11, true, false, false},
                                           MoeCase{"tiny_per_expert", 6, 3, 64, 24, 9, false, true, true},
                                           MoeCase{"per_expert_ungated", 4, 2, 64, 32, 5, false, true, false},
                                           MoeCase{"e256_top8_decode", 256, 8, 256, 128, 4, true, true, true},
                                           MoeCase{"e256_top8_prefill", 256, 8, 256, 128, 300, true, true, true}),
                         [](const ::testing::TestParamInfo<MoeCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace hyllm::test
