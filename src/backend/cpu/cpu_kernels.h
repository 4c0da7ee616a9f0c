#pragma once
// The CPU reference kernels: the Kernels table of the CPU backend. Each op
// family lives in its own file (cpu_<family>.cpp); all run on the global
// thread pool and compute in fp32 (fp64 where exactness needs it).

#include "backend/kernels.h"

namespace hyllm {

class CpuKernels final : public Kernels {
 protected:
  const char* table_name() const override { return "the cpu backend"; }
};

}  // namespace hyllm
