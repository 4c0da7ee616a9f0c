#pragma once
// Element types, and (from float_conversions.h) the scalar conversions that
// round, overflow and make NaNs exactly as PyTorch does, so that the CPU
// reference computes what the HF reference computes; they are
// host/device-neutral and usable from CUDA code too.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "tensor/float_conversions.h"

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
