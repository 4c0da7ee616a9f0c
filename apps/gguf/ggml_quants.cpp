#include "gguf/ggml_quants.h"

#include <cmath>
#include <cstring>

#include "tensor/float_conversions.h"
#include "util/status.h"

namespace hyllm::gguf {

void quantize_q8_0(const float* x, int64_t n, std::byte* out) {
  if (n % kQ8Block != 0) fail(ErrorCode::kInternal, "quantize_q8_0: {} values are not whole blocks of 32", n);
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    const float* v = x + b * kQ8Block;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::fmax(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::byte* block = out + b * (2 + kQ8Block);
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(block, &dh, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) {
      const float r = std::round(v[j] * id);
      if (!(r >= -127.0f && r <= 127.0f)) fail(ErrorCode::kInvalidArgument, "quantize_q8_0: value {} is not finite", v[j]);
      const auto q = static_cast<int8_t>(r);
      std::memcpy(block + 2 + j, &q, 1);
    }
  }
}

float dequantize_q8_0(const std::byte* blocks, int64_t i) {
  const std::byte* block = blocks + (i / kQ8Block) * (2 + kQ8Block);
  uint16_t dh;
  std::memcpy(&dh, block, 2);
  int8_t q;
  std::memcpy(&q, block + 2 + i % kQ8Block, 1);
  return f16_to_f32(dh) * static_cast<float>(q);
}

}  // namespace hyllm::gguf
