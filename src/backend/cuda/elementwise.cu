// SwiGLU, embedding lookup, row gathers and FP8 activation quantisation:
// bandwidth-bound row kernels.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/launch/dense.h"

namespace hyllm::cuda {
namespace {

template <int VEC>
__global__ void swiglu_kernel(SwigluParams p) {
  const int64_t per_row = p.inter / VEC;
  const int64_t n = per_row * p.rows;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / per_row, c = (i % per_row) * VEC;
    const uint16_t* row = p.x + t * p.x_stride;
    alignas(16) uint16_t g[VEC], u[VEC], o[VEC];
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(g) = *reinterpret_cast<const uint4*>(row + c);
      *reinterpret_cast<uint4*>(u) = *reinterpret_cast<const uint4*>(row + p.inter + c);
    } else {
      g[0] = row[c];
      u[0] = row[p.inter + c];
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = f2bf(__fmul_rn(silu(bf2f(g[j])), bf2f(u[j])));
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(p.out + t * p.inter + c) = *reinterpret_cast<uint4*>(o);
    } else {
      p.out[t * p.inter + c] = o[0];
    }
  }
}

// The FP8-output kernels below give each warp one (row, 128-column group):
// lane l holds columns 4l .. 4l+3 of the group in registers, so a row is
// spread over ceil(groups / kGroupWarps) blocks and even one row fills
// several SMs. The grid is rows * blocks_per_row blocks of kGroupWarps warps.
constexpr int kGroupWarps = 4;

struct GroupSlot {
  int row;
  int k;      // first of the lane's 4 columns
  bool live;  // false for the warps past the row's last group (whole warps)
};

__device__ __forceinline__ GroupSlot group_slot(int cols) {
  const int groups = (cols + kFp8Group - 1) / kFp8Group;
  const int blocks_per_row = (groups + kGroupWarps - 1) / kGroupWarps;
  const int group = static_cast<int>(blockIdx.x % blocks_per_row) * kGroupWarps + static_cast<int>(threadIdx.x / 32);
  return {static_cast<int>(blockIdx.x / blocks_per_row), group * kFp8Group + static_cast<int>(threadIdx.x & 31) * 4,
          group < groups};
}

inline int group_blocks(int rows, int cols) {
  const int groups = (cols + kFp8Group - 1) / kFp8Group;
  return rows * ((groups + kGroupWarps - 1) / kGroupWarps);
}

// The FP8-output SwiGLU: the bf16 results (also written to out when given)
// are quantised from registers.
__global__ void swiglu_fp8_kernel(SwigluParams p) {
  allow_dependents();  // the FP8 linears reading the codes start their weight stream
  const GroupSlot s = group_slot(p.inter);
  if (!s.live) return;
  const uint16_t* row = p.x + static_cast<int64_t>(s.row) * p.x_stride;
  float g[4], u[4], o[4];
  load4_bf16(row, s.k, p.inter, g);
  load4_bf16(row + p.inter, s.k, p.inter, u);
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = s.k + i < p.inter ? round_bf(__fmul_rn(silu(g[i]), u[i])) : 0.0f;
  if (p.out) store4_bf16(p.out + static_cast<int64_t>(s.row) * p.inter, s.k, p.inter, o);
  quantize_group_regs<4>(o, s.k, s.row, p.fp8);
}

// Launched programmatically: its blocks are resident before the kernel that
// writes x ends, and wait only for x.
__global__ void quantize_fp8_kernel(QuantizeFp8Params p) {
  allow_dependents();
  wait_for_prerequisite();
  const GroupSlot s = group_slot(p.out.cols);
  if (!s.live) return;
  float v[4];
  load4_bf16(p.x + static_cast<int64_t>(s.row) * p.x_stride, s.k, p.out.cols, v);
  quantize_group_regs<4>(v, s.k, s.row, p.out);
}

// Copies `row_bytes` from src to dst with one block, 16 bytes at a time when
// both are aligned.
__device__ __forceinline__ void copy_row(char* dst, const char* src, int64_t row_bytes) {
  if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int64_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x) {
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    }
  } else {
    for (int64_t i = threadIdx.x; i < row_bytes; i += blockDim.x) dst[i] = src[i];
  }
}

__global__ void embedding_kernel(EmbeddingParams p) {
  const int t = blockIdx.x;
  const int64_t row = static_cast<int64_t>(p.ids[t]) - p.vocab_start;
  char* dst = reinterpret_cast<char*>(p.out + static_cast<int64_t>(t) * p.width);
  const int64_t row_bytes = static_cast<int64_t>(p.width) * 2;
  if (row < 0 || row >= p.vocab) {
    // Ids outside the table give zeros on the GPU (ops.h), and so do the
    // other ranks' ids of a vocabulary-parallel table: nothing is read.
    for (int64_t i = threadIdx.x; i < row_bytes; i += blockDim.x) dst[i] = 0;
    return;
  }
  copy_row(dst, reinterpret_cast<const char*>(p.table + row * p.width), row_bytes);
}

__global__ void gather_rows_kernel(GatherRowsParams p) {
  const int r = blockIdx.x;
  const int32_t idx = p.indices[r];
  char* dst = static_cast<char*>(p.out) + static_cast<int64_t>(r) * p.row_bytes;
  if (idx < 0 || idx >= p.src_rows) {
    for (int64_t i = threadIdx.x; i < p.row_bytes; i += blockDim.x) dst[i] = 0;
    return;
  }
  copy_row(dst, static_cast<const char*>(p.src) + static_cast<int64_t>(idx) * p.row_bytes, p.row_bytes);
}

__global__ void pack_group_scales_kernel(PackGroupScalesParams p) {
  const int64_t scales = static_cast<int64_t>(p.groups) * p.ld, n = scales + p.room_bytes;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i >= scales) {
      p.room_codes[i - scales] = 0;
      continue;
    }
    const int64_t g = i / p.ld;
    const int t = static_cast<int>(i % p.ld);
    p.dst[i] = t < p.rows ? p.src[g * p.rows + t] : 0.0f;
  }
}

}  // namespace

void launch_swiglu(const SwigluParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.inter == 0) return;
  if (p.fp8.enabled()) {
    swiglu_fp8_kernel<<<group_blocks(p.rows, p.inter), kGroupWarps * 32, 0, stream>>>(p);
    return;
  }
  const bool vec = p.inter % 8 == 0 && p.x_stride % 8 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  const int64_t n = static_cast<int64_t>(p.rows) * p.inter / (vec ? 8 : 1);
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 132 * 16));
  if (vec) {
    swiglu_kernel<8><<<blocks, 256, 0, stream>>>(p);
  } else {
    swiglu_kernel<1><<<blocks, 256, 0, stream>>>(p);
  }
}

void launch_quantize_fp8(const QuantizeFp8Params& p, cudaStream_t stream) {
  if (p.out.rows == 0 || p.out.cols == 0) return;
  launch_maybe_pdl(quantize_fp8_kernel, true, dim3(group_blocks(p.out.rows, p.out.cols)), kGroupWarps * 32, 0, stream, p);
}

void launch_pack_group_scales(const PackGroupScalesParams& p, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(p.groups) * p.ld + (p.room_codes != nullptr ? p.room_bytes : 0);
  if (n == 0) return;
  PackGroupScalesParams q = p;
  if (q.room_codes == nullptr) q.room_bytes = 0;
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 132 * 8));
  pack_group_scales_kernel<<<blocks, 256, 0, stream>>>(q);
}

void launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  embedding_kernel<<<p.tokens, 128, 0, stream>>>(p);
}

void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.row_bytes == 0) return;
  gather_rows_kernel<<<p.rows, 128, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
