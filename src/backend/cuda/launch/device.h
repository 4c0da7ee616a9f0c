#pragma once
// Facts of the device that choose among the kernels (see launch/dense.h for
// the conventions of these headers).

#include <cuda_runtime.h>

namespace hyllm::cuda {

// True when `device` runs this build's sm_90a kernels (warpgroup MMAs, tensor
// maps: the grouped MoE GEMMs, the TMA MoE up projection, paged attention's
// prefill tiles); other architectures in the build compile those empty.
bool sm90a_kernels_supported(int device);

}  // namespace hyllm::cuda
