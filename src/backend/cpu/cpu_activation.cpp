// SwiGLU on a fused [gate | up] projection.
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {

void CpuKernels::swiglu(const SwigluArgs& a) {
  const int64_t T = a.x.rows(), I = a.x.width / 2;
  uint16_t* out = a.out.empty() ? nullptr : a.out.data_as<uint16_t>();
  const bool fp8 = !a.out_fp8.empty();
  cpu::parallel(T, 4, [&](int64_t t0, int64_t t1) {
    std::vector<float> y(fp8 ? static_cast<size_t>(I) : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const uint16_t* r = cpu::row(a.x, t);
      for (int64_t i = 0; i < I; ++i) {
        const uint16_t v = cpu::to_bf(cpu::silu(cpu::bf(r[i])) * cpu::bf(r[I + i]));
        if (out) out[t * I + i] = v;
        if (fp8) y[i] = cpu::bf(v);
      }
      if (fp8) cpu::quantize_row_fp8(y.data(), a.out_fp8, t);
    }
  });
}

}  // namespace hyllm
