#pragma once
// Division by the scale of an FP8 quantisation group: one correctly rounded
// reciprocal per group, then per value a product and one FMA correction
// (Markstein's), where an IEEE division per value costs a kernel that is
// bound by instruction issue several times the instructions.
//
// The group quantisers divide bf16 values v (|v| <= amax) by
// s = max(amax, 1e-10) / 448 for the group's bf16 amax. For every such pair
// divide(v) gives the same e4m3 code as v / s correctly rounded, which is
// what the CPU quantiser computes, and the same float wherever
// |v / s| >= 2^-12; below that a subnormal v leaves an inexact remainder,
// and every such quotient has the code of zero. The sign of zero follows v,
// as it does for v / s. tests/unit/tensor/fp8_group_divisor_test.cpp checks
// all of these pairs. Other divisors (a checkpoint's static input scale)
// are not covered: divide those with an IEEE division.

#include <cmath>

#include "tensor/float_conversions.h"

namespace hyllm {

struct Fp8GroupDivisor {
  float scale;
  float inverse;  // 1 / scale, correctly rounded

  HYLLM_HD explicit Fp8GroupDivisor(float s) : scale(s), inverse(reciprocal(s)) {}

  HYLLM_HD float divide(float v) const {
    const float q = product(v, inverse);
    const float remainder = fmaf(-q, scale, v);  // exact for the values above
    return copysignf(fmaf(remainder, inverse, q), v);
  }

 private:
  // Correctly rounded on both sides: nvcc would otherwise be free to fuse
  // the product into a neighbouring addition.
  HYLLM_HD static float reciprocal(float s) {
#if defined(__CUDA_ARCH__)
    return __frcp_rn(s);
#else
    return 1.0f / s;
#endif
  }
  HYLLM_HD static float product(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
  }
};

}  // namespace hyllm
