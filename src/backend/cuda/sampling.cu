// The GPU sampler: one cluster of blocks per row, the host sampler's steps in
// its order (engine/sampler.h): raw logprobs (rows that ask for them), bans,
// repetition / frequency / presence penalties, greedy argmax or temperature,
// min-p, top-k (ties kept), top-p (shortest most-likely prefix in (logit
// desc, id asc) order), then one SplitMix64 uniform picks the token by inverse
// CDF in id order. The k-th largest logit and the top-p boundary come from
// 8-bit radix selects over an order-preserving integer key of the logits
// (4 passes, no sort). A scoring row (a target token, prompt logprobs) skips
// the sampling steps: its raw logprob, rank and top entries only.
#include <cooperative_groups.h>

#include <cfloat>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/sampling.h"
#include "util/counter_rng.h"

namespace hyllm::cuda {
namespace {

namespace cg = cooperative_groups;

// One cluster of kBlocks blocks per row: every pass over the vocabulary is
// spread over kBlocks SMs, and the blocks combine their partial results
// through distributed shared memory. Thread g = rank * kThreads + tid owns
// ids g, g + kStride, ... in every strided pass.
constexpr int kBlocks = 8;  // the largest portable cluster
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kStride = kBlocks * kThreads;
constexpr int kMaxCandidates = 64;
constexpr float kGreedyTemperature = 1e-5f;

struct Shared {
  double dred[kWarps];
  float fred[kWarps];
  int ired[kWarps];
  unsigned long long ured[kWarps];
  double dblock;
  float fblock;
  int iblock;
  unsigned long long ublock;
  unsigned int hist[256];
  double mass[256];
  uint32_t sel_prefix;
  int sel_remaining;
  double sel_need;
  int cand_count;
  int cand_id[kMaxCandidates];
  float cand_val[kMaxCandidates];
};

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

// Op over every thread of the cluster, in a fixed order (lanes, warps, ranks),
// so every block gets the same bits. `warps` holds kWarps values and `block`
// one, in this block's shared memory. Ends with a cluster barrier, which also
// orders the global writes made before the call for every later read.
template <typename T, typename Op>
__device__ T cluster_reduce(T v, T identity, Op op, T* warps, T* block) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T r = lane < kWarps ? warps[lane] : identity;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) r = op(r, __shfl_xor_sync(0xffffffffu, r, o));
    if (lane == 0) *block = r;
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  T r = identity;
#pragma unroll 1
  for (int b = 0; b < kBlocks; ++b) r = op(r, *cluster.map_shared_rank(block, b));
  cluster.sync();  // every block has read the slots before they are written again
  return r;
}
__device__ double cluster_sum_d(double v, Shared& s) { return cluster_reduce(v, 0.0, Sum{}, s.dred, &s.dblock); }
__device__ float cluster_max_f(float v, Shared& s) { return cluster_reduce(v, -INFINITY, Max{}, s.fred, &s.fblock); }
__device__ int cluster_sum_i(int v, Shared& s) { return cluster_reduce(v, 0, Sum{}, s.ired, &s.iblock); }
// Max of a 64-bit value (used as (key << 32 | ~id) for "largest, lowest id").
__device__ unsigned long long cluster_max_u64(unsigned long long v, Shared& s) {
  return cluster_reduce(v, 0ull, Max{}, s.ured, &s.ublock);
}

// Of values that are -1 or a thread index g.
__device__ int cluster_max_i(int v, Shared& s) { return cluster_reduce(v, -1, Max{}, s.ired, &s.iblock); }

// Exclusive prefix sum over the cluster in thread order g, in a fixed order;
// `total` gets the sum of all.
__device__ double exclusive_scan(double v, double& total, Shared& s) {
  static_assert(kWarps == 32, "one warp scans the warp totals");
  cg::cluster_group cluster = cg::this_cluster();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rank = static_cast<int>(cluster.block_rank());
  double x = v;  // inclusive within the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  const double prev = __shfl_up_sync(0xffffffffu, x, 1);
  const double lane_before = lane > 0 ? prev : 0.0;
  if (lane == 31) s.dred[warp] = x;
  __syncthreads();
  if (warp == 0) {
    double t = s.dred[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double y = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += y;
    }
    s.dred[lane] = t;  // inclusive over the warps
    if (lane == 31) s.dblock = t;
  }
  cluster.sync();
  double before = 0.0, sum = 0.0;
#pragma unroll 1
  for (int b = 0; b < kBlocks; ++b) {
    const double t = *cluster.map_shared_rank(&s.dblock, b);
    if (b < rank) before += t;
    sum += t;
  }
  const double warp_before = warp > 0 ? s.dred[warp - 1] : 0.0;
  cluster.sync();  // every block has read the slots before they are written again
  total = sum;
  return before + warp_before + lane_before;
}

// One radix pass of a select: bins[b] over the cluster for this block's
// thread b (the caller then decides on them in every block alike).
template <typename T>
__device__ T cluster_bin(T* bins, int b) {
  cg::cluster_group cluster = cg::this_cluster();
  T total = 0;
#pragma unroll 1
  for (int r = 0; r < kBlocks; ++r) total += cluster.map_shared_rank(bins, r)[b];
  return total;
}

// The key of the k-th largest unmasked value (k >= 1, at most the count).
__device__ uint32_t select_kth(const float* v, int n, int k, int g, Shared& s) {
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ unsigned int totals[256];
  if (threadIdx.x == 0) {
    s.sel_prefix = 0;
    s.sel_remaining = k;
  }
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) s.hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = s.sel_prefix;
    for (int i = g; i < n; i += kStride) {
      if (v[i] == -INFINITY) continue;
      const uint32_t key = order_key(v[i]);
      if ((key & mask) == prefix) atomicAdd(&s.hist[(key >> shift) & 255u], 1u);
    }
    cluster.sync();
    for (int i = threadIdx.x; i < 256; i += kThreads) totals[i] = cluster_bin(s.hist, i);
    cluster.sync();  // the bins are read everywhere before the next pass clears them
    if (threadIdx.x == 0) {
      int rem = s.sel_remaining;
      for (int b = 255; b >= 0; --b) {
        if (static_cast<int>(totals[b]) >= rem) {
          s.sel_prefix = prefix | (static_cast<uint32_t>(b) << shift);
          break;
        }
        rem -= static_cast<int>(totals[b]);
      }
      s.sel_remaining = rem;
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  return s.sel_prefix;
}

// The key of the top-p boundary: the smallest key tau with mass(key >= tau) >=
// need, where w[i] = exp(v[i] - vmax) in double for unmasked values. Also
// returns the mass of the keys above tau.
__device__ uint32_t select_mass(const float* v, int n, float vmax, double need, double& mass_above, int g,
                                Shared& s) {
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ double totals[256];
  if (threadIdx.x == 0) {
    s.sel_prefix = 0;
    s.sel_need = need;
  }
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) s.mass[i] = 0.0;
    __syncthreads();
    const uint32_t prefix = s.sel_prefix;
    for (int i = g; i < n; i += kStride) {
      if (v[i] == -INFINITY) continue;
      const uint32_t key = order_key(v[i]);
      if ((key & mask) == prefix) atomicAdd(&s.mass[(key >> shift) & 255u], exp(static_cast<double>(v[i] - vmax)));
    }
    cluster.sync();
    for (int i = threadIdx.x; i < 256; i += kThreads) totals[i] = cluster_bin(s.mass, i);
    cluster.sync();
    if (threadIdx.x == 0) {
      double rem = s.sel_need;
      int chosen = 0;
      for (int b = 255; b >= 0; --b) {
        if (totals[b] > 0.0 && (totals[b] >= rem || b == 0)) {
          chosen = b;
          break;
        }
        rem -= totals[b];
        if (totals[b] > 0.0) chosen = b;  // keeps the last non-empty bin if rounding runs out
      }
      s.sel_prefix = prefix | (static_cast<uint32_t>(chosen) << shift);
      s.sel_need = rem;
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  const uint32_t tau = s.sel_prefix;
  double above = 0.0;
  for (int i = g; i < n; i += kStride) {
    if (v[i] != -INFINITY && order_key(v[i]) > tau) above += exp(static_cast<double>(v[i] - vmax));
  }
  mass_above = cluster_sum_d(above, s);
  return tau;
}

// Thread 0 of the cluster: the best n of every block's candidates, by
// insertion (value desc, id asc), as the row's top logprobs. Out of line: its
// arrays would otherwise crowd the sampling loops' registers.
__device__ __noinline__ void write_top_logprobs(int32_t* out_ids, float* out_logprobs, int n, double log_z, Shared& s) {
  cg::cluster_group cluster = cg::this_cluster();
  int top_id[kMaxTopLogprobs];
  float top_val[kMaxTopLogprobs];
  int c = 0;
  for (int rk = 0; rk < kBlocks; ++rk) {
    const Shared* o = cluster.map_shared_rank(&s, rk);
    const int count = min(o->cand_count, kMaxCandidates);
    for (int k = 0; k < count; ++k) {
      const int id = o->cand_id[k];
      const float val = o->cand_val[k];
      int j = c < n ? c : n - 1;  // the slot the candidate enters from
      if (c == n && (top_val[j] > val || (top_val[j] == val && top_id[j] < id))) continue;
      while (j > 0 && (top_val[j - 1] < val || (top_val[j - 1] == val && top_id[j - 1] > id))) {
        top_id[j] = top_id[j - 1];
        top_val[j] = top_val[j - 1];
        --j;
      }
      top_id[j] = id;
      top_val[j] = val;
      if (c < n) ++c;
    }
  }
  for (int i = 0; i < c; ++i) {
    out_ids[i] = top_id[i];
    out_logprobs[i] = static_cast<float>(static_cast<double>(top_val[i]) - log_z);
  }
  for (int i = c; i < kMaxTopLogprobs; ++i) {  // padding, never read
    out_ids[i] = -1;
    out_logprobs[i] = -INFINITY;
  }
}

__global__ void __cluster_dims__(kBlocks, 1, 1) __launch_bounds__(kThreads) sampling_kernel(SamplingLaunch p) {
  __shared__ Shared s;
  cg::cluster_group cluster = cg::this_cluster();
  const int r = blockIdx.y;
  const int rank = static_cast<int>(cluster.block_rank());
  const int g = rank * kThreads + threadIdx.x;
  const SamplingRowParams prm = p.params[r];
  const int V = p.vocab;
  float* row_logits = p.logits + r * p.ld;
  float* w = p.work + static_cast<int64_t>(r) * V;

  // 0. Structured output: disallowed tokens become -inf for every later step
  // (logprobs included), as the host sampler does.
  if (prm.mask_offset >= 0) {
    const uint32_t* mask = p.mask_words + prm.mask_offset;
    for (int i = g; i < V; i += kStride) {
      if (!((mask[i >> 5] >> (i & 31)) & 1u)) row_logits[i] = -INFINITY;
    }
  }
  const float* raw = row_logits;

  // 1. Raw log-softmax statistics (double sums, as the host), only for a row
  // that asks for logprobs: otherwise its logprob is 0, as the host's is.
  const bool want_logprobs = prm.num_logprobs >= 0;
  double log_z = 0.0;
  if (want_logprobs) {
    float mx = -INFINITY;
    for (int i = g; i < V; i += kStride) mx = fmaxf(mx, raw[i]);
    const float raw_max = cluster_max_f(mx, s);
    double z_raw = 0.0;
    for (int i = g; i < V; i += kStride) z_raw += exp(static_cast<double>(raw[i]) - raw_max);
    log_z = static_cast<double>(raw_max) + log(cluster_sum_d(z_raw, s));
  }

  // A scoring row samples nothing: its token is the target, whose rank is
  // counted over the raw logits (ties do not outrank it, as on the host).
  const bool scoring = prm.target >= 0;
  if (scoring) {
    const float own = raw[prm.target];
    int higher = 0;
    for (int i = g; i < V; i += kStride) higher += raw[i] > own ? 1 : 0;
    higher = cluster_sum_i(higher, s);
    if (g == 0) p.out_rank[r] = 1 + higher;
  } else if (g == 0 && p.out_rank != nullptr) {
    p.out_rank[r] = 0;
  }

  // 2-3. Bans and penalties on a copy; greedy without them reads raw itself.
  // The pool's ids are scattered over the owners: a cluster barrier orders
  // each step's writes before the next. (A scoring row has none of them.)
  const bool greedy = scoring || prm.temperature < kGreedyTemperature;
  const bool edited = prm.banned_end > prm.banned_begin || prm.repetition_penalty != 1.0f ||
                      prm.frequency_penalty != 0.0f || prm.presence_penalty != 0.0f;
  const bool copy = !scoring && (edited || !greedy);
  if (copy) {
    for (int i = g; i < V; i += kStride) w[i] = raw[i];
    cluster.sync();
  }
  if (prm.banned_end > prm.banned_begin) {
    for (int i = prm.banned_begin + g; i < prm.banned_end; i += kStride) {
      const int t = p.pool[i];
      if (t >= 0 && t < V) w[t] = -INFINITY;
    }
    cluster.sync();
  }
  if (prm.repetition_penalty != 1.0f) {
    for (int i = prm.rep_begin + g; i < prm.rep_end; i += kStride) {
      const int t = p.pool[i];
      if (t < 0 || t >= V) continue;
      const float x = w[t];
      w[t] = x > 0 ? x / prm.repetition_penalty : x * prm.repetition_penalty;
    }
    cluster.sync();
  }
  if (prm.frequency_penalty != 0.0f || prm.presence_penalty != 0.0f) {
    for (int i = prm.count_begin + 2 * g; i + 1 < prm.count_end; i += 2 * kStride) {
      const int t = p.pool[i];
      if (t < 0 || t >= V) continue;
      w[t] -= prm.frequency_penalty * static_cast<float>(p.pool[i + 1]) + prm.presence_penalty;
    }
    cluster.sync();
  }

  int token = -1;
  if (scoring) {
    token = prm.target;
  } else if (greedy) {
    // 4. Greedy: largest value, lowest id on ties.
    const float* vals = copy ? w : raw;
    unsigned long long best = 0;
    for (int i = g; i < V; i += kStride) {
      const unsigned long long cand = (static_cast<unsigned long long>(order_key(vals[i])) << 32) |
                                      static_cast<uint32_t>(~static_cast<uint32_t>(i));
      best = cand > best ? cand : best;
    }
    best = cluster_max_u64(best, s);
    token = static_cast<int>(~static_cast<uint32_t>(best & 0xffffffffu));
  } else {
    // 5. Temperature and the masks.
    const float inv_t = 1.0f / prm.temperature;
    float m = -INFINITY;
    for (int i = g; i < V; i += kStride) {
      w[i] *= inv_t;
      m = fmaxf(m, w[i]);
    }
    const float vmax = cluster_max_f(m, s);
    if (vmax != -INFINITY) {
      if (prm.min_p > 0.0f) {
        const float threshold = vmax + logf(prm.min_p);
        for (int i = g; i < V; i += kStride) {
          if (w[i] < threshold) w[i] = -INFINITY;
        }
      }
      int live = 0;
      for (int i = g; i < V; i += kStride) live += w[i] != -INFINITY;
      live = cluster_sum_i(live, s);
      if (prm.top_k > 0 && prm.top_k < V && prm.top_k < live) {
        const uint32_t kth = select_kth(w, V, prm.top_k, g, s);
        for (int i = g; i < V; i += kStride) {
          if (w[i] != -INFINITY && order_key(w[i]) < kth) w[i] = -INFINITY;
        }
        live = 0;
        for (int i = g; i < V; i += kStride) live += w[i] != -INFINITY;
        live = cluster_sum_i(live, s);
      }
      if (prm.top_p < 1.0f && live > 1) {
        double z = 0.0;
        for (int i = g; i < V; i += kStride) {
          if (w[i] != -INFINITY) z += exp(static_cast<double>(w[i] - vmax));
        }
        z = cluster_sum_d(z, s);
        const double limit = (1.0 - static_cast<double>(prm.top_p)) * z;
        double above = 0.0;
        const uint32_t tau = select_mass(w, V, vmax, z - limit, above, g, s);
        // Keys above tau stay; of the ties at tau, the lowest ids stay until
        // the kept prefix reaches z - limit.
        float tie_val = 0.0f;
        int ties = 0;
        for (int i = g; i < V; i += kStride) {
          if (w[i] != -INFINITY && order_key(w[i]) == tau) {
            ++ties;
            tie_val = w[i];
          }
        }
        ties = cluster_sum_i(ties, s);
        tie_val = cluster_max_f(ties > 0 ? tie_val : -INFINITY, s);
        int keep_ties = ties;
        if (ties > 1) {
          const double wt = exp(static_cast<double>(tie_val - vmax));
          keep_ties = 1;
          while (keep_ties < ties && z - (above + keep_ties * wt) > limit) ++keep_ties;
        }
        // The id below which the first keep_ties ties lie: a count search over ids.
        int id_cut = V;
        if (keep_ties < ties) {
          int lo = 0, hi = V;  // smallest cut with count(ties with id < cut) >= keep_ties
          while (lo < hi) {
            const int mid = (lo + hi) / 2;
            int c = 0;
            for (int i = g; i < mid; i += kStride) c += (w[i] != -INFINITY && order_key(w[i]) == tau);
            c = cluster_sum_i(c, s);
            if (c >= keep_ties) hi = mid; else lo = mid + 1;
          }
          id_cut = lo;
        }
        for (int i = g; i < V; i += kStride) {
          if (w[i] == -INFINITY) continue;
          const uint32_t key = order_key(w[i]);
          if (key < tau || (key == tau && i >= id_cut)) w[i] = -INFINITY;
        }
      }
      // 6. Inverse CDF in id order: each thread owns a contiguous id range,
      // ranges in thread order g; the writes above were strided.
      cluster.sync();
      const int chunk = (V + kStride - 1) / kStride;
      const int b = min(V, g * chunk), e = min(V, b + chunk);
      double part = 0.0;
      int last_kept = -1;
      for (int i = b; i < e; ++i) {
        if (w[i] != -INFINITY) {
          part += exp(static_cast<double>(w[i] - vmax));
          last_kept = i;
        }
      }
      double total = 0.0;
      const double start = exclusive_scan(part, total, s);
      const uint64_t bits = rng::mix(rng::mix(prm.seed) ^ prm.sample_index);
      const double target = static_cast<double>(bits >> 11) * 0x1.0p-53 * total;
      // The range holding target: the last non-empty one starting at or
      // below it. Its owner walks it; if rounding leaves the walk short of
      // target, the range's last kept id is the pick.
      const int owner = cluster_max_i(part > 0.0 && start <= target ? g : -1, s);
      int chosen = -1;
      if (g == owner) {
        double acc = start;
        for (int i = b; i < e; ++i) {
          if (w[i] == -INFINITY) continue;
          acc += exp(static_cast<double>(w[i] - vmax));
          if (acc > target) {
            chosen = i;
            break;
          }
        }
        if (chosen < 0) chosen = last_kept;
      }
      // Else (no range has mass) the last kept id.
      const unsigned long long c1 =
          cluster_max_u64(chosen >= 0 ? (1ull << 40) | static_cast<unsigned>(chosen) : 0ull, s);
      const unsigned long long c2 = cluster_max_u64(last_kept >= 0 ? static_cast<unsigned>(last_kept) + 1ull : 0ull, s);
      token = (c1 >> 40) ? static_cast<int>(c1 & 0xffffffffu) : static_cast<int>(c2) - 1;
    }
  }
  // Top-N raw logprobs (the launch has top arrays when any row asks): the
  // N-th largest raw key, then the candidates sorted.
  // (num_logprobs is -1 for a row that asks for no logprobs at all.)
  const int n_top = p.out_top_ids != nullptr ? max(0, min(prm.num_logprobs, kMaxTopLogprobs)) : 0;
  if (g == 0) {
    p.out_token[r] = token;
    p.out_logprob[r] = want_logprobs && token >= 0 ? static_cast<float>(static_cast<double>(raw[token]) - log_z) : 0.0f;
    if (p.out_top_ids != nullptr && n_top == 0) {  // this row's padding, never read
      for (int i = 0; i < kMaxTopLogprobs; ++i) {
        p.out_top_ids[r * kMaxTopLogprobs + i] = -1;
        p.out_top_logprobs[r * kMaxTopLogprobs + i] = -INFINITY;
      }
    }
  }
  if (n_top > 0) {
    const int n = min(n_top, V);
    const uint32_t kth = select_kth(raw, V, n, g, s);
    if (threadIdx.x == 0) s.cand_count = 0;
    __syncthreads();
    for (int i = g; i < V; i += kStride) {
      if (raw[i] != -INFINITY && order_key(raw[i]) >= kth) {
        const int slot = atomicAdd(&s.cand_count, 1);
        if (slot < kMaxCandidates) {
          s.cand_id[slot] = i;
          s.cand_val[slot] = raw[i];
        }
      }
    }
    cluster.sync();
    if (g == 0) {
      write_top_logprobs(p.out_top_ids + r * kMaxTopLogprobs, p.out_top_logprobs + r * kMaxTopLogprobs, n, log_z, s);
    }
    cluster.sync();  // the candidates stay alive until block 0 has read them
  }
}

}  // namespace

void launch_sampling(const SamplingLaunch& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  sampling_kernel<<<dim3(kBlocks, p.rows), kThreads, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
