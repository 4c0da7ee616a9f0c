// y[m, n] = sum_k x[m, k] W[n, k] for 1..8 rows of x and a narrow W (the GDN
// b|a projection, 35B-A3B's o_proj/out_proj) at decode: one warp per output
// column n, which streams W's row n once, 16 bytes per lane per load with up
// to kLoads loads in flight, and dots it with every x row (staged in shared
// memory by the block). The fp32 sum of a lane's terms in K order, then a
// warp tree, then one rounding to bf16 (or none for an f32 output); ops.h's
// linear fixes no summation order.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/dynamic_smem.cuh"
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

// Weights [c0, c0 + 32 * kLoads) chunks of the warp's row, zeros past the row.
__device__ __forceinline__ void load_weight_tile(const uint16_t* wrow, int c0, int chunks, bool live, uint4 (&wv)[kLoads]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int c = c0 + j * 32 + lane;
    wv[j] = live && c < chunks ? load_weights16(wrow + c * 8) : make_uint4(0, 0, 0, 0);
  }
}

template <int MT>
__global__ void bf16_gemv_kernel(Bf16GemvParams p) {
  extern __shared__ uint4 xs[];  // the x rows, [M][K / 8] chunks of 8
  const int warps = blockDim.x / 32, lane = threadIdx.x & 31;
  const int n = blockIdx.x * warps + threadIdx.x / 32;
  const bool live = n < p.N;
  const int chunks = p.K / 8;
  const uint16_t* wrow = p.w + static_cast<int64_t>(live ? n : 0) * p.K;
  // The first weight tile is in flight while the block stages x: both wait
  // one memory round trip together, and the products then read x from
  // shared memory instead of one dependent L2 load per chunk. Launched
  // programmatically, the tile is asked for before the kernel that writes x
  // ends; x and every write of this kernel come after the wait.
  uint4 wv[kLoads];
  load_weight_tile(wrow, 0, chunks, live, wv);
  wait_for_prerequisite();
  allow_dependents();  // the next kernel (the GDN conv) may take its weights meanwhile
  // Asynchronous copies, all in flight at once: a narrow W's block has few
  // threads, and a plain load-then-store loop would wait one L2 round trip
  // per pass over x (ten passes for a 5120-wide row and two warps).
  const uint4* xg = reinterpret_cast<const uint4*>(p.x);
  for (int i = threadIdx.x; i < p.M * chunks; i += blockDim.x) cp_async16(xs + i, xg + i, true);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  if (!live) return;
  float acc[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m] = 0.0f;
  for (int c0 = 0; c0 < chunks; c0 += 32 * kLoads) {
    if (c0 > 0) load_weight_tile(wrow, c0, chunks, true, wv);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int c = c0 + j * 32 + lane;
      if (c < chunks) {
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (m < p.M) acc[m] = dot8(wv[j], xs[m * chunks + c], acc[m]);
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
  const size_t smem = static_cast<size_t>(p.M) * p.K * 2;
  if (smem > 48 * 1024) allow_dynamic_smem(reinterpret_cast<const void*>(bf16_gemv_kernel<MT>), kBf16GemvMaxXBytes);
  launch_maybe_pdl(bf16_gemv_kernel<MT>, true, dim3(ceil_div(p.N, warps)), warps * 32, smem, stream, p);
}

}  // namespace

bool bf16_gemv_fits(const Bf16GemvParams& p) {
  return p.M >= 1 && p.M <= kBf16GemvMaxRows && p.N >= 1 && p.N <= kBf16GemvMaxOut && p.K >= 8 && p.K % 8 == 0 &&
         static_cast<int64_t>(p.M) * p.K * 2 <= kBf16GemvMaxXBytes && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
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
