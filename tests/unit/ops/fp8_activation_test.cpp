// FP8 activations (ops.h ActQuantMode): quantize_fp8 against an independent
// implementation of the rule, the producer ops' FP8 outputs against
// quantize_fp8 of their own bf16 outputs (bit for bit), and linear on a
// pre-quantised input against linear quantising its bf16 input itself.
#include <algorithm>

#include "ops_test_util.h"

namespace hyllm::test {
namespace {

// Host buffers of one Fp8Activation of T x K.
struct Fp8Buffers {
  HostTensor q, scale;
  Fp8Buffers(ActQuantMode mode, int64_t T, int64_t K, float static_scale = 0.0f)
      : q(DType::kF8E4M3, {T, K}),
        scale(DType::kF32, mode == ActQuantMode::kGroup128 ? Shape{(K + 127) / 128, T} : Shape{1}) {
    q.poison();
    if (mode == ActQuantMode::kGroup128)
      scale.poison();
    else
      scale.set(0, static_scale);
    act.mode = mode;
    act.q = q.view();
    act.scale = scale.view();
  }
  Fp8Activation act;
  std::vector<uint8_t> codes() const {
    const uint8_t* p = q.buf.data_as<const uint8_t>();
    return {p, p + q.numel()};
  }
  std::vector<float> scales() const {
    const float* p = scale.buf.data_as<const float>();
    return {p, p + scale.numel()};
  }
};

// The quantisation rule of ops.h, written out independently of the backend.
void reference_quantize(const std::vector<double>& x, int64_t T, int64_t K, ActQuantMode mode, float static_scale,
                        std::vector<uint8_t>& codes, std::vector<float>& scales) {
  codes.assign(static_cast<size_t>(T * K), 0);
  const int64_t groups = (K + 127) / 128;
  scales.assign(mode == ActQuantMode::kGroup128 ? static_cast<size_t>(groups * T) : 1, static_scale);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < groups; ++j) {
      const int64_t k0 = j * 128, k1 = std::min(K, k0 + 128);
      float s = static_scale;
      if (mode == ActQuantMode::kGroup128) {
        float amax = 0.0f;
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, static_cast<float>(std::fabs(x[t * K + k])));
        s = std::max(amax, 1e-10f) / 448.0f;
        scales[j * T + t] = s;
      }
      for (int64_t k = k0; k < k1; ++k)
        codes[t * K + k] = f32_to_f8e4m3(std::clamp(static_cast<float>(x[t * K + k]) / s, -448.0f, 448.0f));
    }
  }
}

TEST(Fp8Activation, QuantizeMatchesTheRule) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  for (auto [T, K] : {std::pair<int64_t, int64_t>{1, 128}, {3, 300}, {5, 64}, {2, 1000}}) {
    HostTensor x = bf16_tensor({T, K});
    x.fill_normal(rng, 3.0);
    for (int64_t k = 0; k < std::min<int64_t>(K, 128); ++k) x.set(k, 0.0);  // an all-zero group: the amax floor
    x.set(x.numel() - 1, 5000.0);                                            // saturates the static scale
    for (ActQuantMode mode : {ActQuantMode::kGroup128, ActQuantMode::kStatic}) {
      Fp8Buffers out(mode, T, K, 0.05f);
      quantize_fp8(*be, {x.view(), out.act});
      std::vector<uint8_t> codes;
      std::vector<float> scales;
      reference_quantize(x.v, T, K, mode, 0.05f, codes, scales);
      EXPECT_EQ(out.codes(), codes) << act_quant_mode_name(mode) << " T=" << T << " K=" << K;
      EXPECT_EQ(out.scales(), scales) << act_quant_mode_name(mode);
    }
  }
}

// A producer's FP8 output is quantize_fp8 of its bf16 output.
void expect_same_quantisation(Backend& be, const HostTensor& bf16_out, const Fp8Buffers& fused, ActQuantMode mode,
                              const char* op) {
  const int64_t T = bf16_out.view().dim(0), K = bf16_out.view().dim(1);
  Fp8Buffers separate(mode, T, K, 0.05f);
  quantize_fp8(be, {bf16_out.view(), separate.act});
  EXPECT_EQ(fused.codes(), separate.codes()) << op << " " << act_quant_mode_name(mode);
  EXPECT_EQ(fused.scales(), separate.scales()) << op << " " << act_quant_mode_name(mode);
}

TEST(Fp8Activation, ProducersWriteTheQuantisationOfTheirOutput) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 5, H = 320, I = 200, NH = 3, D = 40;
  for (ActQuantMode mode : {ActQuantMode::kGroup128, ActQuantMode::kStatic}) {
    {  // rms_norm with the residual add; the bf16 output is the same with or without FP8.
      HostTensor x = bf16_tensor({T, H}), res = bf16_tensor({T, H}), w = bf16_tensor({H});
      x.fill_normal(rng);
      res.fill_normal(rng);
      w.fill_normal(rng, 0.1);
      HostTensor plain = bf16_tensor({T, H}), out = bf16_tensor({T, H}), r1 = bf16_tensor({T, H}),
                 r2 = bf16_tensor({T, H});
      Fp8Buffers fp8(mode, T, H, 0.05f);
      rms_norm(*be, {x.view(), w.view(), plain.view(), res.view(), r1.view()});
      rms_norm(*be, {x.view(), w.view(), out.view(), res.view(), r2.view(), 1e-6f, true, fp8.act});
      EXPECT_EQ(out.values(), plain.values());
      EXPECT_EQ(r2.values(), r1.values());
      expect_same_quantisation(*be, out, fp8, mode, "rms_norm");
      Fp8Buffers only(mode, T, H, 0.05f);  // without a bf16 output
      rms_norm(*be, {x.view(), w.view(), {}, res.view(), r2.view(), 1e-6f, true, only.act});
      EXPECT_EQ(only.codes(), fp8.codes());
    }
    {  // swiglu
      HostTensor gu = bf16_tensor({T, 2 * I}), out = bf16_tensor({T, I});
      gu.fill_normal(rng, 2.0);
      Fp8Buffers fp8(mode, T, I, 0.05f);
      swiglu(*be, {gu.view(), out.view(), fp8.act});
      expect_same_quantisation(*be, out, fp8, mode, "swiglu");
    }
    {  // gated_rms_norm
      HostTensor x = bf16_tensor({T, NH * D}), z = bf16_tensor({T, NH * D}), w = bf16_tensor({D});
      x.fill_normal(rng);
      z.fill_normal(rng);
      w.fill_normal(rng, 0.5, 1.0);
      HostTensor out = bf16_tensor({T, NH * D});
      Fp8Buffers fp8(mode, T, NH * D, 0.05f);
      gated_rms_norm(*be, {x.view(), z.view(), w.view(), out.view(), NH, D, 1e-6f, fp8.act});
      expect_same_quantisation(*be, out, fp8, mode, "gated_rms_norm");
    }
  }
  EXPECT_EQ(be->counters().linear_self_quantizations, 0);
}

TEST(Fp8Activation, LinearOnQuantisedInputEqualsLinearQuantisingItself) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t M = 6, K = 300, N = 200;
  HostTensor x = bf16_tensor({M, K}), wq(DType::kF8E4M3, {N, K});
  x.fill_normal(rng);
  wq.fill_normal(rng, 100.0);
  HostTensor wsb = f32_tensor({(N + 127) / 128, (K + 127) / 128}), wst = f32_tensor({1}), ist = f32_tensor({1});
  wsb.fill_uniform(rng, 1e-4, 1e-3);
  wst.set(0, 3e-4);
  ist.set(0, 0.02);
  const LinearWeight block = LinearWeight::fp8_block(wq.view(), wsb.view());
  const LinearWeight tensor = LinearWeight::fp8_tensor(wq.view(), wst.view(), ist.view());
  for (const LinearWeight* w : {&block, &tensor}) {
    const ActQuantMode mode = act_quant_mode_for(w->format);
    HostTensor self = f32_tensor({M, N}), given = f32_tensor({M, N});
    self.poison();
    given.poison();
    be->counters() = {};
    linear(*be, {x.view(), *w, self.view()});
    EXPECT_EQ(be->counters().linear_self_quantizations, 1);
    Fp8Buffers xq(mode, M, K);
    if (mode == ActQuantMode::kStatic) xq.act.scale = w->input_scale;
    quantize_fp8(*be, {x.view(), xq.act});
    linear(*be, {{}, *w, given.view(), xq.act});
    EXPECT_EQ(be->counters().linear_self_quantizations, 1);
    EXPECT_EQ(be->counters().fp8_quantizations, 1);
    EXPECT_EQ(given.values(), self.values()) << weight_format_name(w->format);
  }
}

TEST(Fp8Activation, MismatchedModesAreRefused) {
  auto be = make_cpu_backend();
  HostTensor x = bf16_tensor({2, 128}), wq(DType::kF8E4M3, {16, 128}), ws = f32_tensor({1, 1}),
             wb = bf16_tensor({16, 128}), out = bf16_tensor({2, 16});
  Fp8Buffers statically(ActQuantMode::kStatic, 2, 128, 1.0f);
  const LinearWeight block = LinearWeight::fp8_block(wq.view(), ws.view());
  EXPECT_THROW(linear(*be, {x.view(), block, out.view(), statically.act}), Error);
  Fp8Buffers grouped(ActQuantMode::kGroup128, 2, 128);
  EXPECT_THROW(linear(*be, {x.view(), LinearWeight::bf16(wb.view()), out.view(), grouped.act}), Error);
  Fp8Buffers wrong_rows(ActQuantMode::kGroup128, 3, 128);
  HostTensor gu = bf16_tensor({2, 256}), act = bf16_tensor({2, 128});
  EXPECT_THROW(swiglu(*be, {gu.view(), act.view(), wrong_rows.act}), Error);
}

}  // namespace
}  // namespace hyllm::test
