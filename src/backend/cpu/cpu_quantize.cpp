// FP8 activation quantisation: the reference for every producer op's FP8
// output and for quantize_fp8.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {
namespace cpu {

uint8_t e4m3_code(float v) { return f32_to_f8e4m3(std::clamp(v, -kFp8E4M3Max, kFp8E4M3Max)); }

void quantize_row_fp8(const float* x, int64_t K, ActQuantMode mode, float static_scale, uint8_t* q, float* scale,
                      int64_t scale_stride) {
  if (mode == ActQuantMode::kStatic) {
    for (int64_t k = 0; k < K; ++k) q[k] = e4m3_code(x[k] / static_scale);
    return;
  }
  for (int64_t k0 = 0, j = 0; k0 < K; k0 += kFp8BlockSize, ++j) {
    const int64_t k1 = std::min(K, k0 + kFp8BlockSize);
    float amax = 0.0f;
    for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float s = std::max(amax, kFp8GroupAmaxFloor) / kFp8E4M3Max;
    scale[j * scale_stride] = s;
    for (int64_t k = k0; k < k1; ++k) q[k] = e4m3_code(x[k] / s);
  }
}

void quantize_row_fp8(const float* x, const Fp8Activation& out, int64_t row) {
  const int64_t K = out.cols();
  const bool dynamic = out.mode == ActQuantMode::kGroup128;
  quantize_row_fp8(x, K, out.mode, dynamic ? 0.0f : out.scale.data_as<const float>()[0],
                   out.q.data_as<uint8_t>() + row * K, dynamic ? out.scale.data_as<float>() + row : nullptr,
                   out.rows());
}

Fp8Rows fp8_rows(const Fp8Activation& a) {
  return {a.mode, a.q.data_as<const uint8_t>(), a.scale.data_as<const float>(), a.rows()};
}

}  // namespace cpu

void CpuKernels::quantize_fp8(const QuantizeFp8Args& a) {
  const int64_t T = a.out.rows(), K = a.out.cols();
  cpu::parallel(T, 8, [&](int64_t t0, int64_t t1) {
    std::vector<float> v(static_cast<size_t>(K));
    for (int64_t t = t0; t < t1; ++t) {
      cpu::bf16_to_f32_row(cpu::row(a.x, t), v.data(), K);
      cpu::quantize_row_fp8(v.data(), a.out, t);
    }
  });
}

}  // namespace hyllm
