// Embedding, row gather, RMSNorm (with residual), gated RMSNorm and SwiGLU
// against double references that round where ops.h says the op rounds.
#include "ops_test_util.h"

namespace hyllm::test {
namespace {

TEST(Embedding, CopiesRowsAndRejectsBadIds) {
  auto be = make_cpu_backend();
  Rng rng(fresh_seed());
  HostTensor table = bf16_tensor({50, 24});
  table.fill_normal(rng);
  HostTensor ids = i32_tensor({3, 0, 49, 3}), out = bf16_tensor({4, 24});
  out.poison();
  embedding(*be, {ids.view(), table.view(), out.view()});
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t h = 0; h < 24; ++h) ASSERT_EQ(out.get(t * 24 + h), table.v[ids.v[t] * 24 + h]);
  HostTensor bad = i32_tensor({50});
  HostTensor out1 = bf16_tensor({1, 24});
  EXPECT_THROW(embedding(*be, {bad.view(), table.view(), out1.view()}), Error);
}

TEST(GatherRows, PicksRows) {
  auto be = make_cpu_backend();
  Rng rng(fresh_seed());
  HostTensor src = f32_tensor({6, 5});
  src.fill_normal(rng);
  HostTensor idx = i32_tensor({5, 0, 5}), out = f32_tensor({3, 5});
  out.poison();
  gather_rows(*be, {src.view(), idx.view(), out.view()});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 5; ++c) ASSERT_EQ(out.get(r * 5 + c), src.v[idx.v[r] * 5 + c]);
}

TEST(RmsNorm, OnePlusWeightWithResidual) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 7, H = 96;
  for (DType wd : {DType::kBF16, DType::kF32}) {
    for (bool plus_one : {true, false}) {
      HostTensor x = bf16_tensor({T, H}), res = bf16_tensor({T, H}), w(wd, {H});
      x.fill_normal(rng);
      res.fill_normal(rng, 3.0);
      w.fill_normal(rng, 0.2);
      const std::vector<double> res_before = res.v;
      // Reference: s = bf16(x + r); y = s / rms(s) * (1 + w) rounded once.
      std::vector<double> want(static_cast<size_t>(T * H)), want_res(want.size());
      for (int64_t t = 0; t < T; ++t) {
        double ss = 0.0;
        for (int64_t h = 0; h < H; ++h) {
          want_res[t * H + h] = bf16_round(x.v[t * H + h] + res_before[t * H + h]);
          ss += want_res[t * H + h] * want_res[t * H + h];
        }
        const double inv = 1.0 / std::sqrt(ss / H + 1e-6);
        for (int64_t h = 0; h < H; ++h)
          want[t * H + h] = want_res[t * H + h] * inv * ((plus_one ? 1.0 : 0.0) + w.v[h]);
      }
      HostTensor out = bf16_tensor({T, H});
      out.poison();
      RmsNormArgs a{x.view(), w.view(), out.view(), res.view(), res.view(), 1e-6f, plus_one};
      rms_norm(*be, a);
      // The sum is exact (both sides round the same fp32 sum); the output is
      // within one bf16 rounding plus fp32 noise (1.01 ulp).
      for (int64_t i = 0; i < T * H; ++i) ASSERT_EQ(res.get(i), want_res[i]) << i;
      EXPECT_EQ(bf16_mismatches(out.values(), want, 1.01, 1e-6), 0);
      // Without a residual the input itself is normalised.
      HostTensor out2 = bf16_tensor({T, H});
      out2.poison();
      rms_norm(*be, {res.view(), w.view(), out2.view(), {}, {}, 1e-6f, plus_one});
      for (int64_t i = 0; i < T * H; ++i) ASSERT_EQ(out2.get(i), out.get(i)) << i;
    }
  }
}

TEST(GatedRmsNorm, PlainWeightSiluGate) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 5, NH = 3, D = 32;
  HostTensor x = bf16_tensor({T, NH * D}), zz = bf16_tensor({T, 10 + NH * D}), w = f32_tensor({D});
  x.fill_normal(rng);
  zz.fill_normal(rng, 2.0);
  w.fill_normal(rng, 0.3, 1.0);
  std::vector<double> want(static_cast<size_t>(T * NH * D));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < NH; ++h) {
      double ss = 0.0;
      for (int64_t d = 0; d < D; ++d) ss += x.v[t * NH * D + h * D + d] * x.v[t * NH * D + h * D + d];
      const double inv = 1.0 / std::sqrt(ss / D + 1e-6);
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = t * NH * D + h * D + d;
        const double n = bf16_round(x.v[i] * inv);
        want[i] = n * w.v[d] * silu(zz.v[t * (10 + NH * D) + 10 + h * D + d]);
      }
    }
  }
  HostTensor out = bf16_tensor({T, NH * D});
  out.poison();
  gated_rms_norm(*be, {x.view(), ColSlice(zz.view(), 10, NH * D), w.view(), out.view(), NH, D, 1e-6f});
  // The intermediate bf16 rounding of n may land on the other neighbour in
  // fp32 than in double: one ulp of n, up to 2^-7 of it, carried into the
  // product; the output's own rounding adds up to 2^-8. In bf16_mismatches'
  // units of 2^-8 of the value: 3.
  EXPECT_EQ(bf16_mismatches(out.values(), want, 3.01, 1e-6), 0);
}

TEST(Swiglu, SiluGateTimesUp) {
  auto be = make_cpu_backend();
  Rng rng(fresh_seed());
  const int64_t T = 4, I = 40;
  HostTensor x = bf16_tensor({T, 2 * I});
  x.fill_normal(rng, 2.0);
  std::vector<double> want(static_cast<size_t>(T * I));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) want[t * I + i] = silu(x.v[t * 2 * I + i]) * x.v[t * 2 * I + I + i];
  HostTensor out = bf16_tensor({T, I});
  out.poison();
  swiglu(*be, {x.view(), out.view()});
  EXPECT_EQ(bf16_mismatches(out.values(), want, 1.01, 1e-6), 0);
}

}  // namespace
}  // namespace hyllm::test
