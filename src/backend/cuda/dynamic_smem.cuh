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
inline void allow_dynamic_smem(const void* kernel, size_t bytes) {
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
  raised.push_back({kernel, device, bytes});
}

}  // namespace hyllm::cuda
