// Block-FP8 expert weights to bf16 for the grouped (wgmma) expert GEMMs.
//
// Prefill and large batches route rows to nearly every expert, so the grouped
// kernels read every expert's weights once per layer; they take bf16
// operands, so block-FP8 experts are first expanded into bf16 scratch (one
// read of the codes, one write and one read of bf16). The decode regime reads
// the codes directly (moe_small_fp8.cu).
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/launch/moe.h"

namespace hyllm::cuda {
namespace {

constexpr int kCodesPerThread = 16;  // one 16-byte load; never crosses a 128-column block

__device__ __forceinline__ uint32_t bf16x2(float a, float b) {
  const uint32_t lo = __float_as_uint(a), hi = __float_as_uint(b);
  // Round to nearest even, as every bf16 conversion in the backend.
  const uint32_t rl = (lo + 0x7fffu + ((lo >> 16) & 1u)) >> 16;
  const uint32_t rh = (hi + 0x7fffu + ((hi >> 16) & 1u)) >> 16;
  return rl | (rh << 16);
}

// 16 codes (16-byte aligned) times one scale, as 16 bf16 values.
__device__ __forceinline__ void expand16(const uint8_t* src, float scale, uint16_t* dst) {
  const uint4 codes = *reinterpret_cast<const uint4*>(src);
  const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t packed[8];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>((words[w] >> (16 * h)) & 0xffffu);
      const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&raw));
      packed[2 * w + h] = bf16x2(f.x * scale, f.y * scale);
    }
  }
  uint4* out = reinterpret_cast<uint4*>(dst);
  out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
}

// grid.y = expert (experts == the shared expert when it is present).
__global__ void dequant_experts_kernel(MoeDequantFp8Params p) {
  const int e = blockIdx.y;
  if (p.counts != nullptr && e < p.experts && p.counts[e] == 0) return;  // no rows routed here
  const uint8_t* q = p.q + static_cast<int64_t>(e) * p.rows * p.cols;
  const float* s = p.scale + static_cast<int64_t>(e) * p.scale_stride;
  uint16_t* out = p.out + static_cast<int64_t>(e) * p.rows * p.cols;
  const int cb = p.cols / 128;
  const int64_t chunks = static_cast<int64_t>(p.rows) * p.cols / kCodesPerThread;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t first = i * kCodesPerThread;
    const int r = static_cast<int>(first / p.cols), c = static_cast<int>(first % p.cols);
    const float scale = s[(r / 128) * cb + c / 128];
    expand16(q + first, scale, out + first);
  }
}

// x[t][c] = bf16(code * scale[c / 128][t]) (group-major scales).
__global__ void dequant_activation_kernel(MoeDequantActivationParams p) {
  const int64_t chunks = static_cast<int64_t>(p.tokens) * p.hidden / kCodesPerThread;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t first = i * kCodesPerThread;
    const int t = static_cast<int>(first / p.hidden), c = static_cast<int>(first % p.hidden);
    const float scale = p.scale[static_cast<int64_t>(c / 128) * p.scale_ld + t];
    expand16(p.q + first, scale, p.out + first);
  }
}

// Block x = slot (routed experts, then the shared expert); its warps take
// (row, 128-column group) items in turn.
__global__ void fake_quant_hidden_kernel(MoeFakeQuantHiddenParams p) {
  const int s = blockIdx.x;
  if (s >= *p.plan.num_slots) return;
  const int width = p.plan.slot_expert[s] == p.experts ? p.shared_inter : p.inter;
  const int groups = (width + kFp8Group - 1) / kFp8Group;
  const int64_t begin = p.plan.slot_pos[s], items = static_cast<int64_t>(p.plan.slot_rows[s]) * groups;
  const int warps = blockDim.x / 32, lane = threadIdx.x & 31;
  for (int64_t item = static_cast<int64_t>(blockIdx.y) * warps + threadIdx.x / 32; item < items;
       item += static_cast<int64_t>(gridDim.y) * warps) {
    uint16_t* row = p.hidden + (begin + item / groups) * p.hidden_ld;
    const int k = static_cast<int>(item % groups) * kFp8Group + lane * 4;
    float v[4];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[i] = k + i < width ? bf2f(row[k + i]) : 0.0f;
      amax = fmaxf(amax, fabsf(v[i]));
    }
    const float scale = __fdiv_rn(fmaxf(warp_max(amax), 1e-10f), 448.0f);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (k + i >= width) continue;
      const __half_raw code = __nv_cvt_fp8_to_halfraw(e4m3_code(__fdiv_rn(v[i], scale)), __NV_E4M3);
      row[k + i] = f2bf(__half2float(*reinterpret_cast<const __half*>(&code)) * scale);
    }
  }
}

}  // namespace

void launch_moe_fake_quant_hidden(const MoeFakeQuantHiddenParams& p, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // Up to 16 blocks per slot: enough to cover a hot expert's rows in one wave.
  fake_quant_hidden_kernel<<<dim3(p.experts + 1, 16), kThreads, 0, stream>>>(p);
}

void launch_moe_dequant_activation(const MoeDequantActivationParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  const int64_t chunks = static_cast<int64_t>(p.tokens) * p.hidden / kCodesPerThread;
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((chunks + kThreads - 1) / kThreads, 1024));
  dequant_activation_kernel<<<blocks, kThreads, 0, stream>>>(p);
}

void launch_moe_dequant_fp8(const MoeDequantFp8Params& p, cudaStream_t stream) {
  if (p.rows == 0 || p.cols == 0 || p.experts_launched == 0) return;
  const int64_t chunks = static_cast<int64_t>(p.rows) * p.cols / kCodesPerThread;
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((chunks + kThreads - 1) / kThreads, 64));
  dequant_experts_kernel<<<dim3(blocks, p.experts_launched), kThreads, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
