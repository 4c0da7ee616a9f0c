// Harness: moe_route, and the whole MoE block in both CUDA regimes (the small
// decode kernels and the grouped GEMMs) against the CPU reference: real
// 35B-A3B shapes and tiny ones, with and without the shared expert and its
// gate, experts with no tokens, and hot experts that get every token. Inputs
// sit on a grid that makes the router exact in fp32, so both backends route
// identically and the routing itself is compared exactly.
#include "cuda_test_util.h"
#include "moe_test_util.h"

namespace hyllm::test {
namespace {

TEST_F(CudaOpTest, MoeRoute) {
  Rng rng(seed_);
  for (auto [E, k] : std::vector<std::pair<int64_t, int64_t>>{{8, 2}, {6, 3}, {256, 8}, {512, 10}}) {
    const int64_t T = 1 + rng.integer(0, 70);
    for (auto [dt, ties] : std::vector<std::pair<DType, bool>>{
             {DType::kBF16, false}, {DType::kF32, false}, {DType::kBF16, true}}) {
      HostTensor logits(dt, {T, E}), ids(DType::kI32, {T, k}), w = f32_tensor({T, k});
      if (ties) {
        // Logits from three values: most of a row's top k are ties, which
        // both backends must break towards the lower expert id.
        for (int64_t i = 0; i < logits.numel(); ++i) logits.set(i, static_cast<double>(rng.integer(0, 2)));
      } else {
        logits.fill_normal(rng, 2.0);
      }
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

constexpr int64_t kMoeSmallTokens = 32;  // launch/moe.h kMoeSmallMaxTokens
// launch/moe.h kMoeUpTmaMinTokens: from this many tokens the small regime's
// block-FP8 gate|up projection runs on TMA (on sm_90, as the grouped cases expect).
constexpr int64_t kMoeUpTmaTokens = 1;

struct MoeCase {
  const char* name;
  MoeShape shape;
  int64_t T;
  bool grouped;  // expected regime (on sm_90)
};

MoeShape shape(int64_t E, int64_t k, int64_t H, int64_t I, int64_t Is, bool shared = true, bool gated = true,
               bool hot = false, WeightFormat format = WeightFormat::kBf16) {
  MoeShape s;
  s.format = format;
  s.E = E;
  s.k = k;
  s.H = H;
  s.I = I;
  s.Is = Is;
  s.shared = shared;
  s.gated = gated;
  s.hot_experts = hot;
  return s;
}

constexpr WeightFormat kFp8 = WeightFormat::kFp8Block;

class MoeTest : public CudaOpTest, public ::testing::WithParamInterface<MoeCase> {};

TEST_P(MoeTest, MatchesCpu) {
  const MoeCase& c = GetParam();
  Rng rng(seed_);
  MoeTensors m(c.shape, rng);
  const int64_t T = c.T, k = c.shape.k;
  HostTensor x = m.input(rng, T), out = bf16_tensor({T, c.shape.H}), ids(DType::kI32, {T, k}),
             tw = f32_tensor({T, k});
  auto host = [](const HostTensor& h) { return h.view(); };
  MoeArgs ca = m.args(host, x.view(), out.view());
  ca.topk_ids = ids.view();
  ca.topk_weights = tw.view();
  // Block-FP8 experts read x quantised once by its producer: the CPU's codes on both sides.
  HostTensor q(DType::kF8E4M3, {T, c.shape.H}), qs = f32_tensor({(c.shape.H + 127) / 128, T});
  const bool fp8 = c.shape.format == WeightFormat::kFp8Block;
  if (fp8) {
    ca.xq = {ActQuantMode::kGroup128, q.view(), qs.view()};
    quantize_fp8(*cpu_, {x.view(), ca.xq});
  }
  moe(*cpu_, ca);

  std::vector<std::unique_ptr<Mirror>> mirrors;
  std::map<const HostTensor*, Mirror*> by_host;
  auto device = [&](const HostTensor& h) {
    auto it = by_host.find(&h);
    if (it != by_host.end()) return it->second->view();
    mirrors.push_back(std::make_unique<Mirror>(*gpu_, const_cast<HostTensor&>(h)));
    by_host[&h] = mirrors.back().get();
    return mirrors.back()->view();
  };
  Mirror dx(*gpu_, x), dout(*gpu_, out), dids(*gpu_, ids), dtw(*gpu_, tw);
  MoeArgs ga = m.args(device, dx.view(), dout.view());
  ga.topk_ids = dids.view();
  ga.topk_weights = dtw.view();
  if (fp8) ga.xq = {ActQuantMode::kGroup128, device(q), device(qs)};
  const CudaMoeCounts before = cuda_moe_counts(*gpu_);
  run_gpu_poisoned([&] { moe(*gpu_, ga); }, {&dout, &dids, &dtw});
  const CudaMoeCounts after = cuda_moe_counts(*gpu_);
  const std::string tag = std::string(c.grouped ? "grouped" : "small") + (fp8 ? " fp8" : "");
  expect_equal("moe ids (" + tag + ")", dids, ids);
  expect_close("moe weights (" + tag + ")", dtw, tw, 1e-5);
  expect_close("moe out (" + tag + ")", dout, out, c.grouped && fp8 ? kTolMoeFp8Grouped : kTolMoe);
  if (c.grouped) {
    EXPECT_EQ(after.grouped - before.grouped, 2) << "the grouped regime did not run";
  } else if (T <= kMoeSmallTokens) {
    EXPECT_EQ(after.small - before.small, 2) << "the small regime did not run";
    EXPECT_EQ(after.small_up_tma - before.small_up_tma, fp8 && T >= kMoeUpTmaTokens ? 2 : 0)
        << "the small regime's gate|up projection did not take the intended kernel";
  } else {
    EXPECT_EQ(after.chunked - before.chunked, 2) << "the chunked small regime did not run";
  }
  if (!fp8 || c.grouped || T > kMoeSmallTokens) return;
  // The same case on the register-fed gate|up kernels, which GPUs without
  // the TMA kernel take.
  cuda_allow_moe_small_tma(*gpu_, false);
  run_gpu_poisoned([&] { moe(*gpu_, ga); }, {&dout, &dids, &dtw});
  cuda_allow_moe_small_tma(*gpu_, true);
  EXPECT_EQ(cuda_moe_counts(*gpu_).small_up_tma, after.small_up_tma) << "the TMA gate|up kernel ran when not allowed";
  expect_equal("moe ids (" + tag + ", register-fed)", dids, ids);
  expect_close("moe out (" + tag + ", register-fed)", dout, out, kTolMoe);
}

// 35B-A3B: E 256, top 8, H 2048, I = shared I = 512.
INSTANTIATE_TEST_SUITE_P(
    Cases, MoeTest,
    ::testing::Values(MoeCase{"a3b_decode_b1", shape(256, 8, 2048, 512, 512), 1, false},
                      // the last token count of the lean launches (launch/moe.h kMoeLeanMaxTokens)
                      MoeCase{"a3b_decode_b2", shape(256, 8, 2048, 512, 512), 2, false},
                      MoeCase{"a3b_decode_b4", shape(256, 8, 2048, 512, 512), 4, false},
                      MoeCase{"a3b_decode_b20_hot", shape(256, 8, 2048, 512, 512, true, true, true), 20, false},
                      MoeCase{"a3b_decode_b32", shape(256, 8, 2048, 512, 512), 32, false},
                      MoeCase{"a3b_decode_b32_hot", shape(256, 8, 2048, 512, 512, true, true, true), 32, false},
                      MoeCase{"a3b_prefill_200", shape(256, 8, 2048, 512, 512), 200, true},
                      MoeCase{"a3b_prefill_hot", shape(256, 8, 2048, 512, 512, true, true, true), 150, true},
                      MoeCase{"tiles128", shape(8, 2, 256, 128, 256), 400, true},
                      MoeCase{"tiny_fused_small", shape(8, 2, 64, 32, 48), 11, false},
                      MoeCase{"tiny_fused_grouped", shape(8, 2, 64, 32, 48), 77, true},
                      MoeCase{"tiny_ungated_small", shape(6, 3, 64, 24, 32, true, false), 9, false},
                      MoeCase{"tiny_ungated_grouped", shape(6, 3, 64, 24, 32, true, false), 45, true},
                      MoeCase{"no_shared_small", shape(16, 4, 128, 64, 0, false, false), 5, false},
                      // up to 4 tokens: the router's one-cluster kernel, here without a gate row
                      MoeCase{"no_shared_small_b3", shape(16, 4, 128, 64, 0, false, false), 3, false},
                      // T * (top_k + 1) partial rows past the split down kernel's shared memory: its fallback
                      MoeCase{"topk24_small", shape(64, 24, 128, 64, 64), 30, false},
                      // more than 256 experts: the router's wide per-lane instance
                      MoeCase{"e320_small_b1", shape(320, 4, 128, 64, 64), 1, false},
                      MoeCase{"e320_small", shape(320, 4, 128, 64, 64), 6, false},
                      MoeCase{"no_shared_grouped", shape(16, 4, 128, 64, 0, false, false), 70, true},
                      MoeCase{"fp8_a3b_decode_b1", shape(256, 8, 2048, 512, 512, true, true, false, kFp8), 1, false},
                      MoeCase{"fp8_a3b_decode_b2", shape(256, 8, 2048, 512, 512, true, true, false, kFp8), 2, false},
                      // past the lean launches: the TMA up kernel launched without programmatic serialisation
                      MoeCase{"fp8_a3b_decode_b3", shape(256, 8, 2048, 512, 512, true, true, false, kFp8), 3, false},
                      MoeCase{"fp8_a3b_decode_b32", shape(256, 8, 2048, 512, 512, true, true, false, kFp8), 32, false},
                      // 24 K blocks: 24 steps an item in the TMA up kernel (elsewhere than sm_90: the
                      // bulk-copy up kernel's 8-warp instance, 3 blocks per warp)
                      MoeCase{"fp8_h3072_decode_b1", shape(64, 8, 3072, 256, 256, true, true, false, kFp8), 1, false},
                      // the split down kernel's fallback for block-FP8 experts (25 rows per token)
                      MoeCase{"fp8_topk24_small", shape(64, 24, 128, 128, 128, true, true, false, kFp8), 30, false},
                      MoeCase{"fp8_a3b_decode_hot", shape(256, 8, 2048, 512, 512, true, true, true, kFp8), 20, false},
                      MoeCase{"fp8_a3b_decode_b8", shape(256, 8, 2048, 512, 512, true, true, false, kFp8), 8, false},
                      // hot experts and the shared expert with 9 rows: items of 8 rows and of 1
                      MoeCase{"fp8_a3b_decode_b9_hot", shape(256, 8, 2048, 512, 512, true, true, true, kFp8), 9,
                              false},
                      MoeCase{"fp8_a3b_decode_b16", shape(256, 8, 2048, 512, 512, true, true, false, kFp8), 16, false},
                      MoeCase{"fp8_a3b_no_shared_b16", shape(256, 8, 2048, 512, 0, false, false, false, kFp8), 16,
                              false},
                      // 128 routed rows over 16 experts: several items per expert, of 1 to 8 rows
                      MoeCase{"fp8_e16_decode_b32", shape(16, 4, 256, 128, 128, true, true, false, kFp8), 32, false},
                      MoeCase{"fp8_a3b_prefill_200", shape(256, 8, 2048, 512, 512, true, true, false, kFp8), 200, true},
                      MoeCase{"fp8_a3b_prefill_hot", shape(256, 8, 2048, 512, 512, true, true, true, kFp8), 150, true},
                      MoeCase{"fp8_tiny_grouped", shape(8, 2, 256, 128, 256, true, true, false, kFp8), 70, true},
                      // routed rows narrower than the shared expert's in the small regime: the hidden
                      // rows share one pitch, and each down reads only its own row width
                      MoeCase{"fp8_tiny_small", shape(8, 2, 256, 128, 256, true, true, false, kFp8), 11, false},
                      // the same at one token: the TMA up kernel's zero columns past the routed I in
                      // blocks of one item each
                      MoeCase{"fp8_tiny_small_b1", shape(8, 2, 256, 128, 256, true, true, false, kFp8), 1, false},
                      // hot experts at the most tokens: four 8-row items per hot expert and the shared one
                      MoeCase{"fp8_a3b_decode_b32_hot", shape(256, 8, 2048, 512, 512, true, true, true, kFp8), 32,
                              false},
                      // several 64-row tiles per expert in the FP8 grouped GEMMs, the last partly filled
                      MoeCase{"fp8_tiles_many", shape(8, 2, 256, 128, 256, true, true, false, kFp8), 400, true},
                      // the 35B-A3B's H and I at a prefill's row counts: hot experts with sixteen full
                      // tiles beside experts with a few rows or none
                      MoeCase{"fp8_e64_prefill_1024_hot", shape(64, 8, 2048, 512, 512, true, true, true, kFp8),
                              1024, true},
                      MoeCase{"fp8_no_shared", shape(16, 4, 256, 128, 0, false, false, false, kFp8), 9, false},
                      MoeCase{"fp8_no_shared_grouped", shape(16, 4, 256, 128, 0, false, false, false, kFp8), 70, true}),
    [](const ::testing::TestParamInfo<MoeCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace hyllm::test
