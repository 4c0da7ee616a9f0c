// RMSNorm (with the fused residual add) and the GDN gated RMSNorm.
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {

void CpuKernels::rms_norm(const RmsNormArgs& a) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1);
  std::vector<float> w = cpu::to_floats(a.weight);
  if (a.plus_one) {
    for (float& v : w) v += 1.0f;
  }
  const uint16_t* x = a.x.data_as<const uint16_t>();
  const uint16_t* rin = a.residual_in.empty() ? nullptr : a.residual_in.data_as<const uint16_t>();
  uint16_t* rout = a.residual_out.empty() ? nullptr : a.residual_out.data_as<uint16_t>();
  uint16_t* out = a.out.empty() ? nullptr : a.out.data_as<uint16_t>();
  const bool fp8 = !a.out_fp8.empty();
  cpu::parallel(T, 8, [&](int64_t t0, int64_t t1) {
    std::vector<float> s(static_cast<size_t>(H)), y(fp8 ? static_cast<size_t>(H) : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t * H;
      float sum_sq = 0.0f;
      for (int64_t i = 0; i < H; ++i) {
        // The residual sum is rounded to bf16 before it is normalised.
        float v = rin ? cpu::bf(cpu::to_bf(cpu::bf(x[o + i]) + cpu::bf(rin[o + i]))) : cpu::bf(x[o + i]);
        s[i] = v;
        sum_sq += v * v;
      }
      if (rout) {
        for (int64_t i = 0; i < H; ++i) rout[o + i] = cpu::to_bf(s[i]);
      }
      const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(H) + a.eps);
      for (int64_t i = 0; i < H; ++i) {
        const uint16_t v = cpu::to_bf(s[i] * inv * w[i]);
        if (out) out[o + i] = v;
        if (fp8) y[i] = cpu::bf(v);
      }
      if (fp8) cpu::quantize_row_fp8(y.data(), a.out_fp8, t);
    }
  });
}

void CpuKernels::gated_rms_norm(const GatedRmsNormArgs& a) {
  const int64_t T = a.x.dim(0), NH = a.num_heads, D = a.head_dim;
  const std::vector<float> w = cpu::to_floats(a.weight);
  const uint16_t* x = a.x.data_as<const uint16_t>();
  uint16_t* out = a.out.empty() ? nullptr : a.out.data_as<uint16_t>();
  const bool fp8 = !a.out_fp8.empty();
  cpu::parallel(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> y(fp8 ? static_cast<size_t>(NH * D) : 0);
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t h = 0; h < NH; ++h) {
        const uint16_t* xr = x + t * NH * D + h * D;
        const uint16_t* zr = cpu::row(a.z, t) + h * D;
        float sum_sq = 0.0f;
        for (int64_t d = 0; d < D; ++d) sum_sq += cpu::bf(xr[d]) * cpu::bf(xr[d]);
        const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(D) + a.eps);
        for (int64_t d = 0; d < D; ++d) {
          const float n = cpu::bf(cpu::to_bf(cpu::bf(xr[d]) * inv));  // HF rounds the normalised x
          const uint16_t v = cpu::to_bf(n * w[d] * cpu::silu(cpu::bf(zr[d])));
          if (out) out[t * NH * D + h * D + d] = v;
          if (fp8) y[h * D + d] = cpu::bf(v);
        }
      }
      if (fp8) cpu::quantize_row_fp8(y.data(), a.out_fp8, t);
    }
  });
}

}  // namespace hyllm
