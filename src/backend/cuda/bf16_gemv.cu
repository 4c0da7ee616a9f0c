// y[m, n] = sum_k x[m, k] W[n, k] for 1..8 rows of x and a narrow W (the GDN
// b|a projection, 35B-A3B's o_proj/out_proj) at decode: one warp
// per output column n, which streams W's row n once, 16 bytes per lane per
// load with up to kLoads loads in flight, and dots it with every x row (read
// through L1: all warps of a block share them). The fp32 sum of a lane's
// terms in K order, then a warp tree, then one rounding to bf16 (or none for
// an f32 output); ops.h's linear fixes no summation order.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/bf16_gemv.h"

namespace hyllm::cuda {
namespace {

constexpr int kLoads = 16;  // 16-byte weight loads in flight per lane

__device__ __forceinline__ uint4 load_weights16(const uint16_t* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

template <int MT>
__global__ void bf16_gemv_kernel(Bf16GemvParams p) {
  const int warps = blockDim.x / 32, lane = threadIdx.x & 31;
  const int n = blockIdx.x * warps + threadIdx.x / 32;
  if (n >= p.N) return;
  const int chunks = p.K / 8;
  const uint16_t* wrow = p.w + static_cast<int64_t>(n) * p.K;
  float acc[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m] = 0.0f;
  for (int c0 = 0; c0 < chunks; c0 += 32 * kLoads) {
    uint4 wv[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int c = c0 + j * 32 + lane;
      wv[j] = c < chunks ? load_weights16(wrow + c * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int c = c0 + j * 32 + lane;
      if (c >= chunks) break;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if (m < p.M) {
          const uint4 xv = *reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(m) * p.K + c * 8);
          acc[m] = dot8(wv[j], xv, acc[m]);
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const float v = warp_sum(acc[m]);
    if (lane == m && m < p.M) {
      const int64_t o = static_cast<int64_t>(m) * p.N + n;
      if (p.out_f32) {
        static_cast<float*>(p.out)[o] = v;
      } else {
        static_cast<uint16_t*>(p.out)[o] = f2bf(v);
      }
    }
  }
}

template <int MT>
void launch_mt(const Bf16GemvParams& p, cudaStream_t stream) {
  // Narrow outputs: fewer warps per block, so that more SMs stream.
  const int warps = p.N >= 1024 ? 8 : 2;
  bf16_gemv_kernel<MT><<<ceil_div(p.N, warps), warps * 32, 0, stream>>>(p);
}

}  // namespace

bool bf16_gemv_fits(const Bf16GemvParams& p) {
  return p.M >= 1 && p.M <= kBf16GemvMaxRows && p.N >= 1 && p.N <= kBf16GemvMaxOut && p.K >= 8 && p.K % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
}

void launch_bf16_gemv(const Bf16GemvParams& p, cudaStream_t stream) {
  if (p.M <= 1) {
    launch_mt<1>(p, stream);
  } else if (p.M <= 2) {
    launch_mt<2>(p, stream);
  } else if (p.M <= 4) {
    launch_mt<4>(p, stream);
  } else {
    launch_mt<8>(p, stream);
  }
}

}  // namespace hyllm::cuda
