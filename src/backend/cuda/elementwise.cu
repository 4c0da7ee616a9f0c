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

// The FP8-output kernels below: lane l holds columns 8l .. 8l+7 of a warp's
// 256 columns of one row (two 128-column groups, a half-warp each: the group
// maxima are half-warp reductions), an item. Warp w takes items [kItems w,
// kItems w + kItems) in row-major order and asks for all their loads before
// it quantises any, so that each lane has 2 x kItems 16-byte loads in flight:
// one item per warp (decode rows) keeps the blocks many and the wait one
// memory round trip; two per warp (many rows) keep the copy rate with fewer,
// longer-lived warps.
constexpr int kLaneCols = 8;
constexpr int kItemCols = 32 * kLaneCols;

struct GroupItems {
  int per_row;  // items per row
  int64_t total;
  __host__ __device__ GroupItems(int rows, int cols)
      : per_row((cols + kItemCols - 1) / kItemCols), total(static_cast<int64_t>(rows) * per_row) {}
  // Items fit 32 bits (2^31 of them would be 2^39 bf16 values), and 64-bit
  // division costs these issue-bound kernels dozens of instructions a lane.
  __device__ int row(int64_t item) const {
    return static_cast<int>(static_cast<uint32_t>(item) / static_cast<uint32_t>(per_row));
  }
  // This lane's first column of the item.
  __device__ int col(int64_t item) const {
    return static_cast<int>(static_cast<uint32_t>(item) % static_cast<uint32_t>(per_row)) * kItemCols +
           static_cast<int>(threadIdx.x & 31) * kLaneCols;
  }
};

// Threads per block by items per warp, and the blocks an SM should hold:
// 32 warps, whose 64 registers a thread hold two items' loads.
template <int kItems>
constexpr int kItemThreads = kItems == 2 ? 256 : 128;
template <int kItems>
constexpr int kItemBlocksPerSm = 1024 / kItemThreads<kItems>;

// Blocks of `threads` whose warps take items_per_warp items each.
int item_blocks(int rows, int cols, int items_per_warp, int threads) {
  const int64_t warps = (GroupItems(rows, cols).total + items_per_warp - 1) / items_per_warp;
  return static_cast<int>((warps + threads / 32 - 1) / (threads / 32));
}

// Items per warp and threads per block for `rows` rows.
struct ItemLaunch {
  int items_per_warp;
  int threads;
  int blocks;
  ItemLaunch(int rows, int cols) {
    items_per_warp = rows >= 64 ? 2 : 1;
    threads = items_per_warp == 2 ? kItemThreads<2> : kItemThreads<1>;
    blocks = item_blocks(rows, cols, items_per_warp, threads);
  }
};

__device__ __forceinline__ int64_t first_item(int items_per_warp) {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * items_per_warp;
}

// The FP8-output SwiGLU: the bf16 results (also written to out when given)
// are quantised from registers.
template <int kItems>
__global__ void __launch_bounds__(kItemThreads<kItems>, kItemBlocksPerSm<kItems>) swiglu_fp8_kernel(SwigluParams p) {
  allow_dependents();  // the FP8 linears reading the codes start their weight stream
  const GroupItems items(p.rows, p.inter);
  const int64_t first = first_item(kItems);
  float g[kItems][kLaneCols], u[kItems][kLaneCols];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (first + i >= items.total) continue;  // whole warps
    const uint16_t* row = p.x + static_cast<int64_t>(items.row(first + i)) * p.x_stride;
    load_bf16<kLaneCols>(row, items.col(first + i), p.inter, g[i]);
    load_bf16<kLaneCols>(row + p.inter, items.col(first + i), p.inter, u[i]);
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (first + i >= items.total) continue;
    const int r = items.row(first + i), k = items.col(first + i);
    float o[kLaneCols];
#pragma unroll
    for (int j = 0; j < kLaneCols; ++j) o[j] = k + j < p.inter ? round_bf(__fmul_rn(silu(g[i][j]), u[i][j])) : 0.0f;
    if (p.out) store_bf16<kLaneCols>(p.out + static_cast<int64_t>(r) * p.inter, k, p.inter, o);
    quantize_group_regs<kLaneCols>(o, k, r, p.fp8);
  }
}

// Prefill rows, aligned: four items a warp whose loads stay raw 16-byte words
// until each item is converted, so that a lane has eight 16-byte loads in
// flight in 32 registers. With many rows the two-item form's warps each wait
// one memory round trip for 64 bytes a lane and leave, and its blocks run in
// twice the waves; here a block moves twice the bytes per round trip.
constexpr int kWideItems = 4;
constexpr int kWideThreads = 256;
constexpr int kWideMinRows = 256;

// Needs x 16-byte aligned and x_stride and inter multiples of 8 (wide_swiglu_fits).
__global__ void __launch_bounds__(kWideThreads, 1024 / kWideThreads) swiglu_fp8_wide_kernel(SwigluParams p) {
  allow_dependents();  // the FP8 linears reading the codes start their weight stream
  const GroupItems items(p.rows, p.inter);
  const int64_t first = first_item(kWideItems);
  uint4 g[kWideItems], u[kWideItems];
#pragma unroll
  for (int i = 0; i < kWideItems; ++i) {
    g[i] = u[i] = make_uint4(0, 0, 0, 0);
    if (first + i >= items.total) continue;  // whole warps
    const int k = items.col(first + i);
    if (k >= p.inter) continue;  // inter % 8 == 0: a lane's 8 columns are all in or all out
    const uint16_t* row = p.x + static_cast<int64_t>(items.row(first + i)) * p.x_stride + k;
    g[i] = *reinterpret_cast<const uint4*>(row);
    u[i] = *reinterpret_cast<const uint4*>(row + p.inter);
  }
#pragma unroll
  for (int i = 0; i < kWideItems; ++i) {
    if (first + i >= items.total) continue;
    const int r = items.row(first + i), k = items.col(first + i);
    float gv[kLaneCols], uv[kLaneCols], o[kLaneCols];
    unpack8(g[i], gv);
    unpack8(u[i], uv);
#pragma unroll
    for (int j = 0; j < kLaneCols; ++j) o[j] = k < p.inter ? round_bf(__fmul_rn(silu(gv[j]), uv[j])) : 0.0f;
    if (p.out) store_bf16<kLaneCols>(p.out + static_cast<int64_t>(r) * p.inter, k, p.inter, o);
    quantize_group_regs<kLaneCols>(o, k, r, p.fp8);
  }
}

bool wide_swiglu_fits(const SwigluParams& p) {
  return p.rows >= kWideMinRows && p.inter % 8 == 0 && p.x_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
}

// Launched programmatically: its blocks are resident before the kernel that
// writes x ends, and wait only for x.
template <int kItems>
__global__ void __launch_bounds__(kItemThreads<kItems>, kItemBlocksPerSm<kItems>)
    quantize_fp8_kernel(QuantizeFp8Params p) {
  allow_dependents();
  wait_for_prerequisite();
  const GroupItems items(p.out.rows, p.out.cols);
  const int64_t first = first_item(kItems);
  float v[kItems][kLaneCols];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (first + i >= items.total) continue;
    load_bf16<kLaneCols>(p.x + static_cast<int64_t>(items.row(first + i)) * p.x_stride, items.col(first + i),
                         p.out.cols, v[i]);
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (first + i < items.total) quantize_group_regs<kLaneCols>(v[i], items.col(first + i), items.row(first + i), p.out);
  }
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
    if (wide_swiglu_fits(p)) {
      const int blocks = item_blocks(p.rows, p.inter, kWideItems, kWideThreads);
      swiglu_fp8_wide_kernel<<<blocks, kWideThreads, 0, stream>>>(p);
      return;
    }
    const ItemLaunch l(p.rows, p.inter);
    if (l.items_per_warp == 2) {
      swiglu_fp8_kernel<2><<<l.blocks, l.threads, 0, stream>>>(p);
    } else {
      swiglu_fp8_kernel<1><<<l.blocks, l.threads, 0, stream>>>(p);
    }
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
  const ItemLaunch l(p.out.rows, p.out.cols);
  if (l.items_per_warp == 2) {
    launch_maybe_pdl(quantize_fp8_kernel<2>, true, dim3(l.blocks), l.threads, 0, stream, p);
  } else {
    launch_maybe_pdl(quantize_fp8_kernel<1>, true, dim3(l.blocks), l.threads, 0, stream, p);
  }
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
