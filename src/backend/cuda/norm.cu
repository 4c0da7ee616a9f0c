// RMSNorm with the fused residual add, and the GDN gated RMSNorm.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/launch/dense.h"

namespace hyllm::cuda {
namespace {

// Warps (heads) per block of the warp-per-head gated RMSNorm.
constexpr int kHeadWarps = 4;

// One block per row. The row's (rounded) residual sum is kept in shared memory
// as bf16, which is exact because the op rounds it to bf16 anyway; with an FP8
// output each thread then overwrites its own elements there with the bf16
// result, which the block quantises.
template <int VEC>
__global__ void rms_norm_kernel(RmsNormParams p) {
  extern __shared__ uint16_t s_row[];
  __shared__ float red[32];
  if (p.fp8.q) allow_dependents();  // the FP8 linears reading q start their weight stream
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

// Weight values w[i .. i+N-1] (N = 4 or 8) as floats, vectorised when
// aligned; columns at and beyond n read as zero.
template <int N>
__device__ __forceinline__ void load_weights(const void* w, bool is_f32, int i, int n, float (&o)[N]) {
  if (i + N <= n && is_f32 && (reinterpret_cast<uintptr_t>(static_cast<const float*>(w) + i) & 15) == 0) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const float4 f = reinterpret_cast<const float4*>(static_cast<const float*>(w) + i)[q];
      o[4 * q] = f.x, o[4 * q + 1] = f.y, o[4 * q + 2] = f.z, o[4 * q + 3] = f.w;
    }
  } else if (i + N <= n && !is_f32 && (reinterpret_cast<uintptr_t>(static_cast<const uint16_t*>(w) + i) & (2 * N - 1)) == 0) {
    uint32_t raw[N / 2];
    if constexpr (N == 8) {
      const uint4 r = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w) + i);
      raw[0] = r.x, raw[1] = r.y, raw[2] = r.z, raw[3] = r.w;
    } else {
      const uint2 r = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(w) + i);
      raw[0] = r.x, raw[1] = r.y;
    }
#pragma unroll
    for (int q = 0; q < N / 2; ++q) {
      o[2 * q] = __uint_as_float(raw[q] << 16);
      o[2 * q + 1] = __uint_as_float(raw[q] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) o[q] = i + q < n ? load_float(w, is_f32, i + q) : 0.0f;
  }
}

// The register form, for few rows: one block per row with enough threads that
// each holds CH chunks of 8 columns (chunk c = threadIdx.x + j * blockDim.x)
// in registers from the load to the store, so there is one pass over global
// memory and no shared-memory row; all warps quantise (16 lanes per group).
// Needs width % 8 == 0 and 16-byte aligned x, out, residual_in, residual_out.
template <int CH>
__global__ void __launch_bounds__(1024) rms_norm_regs_kernel(RmsNormParams p) {
  __shared__ float red[32];
  if (p.fp8.q) allow_dependents();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * p.width;
  const int chunks = p.width / 8;
  // Launched programmatically: the norm weights, which no kernel writes, are
  // read while the kernel that writes x still runs; x, the residual and
  // every write of this kernel come after the wait.
  float w[CH][8];
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < chunks) load_weights<8>(p.weight, p.weight_f32, 8 * c, p.width, w[j]);
  }
  wait_for_prerequisite();
  float v[CH][8];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
#pragma unroll
    for (int q = 0; q < 8; ++q) v[j][q] = 0.0f;
    if (c >= chunks) continue;
    const int64_t at = base + 8 * c;
    unpack8(*reinterpret_cast<const uint4*>(p.x + at), v[j]);
    if (p.residual_in) {
      float r[8];
      unpack8(*reinterpret_cast<const uint4*>(p.residual_in + at), r);
#pragma unroll
      for (int q = 0; q < 8; ++q) v[j][q] = round_bf(v[j][q] + r[q]);
    }
    if (p.residual_out) *reinterpret_cast<uint4*>(p.residual_out + at) = pack8(v[j]);
#pragma unroll
    for (int q = 0; q < 8; ++q) sum_sq += v[j][q] * v[j][q];
  }
  sum_sq = block_sum(sum_sq, red);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.width) + p.eps);
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    float o[8] = {};
    if (c < chunks) {
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const float wq = p.plus_one ? w[j][q] + 1.0f : w[j][q];
        o[q] = round_bf(__fmul_rn(__fmul_rn(v[j][q], inv), wq));
      }
      if (p.out) *reinterpret_cast<uint4*>(p.out + base + 8 * c) = pack8(o);
    }
    if (p.fp8.q) quantize_group_regs<8>(o, 8 * c, blockIdx.x, p.fp8);
  }
}

// Head dims that are multiples of 128 (every Qwen3.5 GDN head): a half-warp
// per (row, head), lane l of the half holding columns 8l .. 8l+7 of each of
// the head's kChunks 128-column groups. x, z and the weights stay in
// registers from their loads (all asked for at once, the weights before the
// wait) to the store: one memory round trip. A warp takes two heads; the sum
// of squares and the group maxima are half-warp reductions.
template <bool FP8, int kChunks>
__global__ void gated_rms_norm_half_warp_kernel(GatedRmsNormParams p) {
  if constexpr (FP8) allow_dependents();
  const int lane = threadIdx.x & 15;
  float w[kChunks][8];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) load_weights<8>(p.weight, p.weight_f32, 128 * c + 8 * lane, p.head_dim, w[c]);
  wait_for_prerequisite();  // launched programmatically: x and z come from the kernels before
  const int64_t total = static_cast<int64_t>(p.rows) * p.num_heads;
  const int64_t warp_first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * 2;
  if (warp_first >= total) return;  // whole warps
  // The second half of the warp past the last head (an odd count) repeats
  // the last head's arithmetic, for the shuffles, and writes nothing.
  const int64_t want = warp_first + ((threadIdx.x >> 4) & 1);
  const bool live = want < total;
  // (row, head) items fit 32 bits: heads are 128 columns or more.
  const uint32_t item = static_cast<uint32_t>(live ? want : total - 1), heads = static_cast<uint32_t>(p.num_heads);
  const int t = static_cast<int>(item / heads), h = static_cast<int>(item % heads);
  const int64_t W = static_cast<int64_t>(p.num_heads) * p.head_dim;
  const uint16_t* x = p.x + t * W + static_cast<int64_t>(h) * p.head_dim;
  const uint16_t* z = p.z + t * p.z_stride + static_cast<int64_t>(h) * p.head_dim;
  float xv[kChunks][8], zv[kChunks][8];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    load_bf16<8>(x, 128 * c + 8 * lane, p.head_dim, xv[c]);
    load_bf16<8>(z, 128 * c + 8 * lane, p.head_dim, zv[c]);
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
#pragma unroll
    for (int i = 0; i < 8; ++i) sum_sq += xv[c][i] * xv[c][i];
  }
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, o);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.head_dim) + p.eps);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = 128 * c + 8 * lane;
    float o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float n = round_bf(__fmul_rn(xv[c][i], inv));
      o[i] = round_bf(__fmul_rn(__fmul_rn(n, w[c][i]), silu(zv[c][i])));
    }
    if (p.out != nullptr && live) store_bf16<8>(p.out + t * W + static_cast<int64_t>(h) * p.head_dim, d, p.head_dim, o);
    if constexpr (FP8) quantize_group_regs<8>(o, live ? h * p.head_dim + d : p.fp8.cols, t, p.fp8);
  }
}

// Any other head dim, bf16 output: one warp per (row, head), lane l holding
// columns 4l .. 4l+3 of each 128 columns of the head.
__global__ void gated_rms_norm_kernel(GatedRmsNormParams p) {
  wait_for_prerequisite();  // launched programmatically: x and z come from the kernels before
  const int warps = blockDim.x / 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (item >= static_cast<int64_t>(p.rows) * p.num_heads) return;
  const int t = static_cast<int>(item / p.num_heads), h = static_cast<int>(item % p.num_heads);
  const int64_t W = static_cast<int64_t>(p.num_heads) * p.head_dim;
  const uint16_t* x = p.x + t * W + static_cast<int64_t>(h) * p.head_dim;
  const uint16_t* z = p.z + t * p.z_stride + static_cast<int64_t>(h) * p.head_dim;
  uint16_t* out = p.out + t * W + static_cast<int64_t>(h) * p.head_dim;
  float sum_sq = 0.0f;
  for (int d = 4 * lane; d < p.head_dim; d += 128) {
    float v[4];
    load_bf16<4>(x, d, p.head_dim, v);
#pragma unroll
    for (int i = 0; i < 4; ++i) sum_sq += v[i] * v[i];
  }
  sum_sq = warp_sum(sum_sq);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.head_dim) + p.eps);
  for (int d = 4 * lane; d < p.head_dim; d += 128) {
    float xv[4], zv[4], w[4], o[4];
    load_bf16<4>(x, d, p.head_dim, xv);
    load_bf16<4>(z, d, p.head_dim, zv);
    load_weights<4>(p.weight, p.weight_f32, d, p.head_dim, w);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float n = round_bf(__fmul_rn(xv[i], inv));
      o[i] = d + i < p.head_dim ? round_bf(__fmul_rn(__fmul_rn(n, w[i]), silu(zv[i]))) : 0.0f;
    }
    store_bf16<4>(out, d, p.head_dim, o);
  }
}

// The FP8-output form when a quantisation group spans heads (head_dim not a
// multiple of 128): one block per row, a warp per head; the bf16 results go to
// shared memory (and to out when given), then the block quantises them.
__global__ void gated_rms_norm_fp8_kernel(GatedRmsNormParams p) {
  extern __shared__ uint16_t s_row[];
  allow_dependents();
  wait_for_prerequisite();  // launched programmatically: x and z come from the kernels before
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

template <bool FP8>
bool launch_gated_half_warp(const GatedRmsNormParams& p, int64_t items, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>(ceil_div(ceil_div(items, 2), kThreads / 32)));
  switch (p.head_dim) {
    case 128: launch_maybe_pdl(gated_rms_norm_half_warp_kernel<FP8, 1>, true, grid, kThreads, 0, stream, p); return true;
    case 256: launch_maybe_pdl(gated_rms_norm_half_warp_kernel<FP8, 2>, true, grid, kThreads, 0, stream, p); return true;
    case 512: launch_maybe_pdl(gated_rms_norm_half_warp_kernel<FP8, 4>, true, grid, kThreads, 0, stream, p); return true;
    default: return false;
  }
}

}  // namespace

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.width == 0) return;
  const size_t smem = static_cast<size_t>(p.width) * 2;
  const bool vec = p.width % 8 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.out) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.residual_in) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.residual_out) % 16 == 0;
  // The register form wherever a row fits 1,024 threads' registers: one pass
  // over global memory (decode rows need the shortest block, prefill rows the
  // fewest bytes moved); the shared-memory form for wider or unaligned rows.
  const int chunks = p.width / 8, chunks_per_thread = (chunks + 1023) / 1024;
  if (vec && chunks_per_thread <= 3) {
    const int threads = ceil_div(ceil_div(chunks, chunks_per_thread), 32) * 32;
    if (chunks_per_thread == 1) {
      launch_maybe_pdl(rms_norm_regs_kernel<1>, true, dim3(p.rows), threads, 0, stream, p);
    } else if (chunks_per_thread == 2) {
      launch_maybe_pdl(rms_norm_regs_kernel<2>, true, dim3(p.rows), threads, 0, stream, p);
    } else {
      launch_maybe_pdl(rms_norm_regs_kernel<3>, true, dim3(p.rows), threads, 0, stream, p);
    }
  } else if (vec) {
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
  if (p.fp8.enabled() ? launch_gated_half_warp<true>(p, items, stream) : launch_gated_half_warp<false>(p, items, stream))
    return;
  if (p.fp8.enabled()) {
    const size_t smem = static_cast<size_t>(p.num_heads) * p.head_dim * 2;
    if (smem > 48 * 1024)
      cudaFuncSetAttribute(gated_rms_norm_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    launch_maybe_pdl(gated_rms_norm_fp8_kernel, true, dim3(p.rows), 256, smem, stream, p);
    return;
  }
  launch_maybe_pdl(gated_rms_norm_kernel, true, dim3(ceil_div(items, kHeadWarps)), kHeadWarps * 32, 0, stream, p);
}

}  // namespace hyllm::cuda
