// The narrow float conversions against an independent reference computed in
// double precision: every bf16 / fp16 / fp8 value, and every rounding boundary
// between neighbouring values (the exact midpoint and the f32 values just
// above and below it).

#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace hyllm {
namespace {

// A binary float format, described by its fields and its overflow rule.
struct Format {
  const char* name;
  int exp_bits, man_bits, bias;
  bool ieee_specials;  // inf and NaNs at the top exponent (bf16, fp16, e5m2); else e4m3fn
  int total_bits() const { return 1 + exp_bits + man_bits; }
};
constexpr Format kBF16{"bf16", 8, 7, 127, true};
constexpr Format kF16{"fp16", 5, 10, 15, true};
constexpr Format kE4M3{"e4m3fn", 4, 3, 7, false};
constexpr Format kE5M2{"e5m2", 5, 2, 15, true};

// Value of a bit pattern, from the format definition alone.
double decode_reference(const Format& f, uint32_t bits) {
  const uint32_t man = bits & ((1u << f.man_bits) - 1);
  const uint32_t exp = (bits >> f.man_bits) & ((1u << f.exp_bits) - 1);
  const bool neg = (bits >> (f.exp_bits + f.man_bits)) & 1u;
  const uint32_t exp_max = (1u << f.exp_bits) - 1;
  double v;
  if (f.ieee_specials && exp == exp_max) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee_specials && exp == exp_max && man == (1u << f.man_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -f.man_bits), static_cast<int>(exp) - f.bias);
  }
  return neg ? -v : v;
}

double max_finite(const Format& f) {
  uint32_t exp_max = (1u << f.exp_bits) - 1;
  uint32_t bits = f.ieee_specials ? ((exp_max - 1) << f.man_bits) | ((1u << f.man_bits) - 1)
                                  : (exp_max << f.man_bits) | ((1u << f.man_bits) - 2);
  return decode_reference(f, bits);
}

// What PyTorch's conversion of x gives, as a value: round to the format's
// precision with ties to even (unbounded exponent above, subnormals below);
// a result past the largest finite value is infinity for IEEE-like formats
// and NaN for e4m3fn (c10 does not saturate).
double round_reference(const Format& f, float x) {
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(x)) return f.ieee_specials ? static_cast<double>(x) : std::numeric_limits<double>::quiet_NaN();
  const double d = x;
  if (d == 0) return d;
  int e;
  std::frexp(d, &e);  // |d| in [2^(e-1), 2^e)
  const int emin = 1 - f.bias;
  const int exponent = std::max(e - 1, emin);
  const double quantum = std::ldexp(1.0, exponent - f.man_bits);
  double r = std::nearbyint(d / quantum) * quantum;  // exact scaling, ties to even
  if (r == 0) return std::copysign(0.0, d);
  if (std::fabs(r) > max_finite(f)) {
    return f.ieee_specials ? std::copysign(std::numeric_limits<double>::infinity(), d)
                           : std::numeric_limits<double>::quiet_NaN();
  }
  return r;
}

float decode(const Format& f, uint32_t bits) {
  if (&f == &kBF16) return bf16_to_f32(static_cast<uint16_t>(bits));
  if (&f == &kF16) return f16_to_f32(static_cast<uint16_t>(bits));
  if (&f == &kE4M3) return f8e4m3_to_f32(static_cast<uint8_t>(bits));
  return f8e5m2_to_f32(static_cast<uint8_t>(bits));
}
uint32_t encode(const Format& f, float x) {
  if (&f == &kBF16) return f32_to_bf16(x);
  if (&f == &kF16) return f32_to_f16(x);
  if (&f == &kE4M3) return f32_to_f8e4m3(x);
  return f32_to_f8e5m2(x);
}

// Same value, same sign of zero, NaN for NaN.
::testing::AssertionResult same(double expected, float got) {
  if (std::isnan(expected) && std::isnan(got)) return ::testing::AssertionSuccess();
  if (expected == static_cast<double>(got) && std::signbit(expected) == std::signbit(got)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "expected " << expected << " got " << got;
}

class DTypeConversions : public ::testing::TestWithParam<const Format*> {};

TEST_P(DTypeConversions, EveryValueDecodesExactlyAndRoundTrips) {
  const Format& f = *GetParam();
  for (uint32_t bits = 0; bits < (1u << f.total_bits()); ++bits) {
    const float v = decode(f, bits);
    ASSERT_TRUE(same(decode_reference(f, bits), v)) << f.name << " bits 0x" << std::hex << bits;
    if (!std::isnan(v)) {
      ASSERT_EQ(encode(f, v), bits) << f.name << " bits 0x" << std::hex << bits;
    } else {
      ASSERT_TRUE(std::isnan(decode(f, encode(f, v)))) << f.name;
    }
  }
}

TEST_P(DTypeConversions, RoundingAtEveryBoundary) {
  const Format& f = *GetParam();
  const uint32_t count = 1u << (f.total_bits() - 1);  // non-negative patterns
  std::vector<float> probes;
  for (uint32_t bits = 0; bits + 1 < count; ++bits) {
    double lo = decode_reference(f, bits), hi = decode_reference(f, bits + 1);
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    float mid = static_cast<float>((lo + hi) / 2);  // exact in f32 for all four formats
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    for (float x : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(x);
      probes.push_back(-x);
    }
  }
  // Past the largest finite value: the overflow boundary and beyond.
  const double top = max_finite(f);
  const double ulp = top - decode_reference(f, f.ieee_specials ? ((((1u << f.exp_bits) - 2) << f.man_bits) |
                                                                  ((1u << f.man_bits) - 2))
                                                               : (((1u << f.exp_bits) - 1) << f.man_bits) |
                                                                     ((1u << f.man_bits) - 3));
  for (double k : {0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 1000.0}) {
    float x = static_cast<float>(top + k * ulp);
    for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY)}) {
      probes.push_back(y);
      probes.push_back(-y);
    }
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN()}) {
    probes.push_back(x);
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float x;
    std::memcpy(&x, &u, 4);
    probes.push_back(x);
  }
  for (float x : probes) {
    uint32_t bits = encode(f, x);
    ASSERT_TRUE(same(round_reference(f, x), decode(f, bits)))
        << f.name << " x=" << x << " (0x" << std::hex << detail::f32_bits(x) << ") -> 0x" << bits;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, DTypeConversions, ::testing::Values(&kBF16, &kF16, &kE4M3, &kE5M2),
                         [](const ::testing::TestParamInfo<const Format*>& info) { return std::string(info.param->name); });

// The cases that differ between implementations, spelled out.
TEST(DTypeConversions, PyTorchSpecialCases) {
  // e4m3fn does not saturate: past 464 rounds up to the NaN pattern.
  EXPECT_EQ(f32_to_f8e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(460.0f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(464.0f), 0x7e);  // tie: to even (448)
  EXPECT_EQ(f32_to_f8e4m3(std::nextafter(464.0f, INFINITY)), 0x7f);
  EXPECT_EQ(f32_to_f8e4m3(479.0f), 0x7f);
  EXPECT_EQ(f32_to_f8e4m3(480.0f), 0x7f);
  EXPECT_EQ(f32_to_f8e4m3(1e30f), 0x7f);
  EXPECT_EQ(f32_to_f8e4m3(-1e30f), 0xff);
  EXPECT_EQ(f32_to_f8e4m3(INFINITY), 0x7f);
  EXPECT_EQ(f32_to_f8e4m3(-INFINITY), 0xff);
  EXPECT_EQ(f32_to_f8e4m3(std::nanf("")), 0x7f);
  EXPECT_EQ(f32_to_f8e4m3(0.001953125f), 0x01);   // smallest subnormal 2^-9
  EXPECT_EQ(f32_to_f8e4m3(0.0009765625f), 0x00);  // 2^-10: tie to even (0)
  EXPECT_EQ(f32_to_f8e4m3(std::nextafter(0.0009765625f, 1.0f)), 0x01);
  EXPECT_EQ(f32_to_f8e4m3(-0.0001f), 0x80);
  // e5m2 overflows to infinity.
  EXPECT_EQ(f32_to_f8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(f32_to_f8e5m2(61439.0f), 0x7b);
  EXPECT_EQ(f32_to_f8e5m2(61440.0f), 0x7c);
  EXPECT_EQ(f32_to_f8e5m2(-INFINITY), 0xfc);
  EXPECT_EQ(f32_to_f8e5m2(std::nanf("")), 0x7f);
  // fp16 and bf16.
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-std::nanf("")), 0xfe00);
  EXPECT_EQ(f32_to_f16(5.9604645e-8f), 0x0001);
  EXPECT_EQ(f32_to_f16(2.98023224e-8f), 0x0000);  // 2^-25: tie to even
  EXPECT_EQ(f32_to_bf16(-std::nanf("")), 0x7fc0);  // c10 drops the NaN's sign
  EXPECT_EQ(f32_to_bf16(3.0e38f), 0x7f62);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // 1 + 2^-8: tie to even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // 1 + 3 * 2^-8: tie to even (up)
  // NaN decodes carry c10's bit patterns.
  EXPECT_EQ(detail::f32_bits(f8e4m3_to_f32(0x7f)), 0x7ff00000u);
  EXPECT_EQ(detail::f32_bits(f8e4m3_to_f32(0xff)), 0xfff00000u);
  EXPECT_EQ(detail::f32_bits(f8e5m2_to_f32(0x7f)), 0x7fe00000u);
  EXPECT_EQ(detail::f32_bits(f16_to_f32(0x7c01)), 0x7fc02000u);  // quieted
}

TEST(DTypeTables, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_STREQ(dtype_name(DType::kF8E4M3), "float8_e4m3fn");
  for (DType t : {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2, DType::kI64,
                  DType::kI32, DType::kI16, DType::kI8, DType::kU64, DType::kU32, DType::kU16, DType::kU8, DType::kBool}) {
    EXPECT_EQ(dtype_from_safetensors(dtype_safetensors_name(t)), t);
  }
  EXPECT_FALSE(dtype_from_safetensors("F8_E8M0").has_value());
  EXPECT_FALSE(dtype_from_safetensors("bf16").has_value());
}

}  // namespace
}  // namespace hyllm
