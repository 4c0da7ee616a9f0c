#pragma once
// Launcher of the online weight quantisation (see launch/dense.h for the
// conventions of these headers).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace hyllm::cuda {

// ops.h quantize_weight_fp8: w (bf16 bits, n elements) -> out (e4m3 codes)
// with one scale written to all scale_n elements of scale. `amax_scratch` is
// 4 bytes of device memory the launch may overwrite.
void launch_quantize_weight_fp8(const uint16_t* w, size_t n, uint8_t* out, float* scale, size_t scale_n,
                                uint32_t* amax_scratch, cudaStream_t stream);

}  // namespace hyllm::cuda
