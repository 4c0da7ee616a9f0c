// What the device can run of this build's kernels.
#include "backend/cuda/launch/device.h"

namespace hyllm::cuda {

bool sm90a_kernels_supported(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
}

}  // namespace hyllm::cuda
