// f32 <-> bf16 conversion of whole tensors (the collectives' f32 staging).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/convert.h"

namespace hyllm::cuda {
namespace {

// Launched programmatically (cuda_common.cuh): it waits for its prerequisite
// (the producer of src, or the collective that reduced it) before reading or
// writing, and allows the next launch once its loop is done.
__global__ void convert_float_kernel(const void* src, bool src_f32, void* dst, bool dst_f32, size_t n) {
  wait_for_prerequisite();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = load_float(src, src_f32, static_cast<int64_t>(i));
    if (dst_f32) static_cast<float*>(dst)[i] = v;
    else static_cast<uint16_t*>(dst)[i] = f2bf(v);
  }
  allow_dependents();
}

}  // namespace

void launch_convert_float(const void* src, bool src_f32, void* dst, bool dst_f32, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const size_t blocks = (n + 255) / 256;
  launch_after_prerequisite(convert_float_kernel, static_cast<unsigned>(blocks < 132 * 8 ? blocks : 132 * 8), 256, 0,
                            stream, src, src_f32, dst, dst_f32, n);
}

}  // namespace hyllm::cuda
