#pragma once
// Device side of FP8 activation quantisation (ops.h ActQuantMode), shared by
// every kernel that writes an Fp8Activation: the same arithmetic as the CPU
// reference (cpu_quantize.cpp), so fused and unfused paths agree bit for bit.

#include <cuda_fp8.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/fp8.h"

namespace hyllm::cuda {

inline constexpr int kFp8Group = 128;

// e4m3 code of clamp(v, -448, 448), round to nearest even.
__device__ __forceinline__ uint8_t e4m3_code(float v) {
  v = fminf(fmaxf(v, -448.0f), 448.0f);
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// One warp quantises column group `group` (128 columns) of row `row`, whose
// bf16 values are vals[0, cols) (global or shared memory): lane l takes
// columns 4l .. 4l+3 of the group.
__device__ __forceinline__ void quantize_group_warp(const uint16_t* vals, int group, int row, const Fp8Out& o) {
  const int lane = threadIdx.x & 31;
  const int k = group * kFp8Group + lane * 4;
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = k + i < o.cols ? bf2f(vals[k + i]) : 0.0f;
    amax = fmaxf(amax, fabsf(v[i]));
  }
  float s;
  if (o.group_scales) {
    s = __fdiv_rn(fmaxf(warp_max(amax), 1e-10f), 448.0f);
    if (lane == 0) o.scale[static_cast<int64_t>(group) * o.rows + row] = s;
  } else {
    s = *o.static_scale;
  }
  uint8_t* dst = o.q + static_cast<int64_t>(row) * o.cols + k;
  if (k + 4 <= o.cols && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
    uint32_t packed = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(e4m3_code(__fdiv_rn(v[i], s))) << (8 * i);
    *reinterpret_cast<uint32_t*>(dst) = packed;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (k + i < o.cols) dst[i] = e4m3_code(__fdiv_rn(v[i], s));
  }
}

// The warps of the block quantise row `row` (bf16 values at vals).
__device__ __forceinline__ void quantize_row_block(const uint16_t* vals, int row, const Fp8Out& o) {
  const int groups = (o.cols + kFp8Group - 1) / kFp8Group;
  for (int g = threadIdx.x / 32; g < groups; g += blockDim.x / 32) quantize_group_warp(vals, g, row, o);
}

}  // namespace hyllm::cuda
