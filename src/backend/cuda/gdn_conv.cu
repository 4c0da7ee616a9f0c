// The GDN causal depthwise conv1d with its rolling state. For prefill, two
// launches: the outputs (which read the old state, parallel over tokens),
// then the state update (which overwrites it); one kernel could not do both
// without a grid-wide barrier. For decode and verify steps (few tokens in
// all), one launch in which a thread owns one channel of one sequence: its
// outputs, then its windows.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/gdn.h"

namespace hyllm::cuda {
namespace {

constexpr int kMaxKernel = 8;
constexpr int kTokensPerBlock = 16;

// The sequence that owns token t: the last s with query_start_loc[s] <= t
// and a non-empty range.
__device__ __forceinline__ int find_sequence(const int32_t* qsl, int num_seqs, int t) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (qsl[mid] <= t) lo = mid; else hi = mid - 1;
  }
  while (lo > 0 && qsl[lo + 1] <= t) ++lo;  // skip empty sequences at t
  return lo;
}

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

// Thread = channel; block.y = a run of kTokensPerBlock tokens.
template <int K>
__global__ void conv_out_kernel(GdnConvParams p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.channels) return;
  const int t_begin = blockIdx.y * kTokensPerBlock;
  const int t_end = min(p.tokens, t_begin + kTokensPerBlock);
  float w[K];
  load_weights<K>(p, c, w);
  int s = find_sequence(p.query_start_loc, p.num_seqs, t_begin);
  for (int t = t_begin; t < t_end; ++t) {
    while (p.query_start_loc[s + 1] <= t) ++s;
    const int64_t slot = p.state_indices[s];
    const bool init = p.has_initial_state[s] != 0 && slot >= 0 && slot < p.num_slots;
    conv_token<K>(p, w, c, t, p.query_start_loc[s], slot, init);
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
template <int K>
__global__ void conv_decode_kernel(GdnConvParams p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  if (c >= p.channels) return;
  const int start = p.query_start_loc[s], n = p.query_start_loc[s + 1] - start;
  if (n == 0) return;
  const int64_t slot = p.state_indices[s];
  const bool slot_ok = slot >= 0 && slot < p.num_slots;
  const bool init = p.has_initial_state[s] != 0;
  float w[K];
  load_weights<K>(p, c, w);
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
    conv_decode_kernel<K><<<dim3(ceil_div(p.channels, threads), p.num_seqs), threads, 0, stream>>>(p);
    return;
  }
  const int threads = 128;
  dim3 grid_out(ceil_div(p.channels, threads), ceil_div(p.tokens, kTokensPerBlock));
  conv_out_kernel<K><<<grid_out, threads, 0, stream>>>(p);
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
