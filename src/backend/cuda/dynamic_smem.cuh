#pragma once
// A kernel's dynamic shared memory limit is a property of the kernel on one
// device: with one backend per GPU (tensor parallelism) every device needs its
// own cudaFuncSetAttribute, and the rank threads launch concurrently, so a
// process-wide "configured" flag is not enough.

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <vector>

namespace hyllm::cuda {

// Lets `kernel` launch with `bytes` of dynamic shared memory on the calling
// thread's current device; calls the runtime only when that limit must grow.
// max_shared_carveout: the first call on a device also asks for all of the
// SM's unified memory as shared memory, for kernels whose blocks fit side by
// side only then (L1's default share would hold them to fewer an SM).
inline void allow_dynamic_smem(const void* kernel, size_t bytes, bool max_shared_carveout = false) {
  struct Raised {
    const void* kernel;
    int device;
    size_t bytes;
  };
  static std::mutex mu;
  static std::vector<Raised> raised;
  int device = 0;
  cudaGetDevice(&device);
  std::lock_guard lk(mu);
  for (Raised& r : raised) {
    if (r.kernel != kernel || r.device != device) continue;
    if (r.bytes < bytes) {
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
      r.bytes = bytes;
    }
    return;
  }
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (max_shared_carveout) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  }
  raised.push_back({kernel, device, bytes});
}

}  // namespace hyllm::cuda
