// Causal GQA attention over the paged KV cache, flash style on tensor cores
// (bf16 in, fp32 accumulate), for prefill and decode alike: warp MMAs, or on
// sm_90a warpgroup MMAs for prefill tiles (paged_attention_mma.cuh).
//
// One block owns 64 "rows" of one sequence and one KV head, where a row is a
// (new token, query head of the group) pair: the group's query heads share
// every K/V tile, so decode (one token, group heads) and prefill use the same
// code. Each of the 4 warps owns 16 rows; with warp MMAs a warp with no
// valid row skips the math. Keys stream through shared memory in tiles of 64
// with an online softmax in fp32: one K and one V buffer, V(n) loading while
// S = Q K(n)^T is computed and K(n+1) while O += P V(n). Row tiles launch longest (most keys
// under the causal mask) first. When few blocks would cover the GPU (decode,
// short prefill), the key range is split over blocks: each writes its split's
// partial result and the splits are merged in the same launch: over
// distributed shared memory when the splits of a group form one cluster (up
// to kMaxClusterSplits of them, for contexts short enough that so few splits
// keep each split's walk short), else by the last block of the group to
// finish, found with a counter, through partials in global memory.
//
// An e4m3 cache is converted to bf16 codes (exact) as its tiles are staged in
// shared memory; k_scale joins the softmax scale and v_scale the final
// normalisation (ops.h), so the tensor-core loop is the bf16 one.
#include <type_traits>

#include "backend/cuda/dynamic_smem.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/paged_attention_merge.cuh"
#include "backend/cuda/paged_attention_mma.cuh"

namespace hyllm::cuda {
namespace {

using namespace paged_attention_detail;

// Per thread, the (row, 16-byte chunk) pieces of a [64][D] bf16 tile are
// i = threadIdx.x + j * kThreads: a warp copies whole rows (contiguous global
// reads), and the fixed trip count lets every load of a thread be in flight.
template <int D>
constexpr int kBf16Pieces = kRows * (D / 8) / kThreads;

// Loads rows [0, 64) of a [64][D] tile in the engine's layout with
// cp.async; row r comes from src(r) or is zero when src(r) is null.
template <int D, class Engine, typename SrcFn>
__device__ __forceinline__ void load_tile(uint16_t* tile, SrcFn src) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int j = 0; j < kBf16Pieces<D>; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int r = i / kChunks, c = i % kChunks;
    const uint16_t* g = src(r);
    cp_async16(tile + Engine::template chunk<D>(r, c), g ? g + c * 8 : tile, g != nullptr);
  }
}

// Loads rows [0, 64) of a [64][D] tile from e4m3 rows (16 codes per 16-byte
// load), stored as bf16; row r comes from src(r) or is zero when it is null.
// Synchronous: the caller syncs the block before reading the tile.
template <int D, class Engine, typename SrcFn>
__device__ __forceinline__ void load_tile_e4m3(uint16_t* tile, SrcFn src) {
  constexpr int kChunks = D / 16;
#pragma unroll
  for (int j = 0; j < kRows * kChunks / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int r = i / kChunks, c = i % kChunks;
    const uint8_t* g = src(r);
    const uint4 raw = g ? *reinterpret_cast<const uint4*>(g + c * 16) : make_uint4(0, 0, 0, 0);
    const uint2 a = e4m3x4_to_bf16x4(raw.x), b = e4m3x4_to_bf16x4(raw.y);
    const uint2 c2 = e4m3x4_to_bf16x4(raw.z), d = e4m3x4_to_bf16x4(raw.w);
    *reinterpret_cast<uint4*>(tile + Engine::template chunk<D>(r, 2 * c)) = make_uint4(a.x, a.y, b.x, b.y);
    *reinterpret_cast<uint4*>(tile + Engine::template chunk<D>(r, 2 * c + 1)) = make_uint4(c2.x, c2.y, d.x, d.y);
  }
}


// Shared memory of a launch: the Q, K and V tiles, and the slack that aligns
// them for the engine.
template <int D, class Engine>
constexpr size_t kSmemBytes = 3 * Engine::template kTileBytes<D> + (Engine::kAlign > 16 ? Engine::kAlign : 0);
// The split merges reuse the tiles' shared memory: for the weights (global
// merge), or for the block's own partials (cluster merge).
template <int D, class Engine>
constexpr bool kMergeFits = kRows * (D + 2) * sizeof(float) <= 3 * Engine::template kTileBytes<D> &&
                            kRows * (kMaxSplits + 1) * sizeof(float) <= 3 * Engine::template kTileBytes<D>;
static_assert(kMergeFits<32, WarpMma> && kMergeFits<64, WarpMma> && kMergeFits<128, WarpMma> &&
              kMergeFits<256, WarpMma> && kMergeFits<128, WarpgroupMma> && kMergeFits<256, WarpgroupMma>);

// kCluster: the launch's clusters are the num_splits blocks of one (sequence,
// KV head, row tile) group, consecutive in z, so that a block's split is its
// rank in its cluster. Engine: WarpMma or WarpgroupMma (paged_attention_mma.cuh).
template <int D, bool kFp8, bool kCluster, class Engine>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(PagedAttentionParams p, int num_splits,
                                                                    float* partial) {
  extern __shared__ __align__(16) uint16_t smem_raw[];
  // Cache slot of each key of a tile (-1 past the key range; slots fit int32),
  // double buffered: the next tile's slots are staged while these are in use.
  __shared__ int32_t s_slot[2][kKeys];
  uint16_t* smem = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(smem_raw) + Engine::kAlign - 1) &
                                               ~static_cast<uintptr_t>(Engine::kAlign - 1));
  constexpr int kTileElems = static_cast<int>(Engine::template kTileBytes<D> / 2);
  uint16_t* sq = smem;
  uint16_t* sk = smem + kTileElems;
  uint16_t* sv = smem + 2 * kTileElems;

  const int group = p.num_q_heads / p.num_kv_heads;
  // Row tiles in reverse: under a causal mask the last tile sees the most
  // keys, and launching the longest blocks first keeps the tail short. Blocks
  // start in the order of their linear index, so a launch without clusters
  // puts the row tile in z, the slowest part: the longest tiles of every
  // (sequence, split, KV head) go first, not those of one KV head after
  // another's. A cluster launch needs its splits consecutive in z (launch_d).
  const int m_tiles = static_cast<int>(kCluster ? gridDim.x : gridDim.z);
  const int m_tile = m_tiles - 1 - static_cast<int>(kCluster ? blockIdx.x : blockIdx.z);
  const int kvh = static_cast<int>(kCluster ? blockIdx.y : blockIdx.x);
  const int z = static_cast<int>(kCluster ? blockIdx.z : blockIdx.y);
  const int seq = z / num_splits, split = z % num_splits;
  const int q_start = p.query_start_loc[seq];
  const int q_len = p.query_start_loc[seq + 1] - q_start;
  const int seq_len = p.seq_lens[seq];
  const int ctx = seq_len - q_len;
  const int rows_total = q_len * group;
  const int m0 = m_tile * kRows;
  // Row tiles depend only on the launch's max_query_len bound, never on the
  // actual lengths, so a whole cluster (one row tile) leaves here or none.
  if (m0 >= rows_total) return;
  const int last_row = min(m0 + kRows, rows_total) - 1;
  const int kv_len = ctx + last_row / group + 1;  // keys the tile's last row sees
  // This split's key range; the last tile of a range shorter than kKeys
  // zero-fills (and masks) the keys past kv_end.
  const int per_split = split_keys(kv_len, num_splits);
  const int kv_begin = split * per_split;
  const int kv_end = min(kv_len, kv_begin + per_split);

  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  // A warp whose 16 rows are all past the sequence's rows (decode: one token's
  // group of heads fills part of the first warp) only helps load the tiles.
  const bool warp_active = Engine::kWarpgroupWide || m0 + warp * 16 < rows_total;
  const int64_t hq = p.num_q_heads;
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;

  // Rows this thread's accumulators belong to: r0 = lane/4 and r0 + 8 of the warp's 16.
  int row_token[2], row_head[2];
  bool row_valid[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = m0 + warp * 16 + lane / 4 + i * 8;
    row_valid[i] = r < rows_total;
    row_token[i] = row_valid[i] ? r / group : 0;
    row_head[i] = kvh * group + (row_valid[i] ? r % group : 0);
  }

  float acc[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  if (kv_begin < kv_end) {
    // One thread per key resolves the block table for the whole block.
    auto stage_slots = [&](int n0, int buf) {
      if (threadIdx.x < kKeys) {
        const int key = n0 + static_cast<int>(threadIdx.x);
        s_slot[buf][threadIdx.x] = key < kv_end ? table[key / p.block_size] * p.block_size + key % p.block_size : -1;
      }
    };
    // Loads the tile whose slots are in s_slot[buf] from `cache` into `tile`
    // and commits a cp.async group (empty for e4m3, whose loads are synchronous).
    auto load_kv = [&](uint16_t* tile, const void* cache, int buf) {
      const int32_t* slots = s_slot[buf];
      auto row = [&](auto* c, int r) -> decltype(c) {
        const int slot = slots[r];
        return slot < 0 ? nullptr : c + (static_cast<int64_t>(slot) * p.num_kv_heads + kvh) * D;
      };
      if constexpr (kFp8) {
        load_tile_e4m3<D, Engine>(tile, [&](int r) { return row(static_cast<const uint8_t*>(cache), r); });
      } else {
        load_tile<D, Engine>(tile, [&](int r) { return row(static_cast<const uint16_t*>(cache), r); });
      }
      cp_async_commit();
    };

    // Pipeline, one K and one V buffer: V(n) loads while S = Q K(n)^T and the
    // softmax run, K(n+1) while O += P V(n). Groups complete in commit order,
    // so waiting for all but the newest group waits for K(n) (and Q).
    stage_slots(kv_begin, 0);
    load_tile<D, Engine>(sq, [&](int r) -> const uint16_t* {
      const int rr = m0 + r;
      if (rr >= rows_total) return nullptr;
      return p.q + ((static_cast<int64_t>(q_start) + rr / group) * hq + kvh * group + rr % group) * D;
    });
    __syncthreads();  // the slots of the first tile
    load_kv(sk, p.k_cache, 0);
    float scale_log2 = (p.scale > 0.0f ? p.scale : rsqrtf(static_cast<float>(D))) * kLog2e;
    if constexpr (kFp8) scale_log2 *= p.k_scale;
    for (int n0 = kv_begin, buf = 0; n0 < kv_end; n0 += kKeys, buf ^= 1) {
      const bool has_next = n0 + kKeys < kv_end;
      // sv is free (the previous iteration ended with a barrier), and every
      // thread is past its last read of s_slot[buf ^ 1] (tile n - 1's loads).
      load_kv(sv, p.v_cache, buf);
      if (has_next) stage_slots(n0 + kKeys, buf ^ 1);
      cp_async_wait<1>();
      Engine::tiles_written();
      __syncthreads();

      // The tile's 16-key chunks that hold keys of the range: a short split
      // (decode) fills only the first ones, and the math skips the rest, whose
      // keys the mask below hides anyway (their P is exactly 0).
      const int live_chunks = min(kKeys, kv_end - n0 + 15) / 16;
      float s[kKeys / 8][4];
#pragma unroll
      for (int i = 0; i < kKeys / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
      // A tile whose chunks are all live (every prefill tile but a range's
      // last) takes the math without the per-chunk exits: each exit ends a
      // basic block, and ptxas cannot schedule shared loads across them.
      const bool all_live = live_chunks == kKeys / 16;
      if (warp_active) {
        if (all_live) {
          Engine::template qk<D, true>(s, sq, sk, warp, lane, live_chunks);
        } else {
          Engine::template qk<D, false>(s, sq, sk, warp, lane, live_chunks);
        }
        // Mask, scale (log2 domain) and the online softmax update.
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = e / 2;
            const int key = n0 + nt * 8 + (lane % 4) * 2 + (e % 2);
            const bool visible = row_valid[i] && key < kv_end && key <= ctx + row_token[i];
            s[nt][e] = visible ? s[nt][e] * scale_log2 : -INFINITY;
            tile_max[i] = fmaxf(tile_max[i], s[nt][e]);
          }
        }
        float alpha[2], base[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
          tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
          const float m_new = fmaxf(row_max[i], tile_max[i]);
          base[i] = m_new == -INFINITY ? 0.0f : m_new;  // fully masked so far: keep zeros
          alpha[i] = exp2f(row_max[i] - base[i]);
          row_max[i] = m_new;
          row_sum[i] *= alpha[i];
        }
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          acc[dt][0] *= alpha[0];
          acc[dt][1] *= alpha[0];
          acc[dt][2] *= alpha[1];
          acc[dt][3] *= alpha[1];
        }
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[nt][e] = exp2f(s[nt][e] - base[e / 2]);
            row_sum[e / 2] += s[nt][e];
          }
        }
      }
      cp_async_wait<0>();
      Engine::tiles_written();
      __syncthreads();  // V(n) landed; every warp is done with sk
      if (has_next) load_kv(sk, p.k_cache, buf ^ 1);
      if (warp_active) {
        if (all_live) {
          Engine::template pv<D, true>(acc, s, sv, lane, live_chunks);
        } else {
          Engine::template pv<D, false>(acc, s, sv, lane, live_chunks);
        }
      }
      __syncthreads();  // every warp is done with sv
    }
  }

  // Row sums are spread over the 4 lanes of a quad.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], 1);
    row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], 2);
  }
  if constexpr (kCluster) {
    // This split's partials into its own shared memory (the key loop ended
    // with a barrier, so the tiles are free), then the cluster merges them.
    // An empty split contributes max -inf and adds nothing.
    float* part = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (!row_valid[i]) continue;
      float* dst = part + (warp * 16 + lane / 4 + i * 8) * (D + 2);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const int d = dt * 8 + (lane % 4) * 2;
        *reinterpret_cast<float2*>(dst + d) = make_float2(acc[dt][2 * i], acc[dt][2 * i + 1]);
      }
      if (lane % 4 == 0) {
        dst[D] = row_max[i];
        dst[D + 1] = row_sum[i];
      }
    }
    cluster_sync();
    merge_cluster<D, kFp8>(p, part, num_splits, split, q_start, m0, last_row - m0 + 1, kvh);
    cluster_sync();  // no block leaves while another still reads its partials
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (!row_valid[i]) continue;
      const int64_t token = q_start + row_token[i];
      const int64_t o_off = (token * hq + row_head[i]) * D;
      if (num_splits == 1) {
        const float inv = (kFp8 ? p.v_scale : 1.0f) / row_sum[i];
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          const int d = dt * 8 + (lane % 4) * 2;
          float o0 = round_bf(acc[dt][2 * i] * inv), o1 = round_bf(acc[dt][2 * i + 1] * inv);
          if (p.gate != nullptr) {
            o0 = __fmul_rn(o0, sigmoid(bf2f(p.gate[o_off + d])));
            o1 = __fmul_rn(o1, sigmoid(bf2f(p.gate[o_off + d + 1])));
          }
          *reinterpret_cast<uint32_t*>(p.out + o_off + d) = pack_bf16(o0, o1);
        }
      } else if (kv_begin < kv_end) {  // an empty split's partials are never read
        // partial layout: [split][token * Hq + head][D + 2] = (unnormalised o, max, sum)
        float* dst = partial + (static_cast<int64_t>(split) * p.tokens * hq + token * hq + row_head[i]) * (D + 2);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          const int d = dt * 8 + (lane % 4) * 2;
          dst[d] = acc[dt][2 * i];
          dst[d + 1] = acc[dt][2 * i + 1];
        }
        if (lane % 4 == 0) {
          dst[D] = row_max[i];
          dst[D + 1] = row_sum[i];
        }
      }
    }
    if (num_splits == 1) return;

    // Publish this split's partials; the group's last block to arrive sees
    // every split's partials and merges them. It resets the counter: no other
    // block of this launch touches it again, and the next launch (or graph
    // replay) finds it at zero.
    const int group_id = (seq * p.num_kv_heads + kvh) * m_tiles + m_tile;
    if (!last_block_to_arrive(p.split_counters + group_id, num_splits)) return;
    if (threadIdx.x == 0) p.split_counters[group_id] = 0;
    const int live_splits = (kv_len + per_split - 1) / per_split;
    merge_splits<D, kFp8>(p, live_splits, partial, q_start, m0, last_row - m0 + 1, kvh, smem);
  }
}

// Splitting also serves causal prefill whose blocks fit in one wave: the
// longest row tile walks every key alone, so two splits halve the launch's
// critical path for one pass over the partials.
// The split count depends only on the launch's bounds (max_seq_len, the
// shape), never on the lengths in device memory: a graph recorded for a
// max_seq_len bucket stays valid as contexts grow inside it, the kernel
// dividing each sequence's actual keys over the same splits.
int choose_splits(const PagedAttentionParams& p, int m_tiles) {
  if (p.max_seq_len <= 0 || p.split_counters == nullptr) return 1;
  const int64_t blocks = static_cast<int64_t>(m_tiles) * p.num_kv_heads * p.num_seqs;
  const int64_t target = static_cast<int64_t>(kSplitTargetPerSm) * p.num_sms;
  if (blocks >= target) return 1;
  const int by_len = (p.max_seq_len + kSplitKeys - 1) / kSplitKeys;  // at least kSplitKeys keys per split
  int splits = static_cast<int>((target + blocks - 1) / blocks);
  splits = min(splits, by_len);
  return max(1, min(splits, kMaxSplits));
}

int m_tiles_of(const PagedAttentionParams& p) {
  const int group = p.num_q_heads / p.num_kv_heads;
  const int max_q = p.max_query_len > 0 ? min(p.max_query_len, p.tokens) : p.tokens;
  return max(1, (max_q * group + kRows - 1) / kRows);
}

struct LaunchPlan {
  int m_tiles = 1;
  int splits = 1;
  bool cluster = false;  // the splits merge inside a cluster, else through global memory
  bool warpgroup = false;  // WarpgroupMma, else WarpMma
};

LaunchPlan plan_of(const PagedAttentionParams& p) {
  LaunchPlan plan;
  plan.m_tiles = m_tiles_of(p);
  plan.splits = choose_splits(p, plan.m_tiles);
  if (plan.splits > 1 && p.max_seq_len <= kMaxClusterSplits * kClusterMaxSplitKeys) {
    plan.splits = min(plan.splits, kMaxClusterSplits);
    plan.cluster = true;
  }
  // Decode (one row tile: a token's group of heads, most rows empty) stays on
  // the warp MMAs, which skip the empty warps' math.
  plan.warpgroup = p.warpgroup_mma && (p.head_dim == 128 || p.head_dim == 256) && plan.m_tiles > 1;
  return plan;
}

template <int D, bool kFp8, class Engine>
void launch_engine(const PagedAttentionParams& p, const LaunchPlan& plan, void* scratch, cudaStream_t stream) {
  constexpr size_t smem = kSmemBytes<D, Engine>;
  const int groups = p.num_seqs * plan.splits;
  // (row tile, KV head, sequence x split) with clusters, else (KV head,
  // sequence x split, row tile): the kernel reads its block's parts by the same rule.
  const dim3 grid = plan.cluster ? dim3(plan.m_tiles, p.num_kv_heads, groups) : dim3(p.num_kv_heads, groups, plan.m_tiles);
  if (plan.cluster) {
    auto* kernel = paged_attention_kernel<D, kFp8, true, Engine>;
    allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
    launch_ex(kernel, false, dim3(1, 1, plan.splits), grid, kThreads, smem, stream, p, plan.splits,
              static_cast<float*>(nullptr));
  } else {
    auto* kernel = paged_attention_kernel<D, kFp8, false, Engine>;
    allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
    kernel<<<grid, kThreads, smem, stream>>>(p, plan.splits, static_cast<float*>(scratch));
  }
}

template <int D, bool kFp8>
void launch_d(const PagedAttentionParams& p, void* scratch, cudaStream_t stream) {
  const LaunchPlan plan = plan_of(p);
  if constexpr (D == 128 || D == 256) {
    if (plan.warpgroup) {
      launch_engine<D, kFp8, WarpgroupMma>(p, plan, scratch, stream);
      return;
    }
  }
  launch_engine<D, kFp8, WarpMma>(p, plan, scratch, stream);
}

template <bool kFp8>
void launch_head_dim(const PagedAttentionParams& p, void* scratch, cudaStream_t stream) {
  switch (p.head_dim) {
    case 32: launch_d<32, kFp8>(p, scratch, stream); break;
    case 64: launch_d<64, kFp8>(p, scratch, stream); break;
    case 128: launch_d<128, kFp8>(p, scratch, stream); break;
    case 256: launch_d<256, kFp8>(p, scratch, stream); break;
    default: break;
  }
}

}  // namespace

bool paged_attention_supported(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

int paged_attention_split_counters(int num_sms) { return kSplitTargetPerSm * num_sms; }

bool paged_attention_grid_fits(const PagedAttentionParams& p) {
  constexpr int kMaxGridYZ = 65535;
  const LaunchPlan plan = plan_of(p);
  return plan.m_tiles <= kMaxGridYZ && static_cast<int64_t>(p.num_seqs) * plan.splits <= kMaxGridYZ;
}

size_t paged_attention_scratch_bytes(const PagedAttentionParams& p) {
  const LaunchPlan plan = plan_of(p);
  if (plan.splits <= 1 || plan.cluster) return 0;
  return static_cast<size_t>(plan.splits) * p.tokens * p.num_q_heads * (p.head_dim + 2) * sizeof(float);
}

void launch_paged_attention(const PagedAttentionParams& p, void* scratch, cudaStream_t stream) {
  if (p.tokens == 0 || p.num_seqs == 0) return;
  if (p.fp8_cache) {
    launch_head_dim<true>(p, scratch, stream);
  } else {
    launch_head_dim<false>(p, scratch, stream);
  }
}

}  // namespace hyllm::cuda
