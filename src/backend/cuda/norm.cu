// RMSNorm with the fused residual add, and the GDN gated RMSNorm.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/launch/dense.h"

namespace hyllm::cuda {
namespace {

// One block per row. The row's (rounded) residual sum is kept in shared memory
// as bf16, which is exact because the op rounds it to bf16 anyway; with an FP8
// output each thread then overwrites its own elements there with the bf16
// result, which the block quantises.
template <int VEC>
__global__ void rms_norm_kernel(RmsNormParams p) {
  extern __shared__ uint16_t s_row[];
  __shared__ float red[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * p.width;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x * VEC; i < p.width; i += blockDim.x * VEC) {
    alignas(16) uint16_t xv[VEC], rv[VEC], sv[VEC];
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(xv) = *reinterpret_cast<const uint4*>(p.x + base + i);
      if (p.residual_in) *reinterpret_cast<uint4*>(rv) = *reinterpret_cast<const uint4*>(p.residual_in + base + i);
    } else {
      xv[0] = p.x[base + i];
      if (p.residual_in) rv[0] = p.residual_in[base + i];
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      sv[j] = p.residual_in ? f2bf(bf2f(xv[j]) + bf2f(rv[j])) : xv[j];
      const float v = bf2f(sv[j]);
      sum_sq += v * v;
    }
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(s_row + i) = *reinterpret_cast<uint4*>(sv);
      if (p.residual_out) *reinterpret_cast<uint4*>(p.residual_out + base + i) = *reinterpret_cast<uint4*>(sv);
    } else {
      s_row[i] = sv[0];
      if (p.residual_out) p.residual_out[base + i] = sv[0];
    }
  }
  sum_sq = block_sum(sum_sq, red);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.width) + p.eps);
  for (int i = threadIdx.x * VEC; i < p.width; i += blockDim.x * VEC) {
    alignas(16) uint16_t ov[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float w = load_float(p.weight, p.weight_f32, i + j);
      if (p.plus_one) w += 1.0f;
      ov[j] = f2bf(__fmul_rn(__fmul_rn(bf2f(s_row[i + j]), inv), w));
    }
    if constexpr (VEC == 8) {
      if (p.out) *reinterpret_cast<uint4*>(p.out + base + i) = *reinterpret_cast<uint4*>(ov);
      if (p.fp8.q) *reinterpret_cast<uint4*>(s_row + i) = *reinterpret_cast<uint4*>(ov);
    } else {
      if (p.out) p.out[base + i] = ov[0];
      if (p.fp8.q) s_row[i] = ov[0];
    }
  }
  if (p.fp8.q) {
    __syncthreads();
    quantize_row_block(s_row, blockIdx.x, p.fp8);
  }
}

// One warp per (row, head).
__global__ void gated_rms_norm_kernel(GatedRmsNormParams p) {
  const int warps = blockDim.x / 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (item >= static_cast<int64_t>(p.rows) * p.num_heads) return;
  const int64_t t = item / p.num_heads, h = item % p.num_heads;
  const int64_t W = static_cast<int64_t>(p.num_heads) * p.head_dim;
  const uint16_t* x = p.x + t * W + h * p.head_dim;
  const uint16_t* z = p.z + t * p.z_stride + h * p.head_dim;
  uint16_t* out = p.out + t * W + h * p.head_dim;
  float sum_sq = 0.0f;
  for (int d = lane; d < p.head_dim; d += 32) {
    const float v = bf2f(x[d]);
    sum_sq += v * v;
  }
  sum_sq = warp_sum(sum_sq);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.head_dim) + p.eps);
  for (int d = lane; d < p.head_dim; d += 32) {
    const float n = round_bf(__fmul_rn(bf2f(x[d]), inv));
    const float w = load_float(p.weight, p.weight_f32, d);
    out[d] = f2bf(__fmul_rn(__fmul_rn(n, w), silu(bf2f(z[d]))));
  }
}

// The FP8-output form: one block per row, a warp per head; the bf16 results
// go to shared memory (and to out when given), then the block quantises them.
__global__ void gated_rms_norm_fp8_kernel(GatedRmsNormParams p) {
  extern __shared__ uint16_t s_row[];
  const int t = blockIdx.x, lane = threadIdx.x & 31;
  const int64_t W = static_cast<int64_t>(p.num_heads) * p.head_dim;
  for (int h = threadIdx.x / 32; h < p.num_heads; h += blockDim.x / 32) {
    const uint16_t* x = p.x + t * W + h * p.head_dim;
    const uint16_t* z = p.z + t * p.z_stride + h * p.head_dim;
    float sum_sq = 0.0f;
    for (int d = lane; d < p.head_dim; d += 32) {
      const float v = bf2f(x[d]);
      sum_sq += v * v;
    }
    sum_sq = warp_sum(sum_sq);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.head_dim) + p.eps);
    for (int d = lane; d < p.head_dim; d += 32) {
      const float n = round_bf(__fmul_rn(bf2f(x[d]), inv));
      const float w = load_float(p.weight, p.weight_f32, d);
      const uint16_t o = f2bf(__fmul_rn(__fmul_rn(n, w), silu(bf2f(z[d]))));
      s_row[h * p.head_dim + d] = o;
      if (p.out) p.out[t * W + h * p.head_dim + d] = o;
    }
  }
  __syncthreads();
  quantize_row_block(s_row, t, p.fp8);
}

}  // namespace

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.width == 0) return;
  const size_t smem = static_cast<size_t>(p.width) * 2;
  const bool vec = p.width % 8 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.out) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.residual_in) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.residual_out) % 16 == 0;
  if (vec) {
    const int threads = p.width >= 2048 ? 256 : 128;
    if (smem > 48 * 1024) cudaFuncSetAttribute(rms_norm_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    rms_norm_kernel<8><<<p.rows, threads, smem, stream>>>(p);
  } else {
    if (smem > 48 * 1024) cudaFuncSetAttribute(rms_norm_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    rms_norm_kernel<1><<<p.rows, 256, smem, stream>>>(p);
  }
}

void launch_gated_rms_norm(const GatedRmsNormParams& p, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(p.rows) * p.num_heads;
  if (items == 0) return;
  if (p.fp8.enabled()) {
    const size_t smem = static_cast<size_t>(p.num_heads) * p.head_dim * 2;
    if (smem > 48 * 1024)
      cudaFuncSetAttribute(gated_rms_norm_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    gated_rms_norm_fp8_kernel<<<p.rows, 256, smem, stream>>>(p);
    return;
  }
  const int warps = 8;
  gated_rms_norm_kernel<<<ceil_div(items, warps), warps * 32, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
