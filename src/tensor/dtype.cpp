#include "tensor/dtype.h"

#include <cmath>

namespace hyllm {

namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  const char* name;
  const char* st_name;
  bool is_float;
};
constexpr DTypeInfo kInfo[] = {
    {DType::kF64, 8, "float64", "F64", true},
    {DType::kF32, 4, "float32", "F32", true},
    {DType::kF16, 2, "float16", "F16", true},
    {DType::kBF16, 2, "bfloat16", "BF16", true},
    {DType::kF8E4M3, 1, "float8_e4m3fn", "F8_E4M3", true},
    {DType::kF8E5M2, 1, "float8_e5m2", "F8_E5M2", true},
    {DType::kI64, 8, "int64", "I64", false},
    {DType::kI32, 4, "int32", "I32", false},
    {DType::kI16, 2, "int16", "I16", false},
    {DType::kI8, 1, "int8", "I8", false},
    {DType::kU64, 8, "uint64", "U64", false},
    {DType::kU32, 4, "uint32", "U32", false},
    {DType::kU16, 2, "uint16", "U16", false},
    {DType::kU8, 1, "uint8", "U8", false},
    {DType::kBool, 1, "bool", "BOOL", false},
};
const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }
const char* dtype_safetensors_name(DType t) { return info(t).st_name; }
bool dtype_is_float(DType t) { return info(t).is_float; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& i : kInfo) {
    if (name == i.st_name) return i.type;
  }
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24
      float v = std::ldexp(static_cast<float>(man), -24);
      return sign ? -v : v;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  return detail::f32_from_bits(bits);
}

uint16_t f32_to_f16(float f) {
  uint32_t u = detail::f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65536: infinity
  if (a < 0x38800000u) {                        // below the smallest normal: subnormal or zero
    // Round |f| * 2^24 to the nearest integer, ties to even.
    float v = std::fabs(f) * 16777216.0f;
    float r = std::nearbyint(v);
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t mant_odd = (a >> 13) & 1u;
  a += 0xfffu + mant_odd;
  return sign | static_cast<uint16_t>((a - 0x38000000u) >> 13);
}

// The fp8 conversions are completed with exhaustive tests in the dtype work;
// these follow c10's reference definitions.
float f8e4m3_to_f32(uint8_t v) {
  uint32_t sign = v & 0x80u;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t man = v & 0x7u;
  float r;
  if (exp == 0xf && man == 0x7) {
    r = std::nanf("");
  } else if (exp == 0) {
    r = std::ldexp(static_cast<float>(man), -9);
  } else {
    r = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, static_cast<int>(exp) - 7);
  }
  return sign ? -r : r;
}

uint8_t f32_to_f8e4m3(float f) {
  // c10::detail::fp8e4m3fn_from_fp32_value.
  constexpr uint32_t fp8_max = UINT32_C(1087) << 20;
  constexpr uint32_t denorm_mask = UINT32_C(141) << 23;
  uint32_t f_bits = detail::f32_bits(f);
  const uint32_t sign = f_bits & UINT32_C(0x80000000);
  f_bits ^= sign;
  uint8_t result;
  if (f_bits >= fp8_max) {
    result = 0x7f;
  } else if (f_bits < (UINT32_C(121) << 23)) {
    f_bits = detail::f32_bits(detail::f32_from_bits(f_bits) + detail::f32_from_bits(denorm_mask));
    result = static_cast<uint8_t>(f_bits - denorm_mask);
  } else {
    uint8_t mant_odd = (f_bits >> 20) & 1;
    f_bits += (static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFF;
    f_bits += mant_odd;
    result = static_cast<uint8_t>(f_bits >> 20);
  }
  result |= static_cast<uint8_t>(sign >> 24);
  return result;
}

float f8e5m2_to_f32(uint8_t v) { return f16_to_f32(static_cast<uint16_t>(v) << 8); }

uint8_t f32_to_f8e5m2(float f) {
  // c10::detail::fp8e5m2_from_fp32_value.
  constexpr uint32_t fp32_inf = UINT32_C(255) << 23;
  constexpr uint32_t fp8_max = UINT32_C(143) << 23;
  constexpr uint32_t denorm_mask = UINT32_C(134) << 23;
  uint32_t f_bits = detail::f32_bits(f);
  uint8_t result;
  const uint32_t sign = f_bits & UINT32_C(0x80000000);
  f_bits ^= sign;
  if (f_bits >= fp8_max) {
    result = f_bits > fp32_inf ? UINT8_C(0x7F) : UINT8_C(0x7C);
  } else if (f_bits < (UINT32_C(113) << 23)) {
    f_bits = detail::f32_bits(detail::f32_from_bits(f_bits) + detail::f32_from_bits(denorm_mask));
    result = static_cast<uint8_t>(f_bits - denorm_mask);
  } else {
    uint32_t mant_odd = (f_bits >> 21) & 1;
    f_bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFFF;
    f_bits += mant_odd;
    result = static_cast<uint8_t>(f_bits >> 21);
  }
  result |= static_cast<uint8_t>(sign >> 24);
  return result;
}

}  // namespace hyllm
