// The FP8 linear for few rows (decode), weights streamed by the tensor memory
// accelerator: y[m, n] = sum_k x[m, k] W[n, k], e4m3 operands on the tensor
// cores, the scales of ops.h's linear.
//
// Why TMA: at one to eight tokens the linear is a read of the weights, and a
// warp that loads its own weight fragments keeps only a few kilobytes in
// flight and spends its issue slots on addresses. Here one thread per block
// asks for whole 128-row x 128-byte boxes (one weight scale block, 16 KiB)
// and the token rows' box at the same k into a ring of shared-memory stages,
// and eight consumer warps multiply, 16 rows each; a consumer loads the next
// box's scales before it waits for this box, so that no global load sits
// between two boxes.
//
// Work: a block owns a row block of 128 and a contiguous share of its K
// blocks; the C blocks sharing a row block form a cluster and add their
// partial sums through distributed shared memory at the end (no global
// atomics, fences or scratch): the 16 rows of consumer warp w are finished
// by one block of the cluster (see owners()), to which the others send that
// warp's sums, which keeps the received sums small enough for clusters of 8
// at every token-tile count. C is chosen per shape so that the grid is one
// wave of resident blocks and as many as fit stream at once.
//
// Products: the boxes land with the 128-byte swizzle (16-byte chunk c of box
// row r at chunk c ^ (r % 8)), which is the K-major layout warpgroup MMAs
// read from shared memory: on sm_90a each warpgroup runs four e4m3 wgmma
// (m64 n8NT k32) over its 64 weight rows of the box. sm_90 has no e4m3
// mma.sync of its own (ptxas unpacks every code to f16 and runs f16 MMAs),
// and those unpacks, 48 per warp and box, bound the kernel by instruction
// issue below the copy rate. Other targets take mma.sync m16n8k32 fragments
// from the same boxes: lane (g, t) reads chunks t and t + 4 of its weight
// rows g, g + 8 and of token row g, every bank group four times, the fewest
// wavefronts for 512 bytes. Either way one K block's products are summed by
// the tensor cores, then promoted into fp32 with the block's scales:
// acc += (P * sx) * sw. The accumulator fragments of both are the same
// (row 16 warp + g (+ 8), tokens 2t, 2t + 1 of each 8).
#include <algorithm>
#include <array>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cluster.cuh"
#include "backend/cuda/fp8_common.cuh"
#include "backend/cuda/fp8_gemv_tma.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma.cuh"

namespace hyllm::cuda {
namespace {

constexpr int kRows = 128;      // a row block: one weight scale block of rows
constexpr int kBoxBytes = 128;  // one scale block of K
constexpr int kConsumerWarps = kRows / 16;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // + the producer warp
constexpr int kWeightBoxBytes = kRows * kBoxBytes;
constexpr int kStages = 2;
// A stage: the weight box, then the tokens' box of NT * 8 rows (1024-byte
// multiples, so both boxes start on the swizzle's period).
constexpr int stage_bytes(int nt) { return kWeightBoxBytes + nt * 8 * kBoxBytes; }
constexpr int kTokensPerGridRow = kFp8GemvRowsPerPass;  // 4 mma n-tiles
constexpr int kMaxCluster = 8;         // the portable cluster size

// Blocks of a cluster of C that finish rows: warp w's rows are finished by
// block w % owners. One token tile's sums (4 KiB a block) all go to the
// first block: spread, they would shrink the blocks' shared memory so far
// that an SM takes more of them and the grid packs onto fewer SMs, which
// streams slower on the large 27B shapes (bench_cuda_gemm). More tiles' sums
// would not fit the first block beside the ring, so they are spread.
__host__ __device__ constexpr int owners(int cluster, int nt) { return nt == 1 ? 1 : cluster; }
// Consumer warps whose rows one owner finishes.
__host__ __device__ constexpr int owned_warps(int cluster, int nt) {
  return (kConsumerWarps + owners(cluster, nt) - 1) / owners(cluster, nt);
}

// Ring (1024-aligned: the swizzle's period), barriers, then the partial sums
// the other blocks of a cluster send to this one, [C - 1][owned warps][NT * 4][32].
constexpr size_t smem_bytes(int cluster, int nt) {
  return size_t{kStages} * stage_bytes(nt) + 1024 + 2 * kStages * sizeof(uint64_t) +
         size_t(cluster - 1) * owned_warps(cluster, nt) * nt * 4 * 32 * sizeof(float);
}

struct Schedule {
  int num_kb = 0;   // K blocks of 128
  int cluster = 1;  // blocks sharing one row block (split K)
};

// The scales of one K block a consumer lane needs (block scales): the weight
// block's and, per n-tile, tokens 2t and 2t + 1's.
template <int NT>
struct BoxScales {
  float sx[NT][2];
  float sw;
};

template <int NT>
__device__ __forceinline__ void load_scales(const Fp8GemvParams& p, int kb, int64_t w_scale_row, BoxScales<NT>& o) {
  const int t = threadIdx.x & 3;
  const int m0 = blockIdx.y * kTokensPerGridRow;
  o.sw = p.w_scale[w_scale_row + kb];
  const float* xs = p.x_scale + static_cast<int64_t>(kb) * p.x_scale_pitch();
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int m = m0 + nt * 8 + 2 * t;
    o.sx[nt][0] = m < p.M ? xs[m] : 0.0f;
    o.sx[nt][1] = m + 1 < p.M ? xs[m + 1] : 0.0f;
  }
}

template <int NT>
__global__ void __launch_bounds__(kThreads, NT == 1 ? 3 : 2)
    fp8_gemv_tma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                        const Fp8GemvParams p, const Schedule s) {
  constexpr int kStageBytes = stage_bytes(NT);
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  float* received = reinterpret_cast<float*>(empty + kStages);  // see smem_bytes
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (s.cluster > 1) cluster_arrive_relaxed();
  allow_dependents();
  const int row_block = blockIdx.x / s.cluster;
  const int part = s.cluster > 1 ? static_cast<int>(cluster_rank()) : 0;
  const int kb_begin = static_cast<int>(static_cast<int64_t>(part) * s.num_kb / s.cluster);
  const int kb_end = static_cast<int>(static_cast<int64_t>(part + 1) * s.num_kb / s.cluster);
  const int n0 = row_block * kRows;

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

  if (warp == kConsumerWarps) {
    if (lane == 0) {
      prefetch_tensor_map(&wmap);
      prefetch_tensor_map(&xmap);
      // Launched programmatically, the block may run before the kernel
      // that writes x ends: the first stages' weights, which nothing writes,
      // are asked for before the wait, their tokens after it.
      const int early = kb_end - kb_begin < kStages ? kb_end - kb_begin : kStages;
      for (int k = 0; k < early; ++k) {
        mbar_expect_bytes(&full[k], kStageBytes);
        tma_load_box(ring + k * kStageBytes, &wmap, &full[k], (kb_begin + k) * kBoxBytes, n0);
      }
      wait_for_prerequisite();
      for (int kb = kb_begin; kb < kb_end; ++kb) {
        const int k = kb - kb_begin, st = k % kStages;
        uint8_t* stage = ring + st * kStageBytes;
        if (k >= early) {
          // A fresh barrier counts the phase before its first as complete.
          mbar_wait(&empty[st], static_cast<uint32_t>(((k / kStages) & 1) ^ 1));
          mbar_expect_bytes(&full[st], kStageBytes);
          tma_load_box(stage, &wmap, &full[st], kb * kBoxBytes, n0);
        }
        tma_load_box(stage + kWeightBoxBytes, &xmap, &full[st], kb * kBoxBytes, blockIdx.y * kTokensPerGridRow);
      }
    }
    __syncwarp();
  } else {
    const int64_t w_scale_row = static_cast<int64_t>(row_block) * s.num_kb;
    wait_for_prerequisite();  // x's scales and the output
    BoxScales<NT> next{};
    if (p.block_scales && kb_begin < kb_end) load_scales<NT>(p, kb_begin, w_scale_row, next);
    for (int kb = kb_begin; kb < kb_end; ++kb) {
      const int k = kb - kb_begin, st = k % kStages;
      const BoxScales<NT> cur = next;
      if (p.block_scales && kb + 1 < kb_end) load_scales<NT>(p, kb + 1, w_scale_row, next);
      mbar_wait(&full[st], static_cast<uint32_t>((k / kStages) & 1));
      float prod[NT][4];
#ifdef HYLLM_WGMMA
      // Warpgroup w multiplies weight rows [64 w, 64 w + 64) by the tokens,
      // both straight from the stage (the boxes' 128-byte swizzle is the
      // MMA's K-major layout); the stage goes back once the MMAs are done.
      {
        const uint8_t* stage = ring + st * kStageBytes;
        const uint64_t da = wgmma::smem_desc(stage + (warp / 4) * 64 * kBoxBytes);
        const uint64_t db = wgmma::smem_desc(stage + kWeightBoxBytes);
        float (&d)[NT * 4] = *reinterpret_cast<float (*)[NT * 4]>(&prod[0][0]);
        wgmma::fence_operands(d);
        wgmma::fence();
#pragma unroll
        for (int k32 = 0; k32 < kBoxBytes / 32; ++k32) wgmma::m64nk32_e4m3<NT>(d, da + 2 * k32, db + 2 * k32, k32);
        wgmma::commit();
        wgmma::wait<0>();
        wgmma::fence_operands(d);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[st]);
#else
      const int g = lane >> 2, t = lane & 3;
      const uint8_t* rows = ring + st * kStageBytes + (warp * 16 + g) * kBoxBytes;
      const uint8_t* tokens = ring + st * kStageBytes + kWeightBoxBytes + g * kBoxBytes;
      uint4 lo[2], hi[2], xv[NT][2];
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int chunk = ((4 * c + t) ^ g) * 16;
        lo[c] = *reinterpret_cast<const uint4*>(rows + chunk);
        hi[c] = *reinterpret_cast<const uint4*>(rows + 8 * kBoxBytes + chunk);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) xv[nt][c] = *reinterpret_cast<const uint4*>(tokens + nt * 8 * kBoxBytes + chunk);
      }
      // The stage is handed back to the TMA (async proxy) after these
      // generic-proxy reads: the memory model asks for a proxy fence.
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[st]);

#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) prod[nt][j] = 0.0f;
#pragma unroll
        for (int c = 0; c < 2; ++c) mma_k64(prod[nt], lo[c], hi[c], xv[nt][c]);
      }
#endif
      if (p.block_scales) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          acc[nt][0] += (prod[nt][0] * cur.sx[nt][0]) * cur.sw;
          acc[nt][1] += (prod[nt][1] * cur.sx[nt][1]) * cur.sw;
          acc[nt][2] += (prod[nt][2] * cur.sx[nt][0]) * cur.sw;
          acc[nt][3] += (prod[nt][3] * cur.sx[nt][1]) * cur.sw;
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[nt][j] += prod[nt][j];
      }
    }
  }

  if (s.cluster > 1) {
    cluster_wait();
    // Warp w's sums go to its owner, block w % owners, in the slot of this
    // sender (the blocks other than the owner, in rank order) and of w among
    // the owner's warps (w / owners).
    const int num_owners = owners(s.cluster, NT);
    const int owner = warp % num_owners;
    const int owned = owned_warps(s.cluster, NT);
    if (warp < kConsumerWarps && owner != part) {
      const int sender = part < owner ? part : part - 1;
      float* slot = received + ((static_cast<size_t>(sender) * owned + warp / num_owners) * NT * 4) * 32 + lane;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) store_remote(slot + (nt * 4 + i) * 32, owner, acc[nt][i]);
    }
    cluster_sync();
    if (warp == kConsumerWarps || owner != part) return;
    for (int q = 0; q < s.cluster - 1; ++q) {
      const float* slot = received + ((static_cast<size_t>(q) * owned + warp / num_owners) * NT * 4) * 32 + lane;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] += slot[(nt * 4 + i) * 32];
    }
  } else if (warp == kConsumerWarps) {
    return;
  }

  const int g = lane >> 2, t = lane & 3;
  const float tensor_scale = p.block_scales ? 1.0f : p.x_scale[0] * p.w_scale[0];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int n = n0 + warp * 16 + g + (i >= 2 ? 8 : 0);
      const int m = blockIdx.y * kTokensPerGridRow + nt * 8 + 2 * t + (i & 1);
      if (n >= p.N || m >= p.M) continue;
      const float v = acc[nt][i] * tensor_scale;
      const int64_t o = static_cast<int64_t>(m) * p.N + n;
      if (p.out_f32)
        static_cast<float*>(p.out)[o] = v;
      else
        static_cast<uint16_t*>(p.out)[o] = f2bf(v);
    }
}

// Descriptors are made once per matrix and box height: the key is all they
// encode (activation buffers are reused, so their maps are found again too).
bool byte_map(const void* base, int rows, int cols, int box_rows, CUtensorMap* map) {
  using Key = std::tuple<const void*, int, int, int>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(std::get<0>(k)) ^ (static_cast<size_t>(std::get<1>(k)) << 20) ^
             static_cast<size_t>(std::get<3>(k));
    }
  };
  static std::mutex mu;
  static std::unordered_map<Key, CUtensorMap, KeyHash> cache;
  const Key key{base, rows, cols, box_rows};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) {
    *map = it->second;
    return true;
  }
  if (!encode_swizzled_byte_map(map, base, rows, cols, box_rows, kBoxBytes)) return false;
  if (cache.size() >= 4096) cache.clear();
  cache.emplace(key, *map);
  return true;
}

// A cluster launch that may begin before the stream's previous kernel ends
// (the kernel waits for it before reading x).
cudaLaunchConfig_t launch_config(int cluster, size_t smem, cudaLaunchAttribute (&attr)[2]) {
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  return cfg;
}

// What the plans read of the device, once.
struct DeviceLimits {
  int sm_smem = 0;         // shared memory of an SM
  int block_smem = 0;      // the most one block may opt in to
  bool gh100_132 = false;  // compute capability 9.0 with 132 SMs (H100 SXM, H200)
};
const DeviceLimits& device_limits() {
  static const DeviceLimits d = [] {
    DeviceLimits r;
    int dev = 0, major = 0, minor = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&r.sm_smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
    cudaDeviceGetAttribute(&r.block_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    r.gh100_132 = major == 9 && minor == 0 && sms == 132;
    return r;
  }();
  return d;
}

// Clusters of each size that the GPU holds at once (clusters live inside
// one GPC, so this is not the per-SM occupancy times SMs divided by size).
template <int NT>
const std::array<int, kMaxCluster + 1>& cluster_capacity() {
  static const std::array<int, kMaxCluster + 1> cap = [] {
    // Any shared memory up to one block an SM: padded plans, and
    // bench_cuda_gemm's sweep launches every padding (Fp8GemvParams::tma_smem).
    cudaFuncSetAttribute(fp8_gemv_tma_kernel<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         device_limits().block_smem);
    std::array<int, kMaxCluster + 1> c{};
    for (int size = 1; size <= kMaxCluster; ++size) {
      cudaLaunchAttribute attr[2];
      cudaLaunchConfig_t cfg = launch_config(size, smem_bytes(size, NT), attr);
      cfg.gridDim = dim3(size);
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, fp8_gemv_tma_kernel<NT>, &cfg) != cudaSuccess) {
        cudaGetLastError();
        n = 0;
      }
      c[size] = n;
    }
    return c;
  }();
  return cap;
}

// Launch plans measured on a GH100 of 132 SMs (H100 SXM, H200) for the
// large linears of the Qwen3.5 models: `bench_cuda_gemm --sweep-tma` times
// every cluster size and shared-memory padding, and tools/cuda/tma_plan_table.py
// writes these rows from its log. Padding a block's shared memory to an SM's
// share (less kPadHeadroom) caps the blocks an SM takes at per_sm, which
// spreads a grid over more SMs than the runtime's packing would; which
// cluster size and cap stream fastest depends on the shape in ways no rule
// tried predicted (docs/BENCHMARKS.md). The table holds one token tile's
// plans (up to 8 rows: decode steps of few sequences), which made whole
// decode steps faster; the plans measured for four tiles made 32-row steps
// slower, and those of two were not timed end to end. Other shapes, tile
// counts and GPUs take the capacity rule of plan_for.
struct MeasuredPlan {
  int n, k, nt;
  int cluster;
  int per_sm;  // 0: the kernel's own shared memory
};
constexpr MeasuredPlan kGh100Plans[] = {
#include "backend/cuda/fp8_gemv_tma_plans.inc"
};
// Shared memory left free on an SM beside padded blocks, for the kernels
// launched programmatically around this one.
constexpr size_t kPadHeadroom = size_t{24} << 10;

// The measured plan of an N x K weight at NT token tiles, else the widest K
// split whose grid is one wave, each block keeping two boxes.
template <int NT>
Fp8GemvTmaPlan plan_for(int n, int k) {
  const auto& capacity = cluster_capacity<NT>();  // also raises the kernel's shared-memory limit
  if (device_limits().gh100_132) {
    for (const MeasuredPlan& m : kGh100Plans) {
      if (m.n != n || m.k != k || m.nt != NT) continue;
      size_t smem = smem_bytes(m.cluster, NT);
      if (m.per_sm > 0) smem = std::max(smem, fp8_gemv_tma_padded_smem(m.per_sm, kPadHeadroom));
      return {m.cluster, smem};
    }
  }
  const int row_blocks = ceil_div(n, kRows), num_kb = ceil_div(k, kBoxBytes);
  int c = std::min(kMaxCluster, std::max(1, num_kb / 2));
  while (c > 1 && row_blocks > capacity[c]) --c;
  return {c, smem_bytes(c, NT)};
}

template <int NT>
bool launch_nt(const Fp8GemvParams& p, cudaStream_t stream) {
  CUtensorMap wmap, xmap;
  if (!byte_map(p.w, p.N, p.K, kRows, &wmap) || !byte_map(p.x, p.M, p.K, NT * 8, &xmap)) return false;
  Schedule s;
  s.num_kb = ceil_div(p.K, kBoxBytes);
  const int row_blocks = ceil_div(p.N, kRows);
  Fp8GemvTmaPlan plan = plan_for<NT>(p.N, p.K);
  if (p.tma_cluster > 0) plan = {p.tma_cluster, std::max(smem_bytes(p.tma_cluster, NT), p.tma_smem)};
  s.cluster = plan.cluster;
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg = launch_config(s.cluster, plan.smem_bytes, attr);
  cfg.gridDim = dim3(row_blocks * s.cluster, ceil_div(p.M, kTokensPerGridRow));
  cfg.stream = stream;
  if (cudaLaunchKernelEx(&cfg, fp8_gemv_tma_kernel<NT>, wmap, xmap, p, s) == cudaSuccess) return true;
  cudaGetLastError();  // answered by the caller's fallback kernel
  return false;
}

}  // namespace

size_t fp8_gemv_tma_padded_smem(int per_sm, size_t headroom) {
  // Each block takes its shared memory plus the 1 KiB the runtime reserves.
  const size_t bytes = (static_cast<size_t>(device_limits().sm_smem) - headroom) / per_sm - 1024;
  return std::min(bytes, static_cast<size_t>(device_limits().block_smem));
}

Fp8GemvTmaPlan fp8_gemv_tma_plan(int N, int K, int M) {
  switch (ceil_div(std::min(M, kTokensPerGridRow), 8)) {
    case 1: return plan_for<1>(N, K);
    case 2: return plan_for<2>(N, K);
    case 3: return plan_for<3>(N, K);
    default: return plan_for<4>(N, K);
  }
}

bool launch_fp8_gemv_tma(const Fp8GemvParams& p, cudaStream_t stream) {
  switch (ceil_div(std::min(p.M, kTokensPerGridRow), 8)) {
    case 1: return launch_nt<1>(p, stream);
    case 2: return launch_nt<2>(p, stream);
    case 3: return launch_nt<3>(p, stream);
    default: return launch_nt<4>(p, stream);
  }
}

}  // namespace hyllm::cuda
