// SwiGLU on a fused [gate | up] projection.
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {

void CpuKernels::swiglu(const SwigluArgs& a) {
  const int64_t T = a.out.dim(0), I = a.out.dim(1);
  uint16_t* out = a.out.data_as<uint16_t>();
  cpu::parallel(T, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const uint16_t* r = cpu::row(a.x, t);
      for (int64_t i = 0; i < I; ++i) out[t * I + i] = cpu::to_bf(cpu::silu(cpu::bf(r[i])) * cpu::bf(r[I + i]));
    }
  });
}

}  // namespace hyllm
