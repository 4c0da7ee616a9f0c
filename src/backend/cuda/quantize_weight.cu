// Online per-tensor FP8 quantisation of a weight: one pass for the amax (a
// block reduction, then an atomic max on the float's bits, which orders
// non-negative floats), one pass for the codes and the scale cells. The codes
// are those of the CPU reference, bit for bit (IEEE division, the shared
// e4m3 conversion).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/quantize.h"
#include "tensor/float_conversions.h"

namespace hyllm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kE4M3Max = 448.0f;
constexpr float kAmaxFloor = 1e-10f;  // ops.h kFp8GroupAmaxFloor

__global__ void amax_kernel(const uint16_t* w, size_t n, uint32_t* amax_bits) {
  __shared__ float red[32];
  float m = 0.0f;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    m = fmaxf(m, fabsf(bf2f(w[i])));  // fmaxf skips a NaN, as the reference does
  }
  m = warp_max(m);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = warp_max(lane < static_cast<int>(blockDim.x >> 5) ? red[lane] : 0.0f);
    if (lane == 0) atomicMax(amax_bits, __float_as_uint(m));
  }
}

__global__ void quantize_kernel(const uint16_t* w, size_t n, uint8_t* out, float* scale, size_t scale_n,
                                const uint32_t* amax_bits) {
  const float s = __fdiv_rn(fmaxf(__uint_as_float(*amax_bits), kAmaxFloor), kE4M3Max);
  const size_t total = n > scale_n ? n : scale_n;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (i < n) {
      const float q = __fdiv_rn(bf2f(w[i]), s);
      out[i] = f32_to_f8e4m3(q > kE4M3Max ? kE4M3Max : (q < -kE4M3Max ? -kE4M3Max : q));
    }
    if (i < scale_n) scale[i] = s;
  }
}

}  // namespace

void launch_quantize_weight_fp8(const uint16_t* w, size_t n, uint8_t* out, float* scale, size_t scale_n,
                                uint32_t* amax_scratch, cudaStream_t stream) {
  cudaMemsetAsync(amax_scratch, 0, sizeof(uint32_t), stream);
  const size_t total = n > scale_n ? n : scale_n;
  const int blocks = static_cast<int>(total / kThreads + 1 < 132 * 8 ? total / kThreads + 1 : 132 * 8);
  if (n > 0) amax_kernel<<<blocks, kThreads, 0, stream>>>(w, n, amax_scratch);
  quantize_kernel<<<blocks, kThreads, 0, stream>>>(w, n, out, scale, scale_n, amax_scratch);
}

}  // namespace hyllm::cuda
