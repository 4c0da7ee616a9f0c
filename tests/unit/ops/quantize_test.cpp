// quantize_weight_fp8: per-tensor e4m3 codes of w / (amax / 448), the scale
// in every cell of the scale tensor; checked against a reference written
// from the definition.
#include "ops_test_util.h"

namespace hyllm::test {
namespace {

TEST(QuantizeWeightFp8, CodesAndScaleFollowTheDefinition) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t N = 200, K = 300;
  HostTensor w = bf16_tensor({N, K});
  w.fill_normal(rng, 0.02);
  w.set(17, NAN);
  w.set(42, -0.5);  // the amax
  HostTensor out(DType::kF8E4M3, {N, K}), scale(DType::kF32, {2, 3});
  out.poison();
  scale.poison();
  quantize_weight_fp8(*be, {w.view(), out.view(), scale.view()});
  const float s = 0.5f / 448.0f;
  for (int64_t j = 0; j < 6; ++j) ASSERT_EQ(scale.buf.data_as<float>()[j], s) << "cell " << j;
  double max_rel = 0;
  for (int64_t i = 0; i < N * K; ++i) {
    const uint8_t code = out.buf.data_as<uint8_t>()[i];
    if (i == 17) {
      EXPECT_EQ(code & 0x7f, 0x7f) << "NaN stays NaN";
      continue;
    }
    ASSERT_EQ(code, f32_to_f8e4m3(static_cast<float>(w.v[i]) / s)) << "element " << i;
    const double back = f8e4m3_to_f32(code) * s;
    // Normal e4m3 values round to 2^-4 relative; subnormals (below 2^-6 of
    // the scale) to half of 2^-9 absolute.
    const double err = std::fabs(back - w.v[i]);
    ASSERT_LE(err, std::max(std::fabs(w.v[i]) / 16, s * std::ldexp(1.0, -10)) * 1.0001) << "element " << i;
    if (std::fabs(w.v[i]) > 0.01) max_rel = std::max(max_rel, err / std::fabs(w.v[i]));
  }
  EXPECT_EQ(out.buf.data_as<uint8_t>()[42], 0xfe) << "the amax is -448";
  EXPECT_GT(max_rel, 0.01);  // e4m3 rounding shows
}

TEST(QuantizeWeightFp8, ZeroTensorGetsTheFloorScale) {
  auto be = make_cpu_backend();
  HostTensor w = bf16_tensor({4, 8}), out(DType::kF8E4M3, {4, 8}), scale(DType::kF32, {1});
  out.poison();
  quantize_weight_fp8(*be, {w.view(), out.view(), scale.view()});
  EXPECT_EQ(scale.buf.data_as<float>()[0], kFp8GroupAmaxFloor / kFp8E4M3Max);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(out.buf.data_as<uint8_t>()[i], 0) << i;
}

TEST(QuantizeWeightFp8, RejectsWrongTypes) {
  auto be = make_cpu_backend();
  HostTensor w = bf16_tensor({4, 8}), out(DType::kF8E4M3, {4, 8}), small(DType::kF8E4M3, {4, 4}),
             scale(DType::kF32, {1}), bf_scale = bf16_tensor({1});
  EXPECT_THROW(quantize_weight_fp8(*be, {w.view(), small.view(), scale.view()}), Error);
  EXPECT_THROW(quantize_weight_fp8(*be, {w.view(), out.view(), bf_scale.view()}), Error);
  EXPECT_THROW(quantize_weight_fp8(*be, {out.view(), out.view(), scale.view()}), Error);
}

}  // namespace
}  // namespace hyllm::test
