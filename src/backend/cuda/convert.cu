// f32 <-> bf16 conversion of whole tensors (the collectives' f32 staging).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/convert.h"

namespace hyllm::cuda {
namespace {

__global__ void convert_float_kernel(const void* src, bool src_f32, void* dst, bool dst_f32, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = load_float(src, src_f32, static_cast<int64_t>(i));
    if (dst_f32) static_cast<float*>(dst)[i] = v;
    else static_cast<uint16_t*>(dst)[i] = f2bf(v);
  }
}

}  // namespace

void launch_convert_float(const void* src, bool src_f32, void* dst, bool dst_f32, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const size_t blocks = (n + 255) / 256;
  convert_float_kernel<<<static_cast<unsigned>(blocks < 132 * 8 ? blocks : 132 * 8), 256, 0, stream>>>(
      src, src_f32, dst, dst_f32, n);
}

}  // namespace hyllm::cuda
