#pragma once
// Scalar conversions between f32 and the narrow float formats, bit-exact with
// PyTorch's CPU conversions (c10::BFloat16, c10::Half, c10::Float8_e4m3fn,
// c10::Float8_e5m2), i.e. what `tensor.to(dtype)` gives:
//
//   f32 -> bf16    round to nearest even; any NaN -> 0x7fc0; overflow -> inf.
//   f32 -> fp16    round to nearest even; NaN -> sign|0x7e00; |x| >= 65520 -> inf.
//   f32 -> e4m3fn  round to nearest even; no infinities: |x| >= 480 (the first
//                  value past the largest finite 448 after rounding), inf and NaN
//                  all give NaN (sign|0x7f); values in (448, 480) round to 448.
//                  This is PyTorch's behaviour: it does not saturate.
//   f32 -> e5m2    round to nearest even; |x| >= 61440 rounds to inf (0x7c),
//                  NaN -> sign|0x7f.
//   narrow -> f32  exact; NaNs decode to quiet NaNs with the bits c10 gives.
//
// Written with integer operations plus exact float arithmetic only, so the
// same code runs on the host and in CUDA device code (HYLLM_HD). The one
// float addition (fp8 subnormal rounding) is exact-then-round-to-nearest-even,
// which holds in the default rounding mode on both.

#include <cstdint>
#include <cstring>

#include "util/host_device.h"

namespace hyllm {

namespace detail {
HYLLM_HD uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
HYLLM_HD float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Shifts m right by `shift` (1..31), rounding to nearest, ties to even.
HYLLM_HD uint32_t shift_right_rne(uint32_t m, uint32_t shift) {
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}
}  // namespace detail

// ---- bfloat16
HYLLM_HD float bf16_to_f32(uint16_t h) { return detail::f32_from_bits(static_cast<uint32_t>(h) << 16); }
HYLLM_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = detail::f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN, sign dropped as c10 does
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

// ---- float16 (IEEE binary16)
HYLLM_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in f32.
    float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return detail::f32_from_bits(sign | detail::f32_bits(v));
  }
  if (exp == 0x1f) {
    // Infinity, or NaN made quiet (as a hardware or float-arithmetic conversion does).
    return detail::f32_from_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u));
  }
  return detail::f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

HYLLM_HD uint16_t f32_to_f16(float f) {
  uint32_t u = detail::f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past 65504: infinity
  if (a >= 0x38800000u) {                       // normal: drop 13 mantissa bits, RNE
    a += 0xfffu + ((a >> 13) & 1u);
    return sign | static_cast<uint16_t>((a - 0x38000000u) >> 13);
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: rounds to (signed) zero, the tie included
  // Subnormal result: |f| / 2^-24 = m * 2^(e - 126), rounded to an integer.
  uint32_t e = a >> 23;
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  return sign | static_cast<uint16_t>(detail::shift_right_rne(m, 126u - e));
}

// ---- float8 e4m3fn: bias 7, no infinities, S.1111.111 is NaN, max 448.
HYLLM_HD float f8e4m3_to_f32(uint8_t v) {
  uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t man = v & 0x7u;
  if (exp == 0xf && man == 0x7) return detail::f32_from_bits(sign | 0x7ff00000u);  // c10's NaN bits
  if (exp == 0) {
    float s = static_cast<float>(man) * 0.001953125f;  // man * 2^-9, exact
    return detail::f32_from_bits(sign | detail::f32_bits(s));
  }
  return detail::f32_from_bits(sign | ((exp + 120u) << 23) | (man << 20));
}

HYLLM_HD uint8_t f32_to_f8e4m3(float f) {
  uint32_t u = detail::f32_bits(f);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x43f00000u) return sign | 0x7fu;  // >= 480, inf, NaN: NaN (no saturation)
  if (a >= 0x3c800000u) {                     // >= 2^-6: normal, drop 20 mantissa bits, RNE
    a += 0x7ffffu + ((a >> 20) & 1u);
    return sign | static_cast<uint8_t>((a - 0x3c000000u) >> 20);
  }
  if (a <= 0x3a800000u) return sign;  // <= 2^-10 (half the smallest subnormal): zero
  uint32_t e = a >> 23;
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  // |f| / 2^-9 = m * 2^(e - 141), rounded to an integer (may reach 8 = the smallest normal).
  return sign | static_cast<uint8_t>(detail::shift_right_rne(m, 141u - e));
}

// ---- float8 e5m2: bias 15, IEEE-like (infinities, NaNs), max 57344. It is the
// top byte of an fp16.
HYLLM_HD float f8e5m2_to_f32(uint8_t v) { return f16_to_f32(static_cast<uint16_t>(v) << 8); }

HYLLM_HD uint8_t f32_to_f8e5m2(float f) {
  uint32_t u = detail::f32_bits(f);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (a >= 0x47700000u) return sign | 0x7cu;  // >= 61440 rounds past 57344: infinity
  if (a >= 0x38800000u) {                     // >= 2^-14: normal, drop 21 mantissa bits, RNE
    a += 0xfffffu + ((a >> 21) & 1u);
    return sign | static_cast<uint8_t>((a - 0x38000000u) >> 21);
  }
  if (a <= 0x37000000u) return sign;  // <= 2^-17: zero
  uint32_t e = a >> 23;
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  // |f| / 2^-16 = m * 2^(e - 134), rounded to an integer.
  return sign | static_cast<uint8_t>(detail::shift_right_rne(m, 134u - e));
}

}  // namespace hyllm
