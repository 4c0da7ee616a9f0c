// Online per-tensor FP8 quantisation of a weight (ops.h quantize_weight_fp8).
#include <algorithm>
#include <cmath>
#include <mutex>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {

void CpuKernels::quantize_weight_fp8(const QuantizeWeightFp8Args& a) {
  const int64_t n = a.w.numel();
  const uint16_t* w = a.w.data_as<const uint16_t>();
  // The amax is exact whatever the order: max is associative.
  float amax = 0.0f;
  std::mutex mu;
  cpu::parallel(n, 1 << 16, [&](int64_t b, int64_t e) {
    float m = 0.0f;
    for (int64_t i = b; i < e; ++i) {
      const float v = std::fabs(cpu::bf(w[i]));
      if (v > m) m = v;  // a NaN compares false: skipped
    }
    std::lock_guard<std::mutex> lock(mu);
    amax = std::max(amax, m);
  });
  const float s = std::max(amax, kFp8GroupAmaxFloor) / kFp8E4M3Max;
  uint8_t* out = a.out.data_as<uint8_t>();
  cpu::parallel(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float q = cpu::bf(w[i]) / s;
      out[i] = f32_to_f8e4m3(q > kFp8E4M3Max ? kFp8E4M3Max : (q < -kFp8E4M3Max ? -kFp8E4M3Max : q));
    }
  });
  float* scale = a.scale.data_as<float>();
  std::fill(scale, scale + a.scale.numel(), s);
}

}  // namespace hyllm
