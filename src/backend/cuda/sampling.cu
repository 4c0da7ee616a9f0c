// The GPU sampler: one block per row, the host sampler's steps in its order
// (engine/sampler.h): raw logprobs, bans, repetition / frequency / presence
// penalties, greedy argmax or temperature, min-p, top-k (ties kept), top-p
// (shortest most-likely prefix in (logit desc, id asc) order), then one
// SplitMix64 uniform picks the token by inverse CDF in id order. The k-th
// largest logit and the top-p boundary come from 8-bit radix selects over an
// order-preserving integer key of the logits (4 passes, no sort).
#include <cfloat>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/sampling.h"

namespace hyllm::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr float kGreedyTemperature = 1e-5f;

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Monotone map of floats to unsigned ints (-inf lowest; NaN never occurs here).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct Shared {
  double dred[32];
  float fred[32];
  int ired[32];
  unsigned long long ured[32];
  unsigned int hist[256];
  double mass[256];
  uint32_t sel_prefix;
  int sel_remaining;
  double sel_need;
  int cand_count;
  int cand_id[64];
  float cand_val[64];
};

__device__ double block_sum_d(double v, Shared& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) s.dred[warp] = v;
  __syncthreads();
  double r = lane < (kThreads / 32) ? s.dred[lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
  return r;
}
__device__ float block_max_f(float v, Shared& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) s.fred[warp] = v;
  __syncthreads();
  return warp_max(lane < (kThreads / 32) ? s.fred[lane] : -INFINITY);
}
__device__ int block_sum_i(int v, Shared& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) s.ired[warp] = v;
  __syncthreads();
  int r = lane < (kThreads / 32) ? s.ired[lane] : 0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
  return r;
}
// Max of a 64-bit value (used as (key << 32 | ~id) for "largest, lowest id").
__device__ unsigned long long block_max_u64(unsigned long long v, Shared& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  __syncthreads();
  if (lane == 0) s.ured[warp] = v;
  __syncthreads();
  unsigned long long r = lane < (kThreads / 32) ? s.ured[lane] : 0ull;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, r, o);
    r = other > r ? other : r;
  }
  return r;
}

// The key of the k-th largest unmasked value (k >= 1, at most the count).
__device__ uint32_t select_kth(const float* v, int n, int k, Shared& s) {
  if (threadIdx.x == 0) {
    s.sel_prefix = 0;
    s.sel_remaining = k;
  }
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) s.hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = s.sel_prefix;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      if (v[i] == -INFINITY) continue;
      const uint32_t key = order_key(v[i]);
      if ((key & mask) == prefix) atomicAdd(&s.hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int rem = s.sel_remaining;
      for (int b = 255; b >= 0; --b) {
        if (static_cast<int>(s.hist[b]) >= rem) {
          s.sel_prefix = prefix | (static_cast<uint32_t>(b) << shift);
          break;
        }
        rem -= static_cast<int>(s.hist[b]);
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
__device__ uint32_t select_mass(const float* v, int n, float vmax, double need, double& mass_above, Shared& s) {
  if (threadIdx.x == 0) {
    s.sel_prefix = 0;
    s.sel_need = need;
  }
  double above = 0.0;
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) s.mass[i] = 0.0;
    __syncthreads();
    const uint32_t prefix = s.sel_prefix;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      if (v[i] == -INFINITY) continue;
      const uint32_t key = order_key(v[i]);
      if ((key & mask) == prefix) atomicAdd(&s.mass[(key >> shift) & 255u], exp(static_cast<double>(v[i] - vmax)));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double rem = s.sel_need;
      int chosen = 0;
      for (int b = 255; b >= 0; --b) {
        if (s.mass[b] > 0.0 && (s.mass[b] >= rem || b == 0)) {
          chosen = b;
          break;
        }
        rem -= s.mass[b];
        if (s.mass[b] > 0.0) chosen = b;  // keeps the last non-empty bin if rounding runs out
      }
      s.sel_prefix = prefix | (static_cast<uint32_t>(chosen) << shift);
      s.sel_need = rem;
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  const uint32_t tau = s.sel_prefix;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    if (v[i] != -INFINITY && order_key(v[i]) > tau) above += exp(static_cast<double>(v[i] - vmax));
  }
  mass_above = block_sum_d(above, s);
  return tau;
}

__global__ void __launch_bounds__(kThreads) sampling_kernel(SamplingLaunch p) {
  __shared__ Shared s;
  const int r = blockIdx.x;
  const SamplingRowParams prm = p.params[r];
  const int V = p.vocab;
  float* row_logits = p.logits + r * p.ld;
  float* w = p.work + static_cast<int64_t>(r) * V;

  // 0. Structured output: disallowed tokens become -inf for every later step
  // (logprobs included), as the host sampler does.
  if (prm.mask_offset >= 0) {
    const uint32_t* mask = p.mask_words + prm.mask_offset;
    for (int i = threadIdx.x; i < V; i += kThreads) {
      if (!((mask[i >> 5] >> (i & 31)) & 1u)) row_logits[i] = -INFINITY;
    }
    __syncthreads();
  }
  const float* raw = row_logits;

  // 1. Raw log-softmax statistics (double sums, as the host).
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < V; i += kThreads) mx = fmaxf(mx, raw[i]);
  const float raw_max = block_max_f(mx, s);
  double z_raw = 0.0;
  for (int i = threadIdx.x; i < V; i += kThreads) z_raw += exp(static_cast<double>(raw[i]) - raw_max);
  const double log_z = static_cast<double>(raw_max) + log(block_sum_d(z_raw, s));

  // 2-3. Bans and penalties on a copy.
  for (int i = threadIdx.x; i < V; i += kThreads) w[i] = raw[i];
  __syncthreads();
  for (int i = prm.banned_begin + threadIdx.x; i < prm.banned_end; i += kThreads) {
    const int t = p.pool[i];
    if (t >= 0 && t < V) w[t] = -INFINITY;
  }
  __syncthreads();
  if (prm.repetition_penalty != 1.0f) {
    for (int i = prm.rep_begin + threadIdx.x; i < prm.rep_end; i += kThreads) {
      const int t = p.pool[i];
      if (t < 0 || t >= V) continue;
      const float x = w[t];
      w[t] = x > 0 ? x / prm.repetition_penalty : x * prm.repetition_penalty;
    }
    __syncthreads();
  }
  if (prm.frequency_penalty != 0.0f || prm.presence_penalty != 0.0f) {
    for (int i = prm.count_begin + 2 * threadIdx.x; i + 1 < prm.count_end; i += 2 * kThreads) {
      const int t = p.pool[i];
      if (t < 0 || t >= V) continue;
      w[t] -= prm.frequency_penalty * static_cast<float>(p.pool[i + 1]) + prm.presence_penalty;
    }
    __syncthreads();
  }

  int token = -1;
  if (prm.temperature < kGreedyTemperature) {
    // 4. Greedy: largest value, lowest id on ties.
    unsigned long long best = 0;
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const unsigned long long cand = (static_cast<unsigned long long>(order_key(w[i])) << 32) |
                                      static_cast<uint32_t>(~static_cast<uint32_t>(i));
      best = cand > best ? cand : best;
    }
    best = block_max_u64(best, s);
    token = static_cast<int>(~static_cast<uint32_t>(best & 0xffffffffu));
  } else {
    // 5. Temperature and the masks.
    const float inv_t = 1.0f / prm.temperature;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += kThreads) {
      w[i] *= inv_t;
      m = fmaxf(m, w[i]);
    }
    const float vmax = block_max_f(m, s);
    if (vmax != -INFINITY) {
      if (prm.min_p > 0.0f) {
        const float threshold = vmax + logf(prm.min_p);
        for (int i = threadIdx.x; i < V; i += kThreads) {
          if (w[i] < threshold) w[i] = -INFINITY;
        }
        __syncthreads();
      }
      int live = 0;
      for (int i = threadIdx.x; i < V; i += kThreads) live += w[i] != -INFINITY;
      live = block_sum_i(live, s);
      if (prm.top_k > 0 && prm.top_k < V && prm.top_k < live) {
        const uint32_t kth = select_kth(w, V, prm.top_k, s);
        for (int i = threadIdx.x; i < V; i += kThreads) {
          if (w[i] != -INFINITY && order_key(w[i]) < kth) w[i] = -INFINITY;
        }
        __syncthreads();
        live = 0;
        for (int i = threadIdx.x; i < V; i += kThreads) live += w[i] != -INFINITY;
        live = block_sum_i(live, s);
      }
      if (prm.top_p < 1.0f && live > 1) {
        double z = 0.0;
        for (int i = threadIdx.x; i < V; i += kThreads) {
          if (w[i] != -INFINITY) z += exp(static_cast<double>(w[i] - vmax));
        }
        z = block_sum_d(z, s);
        const double limit = (1.0 - static_cast<double>(prm.top_p)) * z;
        double above = 0.0;
        const uint32_t tau = select_mass(w, V, vmax, z - limit, above, s);
        // Keys above tau stay; of the ties at tau, the lowest ids stay until
        // the kept prefix reaches z - limit.
        float tie_val = 0.0f;
        int ties = 0;
        for (int i = threadIdx.x; i < V; i += kThreads) {
          if (w[i] != -INFINITY && order_key(w[i]) == tau) {
            ++ties;
            tie_val = w[i];
          }
        }
        ties = block_sum_i(ties, s);
        tie_val = block_max_f(ties > 0 ? tie_val : -INFINITY, s);
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
            for (int i = threadIdx.x; i < mid; i += kThreads) c += (w[i] != -INFINITY && order_key(w[i]) == tau);
            c = block_sum_i(c, s);
            if (c >= keep_ties) hi = mid; else lo = mid + 1;
          }
          id_cut = lo;
        }
        for (int i = threadIdx.x; i < V; i += kThreads) {
          if (w[i] == -INFINITY) continue;
          const uint32_t key = order_key(w[i]);
          if (key < tau || (key == tau && i >= id_cut)) w[i] = -INFINITY;
        }
        __syncthreads();
      }
      // 6. Inverse CDF in id order: each thread owns a contiguous id range.
      const int chunk = (V + kThreads - 1) / kThreads;
      const int b = threadIdx.x * chunk, e = min(V, b + chunk);
      double part = 0.0;
      int last_kept = -1;
      for (int i = b; i < e; ++i) {
        if (w[i] != -INFINITY) {
          part += exp(static_cast<double>(w[i] - vmax));
          last_kept = i;
        }
      }
      // Exclusive scan of the parts (the block is small enough for a shared pass).
      __shared__ double parts[kThreads];
      parts[threadIdx.x] = part;
      __syncthreads();
      if (threadIdx.x == 0) {
        double run = 0.0;
        for (int i = 0; i < kThreads; ++i) {
          const double x = parts[i];
          parts[i] = run;
          run += x;
        }
        s.sel_need = run;  // z
      }
      __syncthreads();
      const double total = s.sel_need;
      const uint64_t bits = splitmix64(splitmix64(prm.seed) ^ prm.sample_index);
      const double target = static_cast<double>(bits >> 11) * 0x1.0p-53 * total;
      int chosen = -1;
      const double start = parts[threadIdx.x];
      if (part > 0.0 && start <= target && target < start + part) {
        double acc = start;
        for (int i = b; i < e; ++i) {
          if (w[i] == -INFINITY) continue;
          acc += exp(static_cast<double>(w[i] - vmax));
          if (acc > target) {
            chosen = i;
            break;
          }
        }
      }
      // The chosen id, else (rounding left target == z) the last kept id.
      const unsigned long long c1 = block_max_u64(chosen >= 0 ? (1ull << 40) | static_cast<unsigned>(chosen) : 0ull, s);
      const unsigned long long c2 = block_max_u64(last_kept >= 0 ? static_cast<unsigned>(last_kept) + 1ull : 0ull, s);
      token = (c1 >> 40) ? static_cast<int>(c1 & 0xffffffffu) : static_cast<int>(c2) - 1;
    }
  }
  if (threadIdx.x == 0) {
    p.out_token[r] = token;
    p.out_logprob[r] = token >= 0 ? static_cast<float>(static_cast<double>(raw[token]) - log_z) : 0.0f;
  }
  // Top-N raw logprobs: the N-th largest raw key, then the candidates sorted.
  const int n_top = min(prm.num_logprobs, kMaxTopLogprobs);
  if (n_top > 0) {
    const int n = min(n_top, V);
    const uint32_t kth = select_kth(raw, V, n, s);
    if (threadIdx.x == 0) s.cand_count = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < V; i += kThreads) {
      if (raw[i] != -INFINITY && order_key(raw[i]) >= kth) {
        const int slot = atomicAdd(&s.cand_count, 1);
        if (slot < 64) {
          s.cand_id[slot] = i;
          s.cand_val[slot] = raw[i];
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const int c = min(s.cand_count, 64);
      for (int i = 1; i < c; ++i) {  // insertion sort: value desc, id asc
        const int id = s.cand_id[i];
        const float val = s.cand_val[i];
        int j = i - 1;
        while (j >= 0 && (s.cand_val[j] < val || (s.cand_val[j] == val && s.cand_id[j] > id))) {
          s.cand_id[j + 1] = s.cand_id[j];
          s.cand_val[j + 1] = s.cand_val[j];
          --j;
        }
        s.cand_id[j + 1] = id;
        s.cand_val[j + 1] = val;
      }
      for (int i = 0; i < n && i < c; ++i) {
        p.out_top_ids[r * kMaxTopLogprobs + i] = s.cand_id[i];
        p.out_top_logprobs[r * kMaxTopLogprobs + i] = static_cast<float>(static_cast<double>(s.cand_val[i]) - log_z);
      }
    }
  }
}

}  // namespace

void launch_sampling(const SamplingLaunch& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  sampling_kernel<<<p.rows, kThreads, 0, stream>>>(p);
}

}  // namespace hyllm::cuda
