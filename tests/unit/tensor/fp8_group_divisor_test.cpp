// Fp8GroupDivisor against the IEEE division it replaces, over every pair the
// FP8 group quantisers can meet: each finite bf16 amax >= 0 (below the 1e-10
// floor all give the floor's scale) and each bf16 v with |v| <= amax, both
// signs. About 1.1e9 pairs; only pairs whose quotients differ in their bits
// are converted to e4m3.

#include "tensor/fp8_group_divisor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/float_conversions.h"

namespace hyllm {
namespace {

// The CPU quantiser's code of a quotient: clamp to the e4m3 range, round.
uint8_t code(float q) { return f32_to_f8e4m3(std::clamp(q, -448.0f, 448.0f)); }

TEST(Fp8GroupDivisor, GivesTheCodesOfTheIeeeQuotientForEveryBf16Group) {
  int64_t pairs = 0, inexact = 0;
  for (uint32_t a = 0; a < 0x7F80; ++a) {  // +0 .. the largest finite bf16
    const float amax = bf16_to_f32(static_cast<uint16_t>(a));
    const float s = std::max(amax, 1e-10f) / 448.0f;
    const Fp8GroupDivisor divisor(s);
    for (uint32_t m = 0; m <= a; ++m) {
      for (const uint32_t sign : {0u, 0x8000u}) {
        const float v = bf16_to_f32(static_cast<uint16_t>(m | sign));
        const float want = v / s, got = divisor.divide(v);
        ++pairs;
        if (detail::f32_bits(got) == detail::f32_bits(want)) continue;
        ++inexact;
        ASSERT_LT(std::fabs(want), 0x1p-12f) << "amax " << amax << " v " << v << ": " << got << " vs " << want;
        ASSERT_EQ(code(got), code(want)) << "amax " << amax << " v " << v;
      }
    }
  }
  EXPECT_EQ(pairs, 2 * (int64_t{0x7F80} * 0x7F81 / 2));
  // The inexact remainders are real (subnormal v), so the check above ran.
  EXPECT_GT(inexact, 0);
}

TEST(Fp8GroupDivisor, ZeroKeepsItsSign) {
  const Fp8GroupDivisor divisor(0.25f);
  EXPECT_EQ(detail::f32_bits(divisor.divide(-0.0f)), detail::f32_bits(-0.0f));
  EXPECT_EQ(detail::f32_bits(divisor.divide(0.0f)), detail::f32_bits(0.0f));
  EXPECT_EQ(divisor.divide(-1.5f), -6.0f);
}

}  // namespace
}  // namespace hyllm
