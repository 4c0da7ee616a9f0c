// Counter-based random fill (SplitMix64 of seed ^ index) for dummy weights.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/fill.h"
#include "tensor/float_conversions.h"
#include "util/counter_rng.h"

namespace hyllm::cuda {
namespace {

__global__ void fill_kernel(void* dst, bool f32, size_t n, uint64_t seed, float mean, float scale) {
  const uint64_t key = rng::mix(seed);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t bits = rng::mix(key ^ i);
    const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    const float v = mean + scale * (2.0f * u - 1.0f);
    if (f32) {
      static_cast<float*>(dst)[i] = v;
    } else {
      static_cast<uint16_t*>(dst)[i] = f2bf(v);
    }
  }
}

// util/counter_rng.h, restated with explicit roundings so that no multiply-add
// is contracted: the bytes equal the CPU backend's.
__device__ __forceinline__ float uniform01(uint64_t bits) {
  return __fmul_rn(static_cast<float>(bits >> 40), 1.0f / 16777216.0f);
}
__device__ __forceinline__ float normal(uint64_t bits) {
  float s = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    s = __fadd_rn(s, __fmul_rn(static_cast<float>((bits >> (16 * k)) & 0xffff), 1.0f / 65536.0f));
  }
  return __fmul_rn(__fsub_rn(s, 2.0f), 1.7320508f);
}

template <bool kNormal, FillType kType>
__global__ void fill_random_kernel(void* dst, size_t n, uint64_t stream, float offset, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t bits = rng::mix(stream + i);
    const float v = __fadd_rn(offset, __fmul_rn(scale, kNormal ? normal(bits) : uniform01(bits)));
    if constexpr (kType == FillType::kF32) {
      static_cast<float*>(dst)[i] = v;
    } else if constexpr (kType == FillType::kBF16) {
      static_cast<uint16_t*>(dst)[i] = f2bf(v);
    } else {
      static_cast<uint8_t*>(dst)[i] = f32_to_f8e4m3(v);
    }
  }
}

template <FillType kType>
void launch_typed(void* dst, size_t n, uint64_t stream, bool normal, float offset, float scale, cudaStream_t s) {
  const dim3 grid(132 * 16), block(256);
  if (normal) {
    fill_random_kernel<true, kType><<<grid, block, 0, s>>>(dst, n, stream, offset, scale);
  } else {
    fill_random_kernel<false, kType><<<grid, block, 0, s>>>(dst, n, stream, offset, scale);
  }
}

}  // namespace

void launch_fill_random(void* dst, FillType type, size_t n, uint64_t stream, bool normal, float offset, float scale,
                        cudaStream_t s) {
  if (n == 0) return;
  switch (type) {
    case FillType::kF32: launch_typed<FillType::kF32>(dst, n, stream, normal, offset, scale, s); break;
    case FillType::kBF16: launch_typed<FillType::kBF16>(dst, n, stream, normal, offset, scale, s); break;
    case FillType::kE4M3: launch_typed<FillType::kE4M3>(dst, n, stream, normal, offset, scale, s); break;
  }
}

void launch_fill_uniform(void* dst, bool f32, size_t n, uint64_t seed, float mean, float scale, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<<<132 * 8, 256, 0, stream>>>(dst, f32, n, seed, mean, scale);
}

}  // namespace hyllm::cuda
