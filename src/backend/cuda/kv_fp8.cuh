#pragma once
// The e4m3 codes of the FP8 KV cache (ops.h KvCacheView): the saturating
// encoder the CPU reference uses too (bit-exact) and a decoder straight to
// bf16 bits (exact: e4m3 values have 4 significant bits). Included only by
// .cu files.

#include "backend/cuda/cuda_common.cuh"
#include "tensor/float_conversions.h"

namespace hyllm::cuda {

inline constexpr float kKvFp8Max = 448.0f;

// e4m3(clamp(x / scale, -448, 448)) with IEEE division; NaN stays NaN.
__device__ __forceinline__ uint8_t kv_fp8_code(float x, float scale) {
  const float q = __fdiv_rn(x, scale);
  return f32_to_f8e4m3(q > kKvFp8Max ? kKvFp8Max : (q < -kKvFp8Max ? -kKvFp8Max : q));
}

// bf16 bits of the value of e4m3 code v.
__device__ __forceinline__ uint32_t e4m3_to_bf16_bits(uint32_t v) {
  const uint32_t sign = (v & 0x80u) << 8, em = v & 0x7fu;
  if (em == 0x7fu) return sign | 0x7fc0u;                 // NaN
  if (em >= 8u) return sign | ((em << 4) + (120u << 7));  // normal: exponent bias 7 -> 127
  return sign | f2bf(static_cast<float>(em) * 0.001953125f);  // zero, subnormal: em * 2^-9
}

// Four codes (one byte each, lowest first) as four bf16 values in two words.
__device__ __forceinline__ uint2 e4m3x4_to_bf16x4(uint32_t codes) {
  uint2 r;
  r.x = e4m3_to_bf16_bits(codes & 0xffu) | (e4m3_to_bf16_bits((codes >> 8) & 0xffu) << 16);
  r.y = e4m3_to_bf16_bits((codes >> 16) & 0xffu) | (e4m3_to_bf16_bits(codes >> 24) << 16);
  return r;
}

}  // namespace hyllm::cuda
