#pragma once
// Element types and scalar conversions. Conversions round and saturate the way
// PyTorch does, so that the CPU reference computes what the HF reference
// computes; they are host/device-neutral and usable from CUDA code too.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#if defined(__CUDACC__)
#define HYLLM_HD __host__ __device__ __forceinline__
#else
#define HYLLM_HD inline
#endif

namespace hyllm {

enum class DType : uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // float8_e4m3fn: no infinities, 0x7f/0xff are NaN, max 448
  kF8E5M2,  // float8_e5m2: IEEE-like, max 57344
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
};

// Bytes per element.
size_t dtype_size(DType t);
// Lower-case name as PyTorch prints it without the prefix: "bfloat16", "float8_e4m3fn".
const char* dtype_name(DType t);
// The safetensors header spelling: "BF16", "F8_E4M3", ...
const char* dtype_safetensors_name(DType t);
std::optional<DType> dtype_from_safetensors(std::string_view name);
bool dtype_is_float(DType t);

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
}  // namespace detail

// --- bfloat16: round to nearest even; NaN stays a quiet NaN (as c10::BFloat16).
HYLLM_HD float bf16_to_f32(uint16_t h) { return detail::f32_from_bits(static_cast<uint32_t>(h) << 16); }
HYLLM_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = detail::f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

// --- float16 (IEEE binary16): round to nearest even, overflow to infinity.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// --- float8. e4m3fn and e5m2 follow c10::Float8_e4m3fn / Float8_e5m2.
float f8e4m3_to_f32(uint8_t v);
uint8_t f32_to_f8e4m3(float f);
float f8e5m2_to_f32(uint8_t v);
uint8_t f32_to_f8e5m2(float f);

// Strongly typed 16-bit storage types for code that wants them.
struct bf16 {
  uint16_t bits;
  bf16() = default;
  HYLLM_HD explicit bf16(float f) : bits(f32_to_bf16(f)) {}
  HYLLM_HD explicit operator float() const { return bf16_to_f32(bits); }
  static HYLLM_HD bf16 from_bits(uint16_t b) {
    bf16 r;
    r.bits = b;
    return r;
  }
};
static_assert(sizeof(bf16) == 2);

}  // namespace hyllm
