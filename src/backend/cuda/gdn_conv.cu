// The GDN causal depthwise conv1d with its rolling state. For prefill, two
// launches: the outputs (which read the old state, parallel over tokens),
// then the state update (which overwrites it); one kernel could not do both
// without a grid-wide barrier. The output kernel is a stream over x: a thread
// owns V adjacent channels (one 16-byte load and store a token when the
// layout allows it) and a run of tokens, and carries the last K-1 inputs in
// registers, so it reads each x row once plus K-1 rows of history per run.
// For decode and verify steps (few tokens in all), one launch in which a
// thread owns one channel of one sequence: its outputs, then its windows.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/gdn.h"

namespace hyllm::cuda {
namespace {

constexpr int kMaxKernel = 8;

// Output (token t, channel c) of the sequence that starts at token `start`
// in slot `slot` (init: whether it continues from the slot's window).
template <int K>
__device__ __forceinline__ void conv_token(const GdnConvParams& p, const float (&w)[K], int c, int t, int start,
                                           int64_t slot, bool init) {
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int src = t - (K - 1) + j;  // token index of tap j
    float v = 0.0f;
    if (src >= start) {
      v = bf2f(p.x[static_cast<int64_t>(src) * p.x_stride + c]);
    } else if (init) {
      const int hist_row = (K - 1) + (src - start);  // row of conv_state, oldest first
      if (hist_row >= 0) v = bf2f(p.conv_state[(slot * (K - 1) + hist_row) * p.channels + c]);
    }
    acc = __fadd_rn(acc, __fmul_rn(w[j], v));  // unfused, as the CPU reference
  }
  p.out[static_cast<int64_t>(t) * p.channels + c] = f2bf(silu(acc));
}

template <int K>
__device__ __forceinline__ void load_weights(const GdnConvParams& p, int c, float (&w)[K]) {
#pragma unroll
  for (int j = 0; j < K; ++j) w[j] = bf2f(p.weight[static_cast<int64_t>(c) * K + j]);
}

// V adjacent bf16 values as one load or store of 2V bytes (the address a
// multiple of 2V bytes).
template <int V> struct VecOf;
template <> struct VecOf<1> { using T = uint16_t; };
template <> struct VecOf<2> { using T = uint32_t; };
template <> struct VecOf<4> { using T = uint2; };
template <> struct VecOf<8> { using T = uint4; };
template <int V> using Vec = typename VecOf<V>::T;

template <int V>
__device__ __forceinline__ Vec<V> load_vec(const uint16_t* src) {
  return *reinterpret_cast<const Vec<V>*>(src);
}
// Element e is the half at bits 16 (e % 2) of 32-bit word e / 2 (little endian).
template <int V>
__device__ __forceinline__ void unpack(const Vec<V>& u, float (&v)[V]) {
  if constexpr (V == 1) {
    v[0] = bf2f(u);
  } else {
    uint32_t words[V / 2];
    if constexpr (V == 2) {
      words[0] = u;
    } else if constexpr (V == 4) {
      words[0] = u.x, words[1] = u.y;
    } else {
      words[0] = u.x, words[1] = u.y, words[2] = u.z, words[3] = u.w;
    }
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
      v[2 * i] = __uint_as_float(words[i] << 16);
      v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
}
template <int V>
__device__ __forceinline__ void store_vec(uint16_t* dst, const float (&v)[V]) {
  if constexpr (V == 1) {
    *dst = f2bf(v[0]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<uint32_t*>(dst) = pack_bf16(v[0], v[1]);
  } else if constexpr (V == 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]));
  } else {
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]), pack_bf16(v[4], v[5]), pack_bf16(v[6], v[7]));
  }
}

// The channel width of one thread of conv_out_kernel: the widest V in
// {8, 4, 2} whose vector accesses stay aligned at every (token, channel
// group), else 1. Each access is at a multiple of V elements from its base
// (x: t * x_stride + c0; out: t * C + c0; conv_state: row * C + c0; weight:
// (c0 + v) * K + j walked as K vectors of V) when C and x_stride are
// multiples of V, so the bases must be 2V-byte aligned.
int out_vec_width(const GdnConvParams& p) {
  const auto bases = reinterpret_cast<uintptr_t>(p.x) | reinterpret_cast<uintptr_t>(p.out) |
                     reinterpret_cast<uintptr_t>(p.weight) | reinterpret_cast<uintptr_t>(p.conv_state);
  for (const int v : {8, 4, 2}) {
    if (p.channels % v == 0 && p.x_stride % v == 0 && bases % (2 * v) == 0) return v;
  }
  return 1;
}

// win[j] = the inputs (raw bf16) of token t - (K - 1) + j of the sequence s
// that starts at token `start` <= t (channels c0 .. c0 + V - 1): x from
// `start` on, the slot's history before it when the sequence continues from
// its state (history row K-1 + (src - start) >= 0 since t >= start), else
// zeros.
template <int K, int V>
__device__ __forceinline__ void fill_window(const GdnConvParams& p, int c0, int s, int start, int t,
                                            Vec<V> (&win)[K - 1]) {
  const int64_t slot = p.state_indices[s];
  const bool init = p.has_initial_state[s] != 0 && slot >= 0 && slot < p.num_slots;
#pragma unroll
  for (int j = 0; j < K - 1; ++j) {
    const int src = t - (K - 1) + j;
    if (src >= start) {
      win[j] = load_vec<V>(p.x + static_cast<int64_t>(src) * p.x_stride + c0);
    } else if (init) {
      const int hist_row = (K - 1) + (src - start);
      win[j] = load_vec<V>(p.conv_state + (slot * (K - 1) + hist_row) * p.channels + c0);
    } else {
      win[j] = Vec<V>{};
    }
  }
}

constexpr int kOutThreads = 128;
constexpr int kTokensPerThread = 16;
// x rows loaded before the first of them is used: the loads a thread keeps
// in flight (a thread's work is otherwise one dependent load per token).
constexpr int kRowsInFlight = 8;

// Thread = V adjacent channels (c0 = V * thread index) x a run of
// kTokensPerThread tokens (block.y). The run may cross sequence starts; at
// each, the window restarts from that sequence's own history. Every thread
// of a block walks the same tokens, so those branches are uniform. For the
// real layers' K = 4, four blocks an SM (at most 128 registers) hold a
// 1024-token prefill of 8192 channels in one wave.
template <int K, int V>
__global__ void __launch_bounds__(kOutThreads, K <= 4 ? 4 : 1) conv_out_kernel(GdnConvParams p) {
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (c0 >= p.channels) return;  // C % V == 0: the whole group is in range
  const int t_begin = blockIdx.y * kTokensPerThread;
  const int t_end = min(p.tokens, t_begin + kTokensPerThread);
  const int32_t* qsl = p.query_start_loc;

  // w[j][v] = tap j of channel c0 + v; the weights [C, K] of the group are
  // K * V contiguous values, loaded as K vectors.
  float w[K][V];
#pragma unroll
  for (int i = 0; i < K; ++i) {
    float f[V];
    unpack<V>(load_vec<V>(p.weight + static_cast<int64_t>(c0) * K + i * V), f);
#pragma unroll
    for (int e = 0; e < V; ++e) w[(i * V + e) % K][(i * V + e) / K] = f[e];
  }

  int s = find_sequence(qsl, p.num_seqs, t_begin);
  int next = qsl[s + 1];  // the start of the next sequence, > t_begin
  Vec<V> win[K - 1];      // inputs of the K-1 tokens before the current one, oldest first
  fill_window<K, V>(p, c0, s, qsl[s], t_begin, win);

  for (int tg = t_begin; tg < t_end; tg += kRowsInFlight) {
    Vec<V> rows[kRowsInFlight];
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      rows[i] = tg + i < t_end ? load_vec<V>(p.x + static_cast<int64_t>(tg + i) * p.x_stride + c0) : Vec<V>{};
    }
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      const int t = tg + i;
      if (t >= t_end) break;
      if (t == next) {
        // A sequence starts at t: the first non-empty one at t (t < tokens =
        // qsl[num_seqs], so the walk ends in range).
        do {
          ++s;
        } while (qsl[s + 1] <= t);
        next = qsl[s + 1];
        fill_window<K, V>(p, c0, s, t, t, win);
      }
      float x[K][V], o[V];  // x[j] = the input of tap j
#pragma unroll
      for (int j = 0; j < K - 1; ++j) unpack<V>(win[j], x[j]);
      unpack<V>(rows[i], x[K - 1]);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < K; ++j) acc = __fadd_rn(acc, __fmul_rn(w[j][v], x[j][v]));  // unfused, as the CPU reference
        o[v] = silu(acc);
      }
      store_vec<V>(p.out + static_cast<int64_t>(t) * p.channels + c0, o);
#pragma unroll
      for (int j = 0; j + 1 < K - 1; ++j) win[j] = win[j + 1];
      win[K - 2] = rows[i];
    }
  }
}

// Channel c's conv state after the first `after` tokens of the sequence that
// starts at token `start`: rows after .. after + K - 2 of [history (K-1 rows,
// st) | new inputs], written to dst's K-1 rows in increasing order. dst may be
// st itself when after >= 1: row r is read at after + r > r, before it is written.
template <int K>
__device__ __forceinline__ void write_window(const GdnConvParams& p, int start, const uint16_t* st, bool init, int c,
                                             int after, uint16_t* dst) {
#pragma unroll
  for (int r = 0; r < K - 1; ++r) {
    const int src = after + r;
    uint16_t v;
    if (src >= K - 1) {
      v = p.x[static_cast<int64_t>(start + src - (K - 1)) * p.x_stride + c];
    } else {
      v = init ? st[static_cast<int64_t>(src) * p.channels] : uint16_t{0};
    }
    dst[static_cast<int64_t>(r) * p.channels] = v;
  }
}

// Channel c of sequence s (n tokens from `start`, in a valid slot): the last
// K-1 raw rows of history + new inputs.
template <int K>
__device__ __forceinline__ void conv_windows(const GdnConvParams& p, int c, int s, int start, int n, int64_t slot,
                                             bool init) {
  uint16_t* st = p.conv_state + slot * (K - 1) * p.channels + c;
  // A verify chunk also saves the window after each token but its last, and
  // a prefix-cache save the window after the first save_lens[s] tokens, both
  // before the state below overwrites the history they read.
  if (p.spec_states != nullptr && n <= p.spec_k + 1) {
    for (int j = 0; j + 1 < n; ++j)
      write_window<K>(p, start, st, init, c, j + 1, p.spec_states + ((slot * p.spec_k + j) * (K - 1)) * p.channels + c);
  }
  if (p.save_slots != nullptr) {
    const int64_t save_slot = p.save_slots[s];
    const int len = p.save_lens[s];
    if (save_slot >= 0 && save_slot < p.num_slots && len >= 1 && len <= n)
      write_window<K>(p, start, st, init, c, len, p.conv_state + save_slot * (K - 1) * p.channels + c);
  }
  write_window<K>(p, start, st, init, c, n, st);  // the new state, in place
}

// Thread = (sequence, channel).
template <int K>
__global__ void conv_state_kernel(GdnConvParams p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  if (c >= p.channels) return;
  const int start = p.query_start_loc[s], n = p.query_start_loc[s + 1] - start;
  if (n == 0) return;
  const int64_t slot = p.state_indices[s];
  if (slot < 0 || slot >= p.num_slots) return;
  conv_windows<K>(p, c, s, start, n, slot, p.has_initial_state[s] != 0);
}

// Thread = (sequence, channel): the outputs of the sequence's tokens, which
// read the old window, then the windows, which overwrite it. No other thread
// reads or writes this channel of this slot (sequences own distinct slots; a
// save slot is one that no sequence of the call uses), so no barrier.
//
// Launched programmatically: the weights and the step's inputs (written
// before the step began) are read while the kernel before it still runs;
// x, the conv state and every write come after the wait, which every thread
// passes (a grid that ended without waiting would let the kernel after it
// pass its own wait before the kernel before this one ended).
template <int K>
__global__ void conv_decode_kernel(GdnConvParams p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  const bool live = c < p.channels;
  const int start = p.query_start_loc[s], n = p.query_start_loc[s + 1] - start;
  const int64_t slot = p.state_indices[s];
  const bool slot_ok = slot >= 0 && slot < p.num_slots;
  const bool init = p.has_initial_state[s] != 0;
  float w[K];
  if (live) load_weights<K>(p, c, w);
  wait_for_prerequisite();
  allow_dependents();  // the recurrence may read its state meanwhile
  if (!live || n == 0) return;
  for (int t = start; t < start + n; ++t) conv_token<K>(p, w, c, t, start, slot, init && slot_ok);
  if (slot_ok) conv_windows<K>(p, c, s, start, n, slot, init);
}

// The one-launch kernel runs calls of at most kDecodeMaxTokens tokens, or
// whose sequences have at most kDecodeMaxQueryLen tokens each (the host
// hint): a thread then walks at most that many tokens of its sequence.
// Correct for any call; the bounds keep a long sequence off a serial walk.
constexpr int kDecodeMaxTokens = 32;
constexpr int kDecodeMaxQueryLen = 8;

template <int K>
void launch_k(const GdnConvParams& p, cudaStream_t stream) {
  const bool short_sequences = p.max_query_len > 0 && p.max_query_len <= kDecodeMaxQueryLen;
  if (p.tokens <= kDecodeMaxTokens || short_sequences) {
    // 64 threads a block: at batch 1 the 10240 channels of the 27B layer fill every SM.
    const int threads = 64;
    launch_maybe_pdl(conv_decode_kernel<K>, true, dim3(ceil_div(p.channels, threads), p.num_seqs), threads, 0, stream,
                     p);
    return;
  }
  const int vec = out_vec_width(p);
  dim3 grid_out(ceil_div(p.channels / vec, kOutThreads), ceil_div(p.tokens, kTokensPerThread));
  switch (vec) {
    case 8: conv_out_kernel<K, 8><<<grid_out, kOutThreads, 0, stream>>>(p); break;
    case 4: conv_out_kernel<K, 4><<<grid_out, kOutThreads, 0, stream>>>(p); break;
    case 2: conv_out_kernel<K, 2><<<grid_out, kOutThreads, 0, stream>>>(p); break;
    default: conv_out_kernel<K, 1><<<grid_out, kOutThreads, 0, stream>>>(p); break;
  }
  const int threads = 128;
  dim3 grid_state(ceil_div(p.channels, threads), p.num_seqs);
  conv_state_kernel<K><<<grid_state, threads, 0, stream>>>(p);
}

}  // namespace

bool gdn_conv_supported(int kernel) { return kernel >= 2 && kernel <= kMaxKernel; }

void launch_gdn_conv(const GdnConvParams& p, cudaStream_t stream) {
  if (p.tokens == 0 || p.num_seqs == 0 || p.channels == 0) return;
  switch (p.kernel) {
    case 2: launch_k<2>(p, stream); break;
    case 3: launch_k<3>(p, stream); break;
    case 4: launch_k<4>(p, stream); break;
    case 5: launch_k<5>(p, stream); break;
    case 6: launch_k<6>(p, stream); break;
    case 7: launch_k<7>(p, stream); break;
    case 8: launch_k<8>(p, stream); break;
    default: break;
  }
}

}  // namespace hyllm::cuda
