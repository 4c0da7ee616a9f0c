// The gated delta rule's recurrent kernels. The recurrence is independent
// across the value dimension (row j of the per-head state Sv = S^T evolves on
// its own given q, k, g and beta), so the kernels parallelise over (sequence,
// value head, state row) and walk the tokens of a sequence in order with the
// state in registers: exact fp32 arithmetic, each state read and written once
// per call. They run every sequence of the recurrent algorithm and, for the
// chunked one, the sequences shorter than kChunkedFromTokens (decode tokens
// among them); chunked_delta_rule.cu runs the longer ones on tensor cores.
//
// A first kernel computes the per-token inputs once for both: L2-normalised q
// (scaled by 1/sqrt(Dk)) and k, q.k, the log decay g, exp(g) and beta.
//
// Speculative verify chunks (at most spec_k + 1 tokens, so never chunked)
// also store the state after each token but the last (spec_states, ops.h);
// a prefix-cache save stores the state after one chosen token.
#include <climits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/delta_rule_scratch.cuh"

namespace hyllm::cuda {
namespace {

constexpr int kLanesPerRow = 8;
constexpr int kRowsPerBlock = 16;  // 128 threads

using Scratch = DeltaRuleScratch;

// Block = token; warp = key head (q and k), then threads = value heads.
__global__ void prepare_kernel(GatedDeltaRuleParams p, Scratch s) {
  const int t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  const int Dk = p.k_dim, Hk = p.num_k_heads;
  const int64_t W = 2LL * Hk * Dk + static_cast<int64_t>(p.num_v_heads) * p.v_dim;
  const uint16_t* row = p.qkv + t * W;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(Dk));
  for (int kh = warp; kh < Hk; kh += warps) {
    const uint16_t* q = row + static_cast<int64_t>(kh) * Dk;
    const uint16_t* k = row + static_cast<int64_t>(Hk + kh) * Dk;
    float qq = 0.0f, kk = 0.0f;
    for (int d = lane; d < Dk; d += 32) {
      const float qv = bf2f(q[d]), kv = bf2f(k[d]);
      qq += qv * qv;
      kk += kv * kv;
    }
    qq = warp_sum(qq);
    kk = warp_sum(kk);
    const float q_inv = __fmul_rn(1.0f / sqrtf(qq + 1e-6f), q_scale);
    const float k_inv = 1.0f / sqrtf(kk + 1e-6f);
    float* qn = s.qn + (static_cast<int64_t>(t) * Hk + kh) * Dk;
    float* kn = s.kn + (static_cast<int64_t>(t) * Hk + kh) * Dk;
    float dot = 0.0f;
    for (int d = lane; d < Dk; d += 32) {
      const float qv = __fmul_rn(bf2f(q[d]), q_inv), kv = __fmul_rn(bf2f(k[d]), k_inv);
      qn[d] = qv;
      kn[d] = kv;
      dot += qv * kv;
    }
    dot = warp_sum(dot);
    if (lane == 0) s.kq[static_cast<int64_t>(t) * Hk + kh] = dot;
  }
  for (int vh = threadIdx.x; vh < p.num_v_heads; vh += blockDim.x) {
    const float a = bf2f(p.a[t * p.a_stride + vh]), b = bf2f(p.b[t * p.b_stride + vh]);
    const float neg_a = -expf(load_float(p.A_log, p.A_log_f32, vh));
    const float g = __fmul_rn(neg_a, softplus(__fadd_rn(a, load_float(p.dt_bias, p.dt_bias_f32, vh))));
    s.decay[static_cast<int64_t>(t) * p.num_v_heads + vh] = expf(g);
    s.g[static_cast<int64_t>(t) * p.num_v_heads + vh] = g;
    s.beta[static_cast<int64_t>(t) * p.num_v_heads + vh] = sigmoid(b);
  }
}

// Per-token inputs of one lane: its EPL elements of q and k plus the scalars.
template <int EPL>
struct TokenIn {
  float q[EPL], k[EPL];
  float v, decay, beta, kq;
};

template <int EPL>
__device__ __forceinline__ void load_token(TokenIn<EPL>& in, const GatedDeltaRuleParams& p, const Scratch& s, int t,
                                           int kh, int vh, int j, int sub, bool row_ok) {
  const int Dk = p.k_dim;
  const float* qn = s.qn + (static_cast<int64_t>(t) * p.num_k_heads + kh) * Dk;
  const float* kn = s.kn + (static_cast<int64_t>(t) * p.num_k_heads + kh) * Dk;
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int d = i * kLanesPerRow + sub;
    in.q[i] = d < Dk ? qn[d] : 0.0f;
    in.k[i] = d < Dk ? kn[d] : 0.0f;
  }
  const int64_t W = 2LL * p.num_k_heads * Dk + static_cast<int64_t>(p.num_v_heads) * p.v_dim;
  in.v = row_ok ? bf2f(p.qkv[t * W + 2LL * p.num_k_heads * Dk + static_cast<int64_t>(vh) * p.v_dim + j]) : 0.0f;
  in.decay = s.decay[static_cast<int64_t>(t) * p.num_v_heads + vh];
  in.beta = s.beta[static_cast<int64_t>(t) * p.num_v_heads + vh];
  in.kq = s.kq[static_cast<int64_t>(t) * p.num_k_heads + kh];
}

// Where a verify chunk's state row after its token i goes (row j of value
// head vh), or null when the sequence saves none.
__device__ __forceinline__ float* spec_row(const GatedDeltaRuleParams& p, int64_t slot, int vh, int j, int n) {
  if (p.spec_states == nullptr || n > p.spec_k + 1) return nullptr;
  return p.spec_states + ((slot * p.spec_k * p.num_v_heads + vh) * p.v_dim + j) * p.k_dim;
}

// Where a prefix-cache save (ops.h StateSaveArgs) puts state row j of value
// head vh, after the sequence's first *len tokens; null when it saves none.
__device__ __forceinline__ float* prefix_save_row(const GatedDeltaRuleParams& p, int seq, int vh, int j, int n,
                                                  int* len) {
  if (p.save_slots == nullptr) return nullptr;
  const int64_t slot = p.save_slots[seq];
  *len = p.save_lens[seq];
  if (slot < 0 || slot >= p.num_slots || *len < 1 || *len > n) return nullptr;
  return p.state + ((slot * p.num_v_heads + vh) * p.v_dim + j) * p.k_dim;
}

template <int EPL>
__device__ __forceinline__ void save_row(float* dst, const float (&st)[EPL], int sub, int Dk) {
#pragma unroll
  for (int e = 0; e < EPL; ++e) {
    const int d = e * kLanesPerRow + sub;
    if (d < Dk) dst[d] = st[e];
  }
}

// Block = 16 state rows of one (sequence, value head); 8 lanes per row, each
// holding EPL elements d = i * 8 + sub of the row.
template <int EPL>
__global__ void __launch_bounds__(kRowsPerBlock * kLanesPerRow) recurrent_kernel(GatedDeltaRuleParams p, Scratch s, int chunked_from) {
  const int seq = blockIdx.z, vh = blockIdx.y;
  const int t0 = p.query_start_loc[seq], n = p.query_start_loc[seq + 1] - t0;
  if (n == 0 || n >= chunked_from) return;
  const int64_t slot = p.state_indices[seq];
  if (slot < 0 || slot >= p.num_slots) return;
  const int sub = threadIdx.x % kLanesPerRow;
  const int j = blockIdx.x * kRowsPerBlock + threadIdx.x / kLanesPerRow;
  const bool row_ok = j < p.v_dim;
  const int Dk = p.k_dim;
  const int kh = vh / (p.num_v_heads / p.num_k_heads);
  float* srow = p.state + ((slot * p.num_v_heads + vh) * p.v_dim + (row_ok ? j : 0)) * Dk;
  const bool init = p.has_initial_state[seq] != 0;
  float st[EPL];
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int d = i * kLanesPerRow + sub;
    st[i] = (init && row_ok && d < Dk) ? srow[d] : 0.0f;
  }
  const int64_t out_stride = static_cast<int64_t>(p.num_v_heads) * p.v_dim;
  uint16_t* out = p.out + static_cast<int64_t>(vh) * p.v_dim + j;
  float* spec = row_ok ? spec_row(p, slot, vh, j, n) : nullptr;
  const int64_t spec_stride = static_cast<int64_t>(p.num_v_heads) * p.v_dim * Dk;
  int save_len = 0;
  float* save = row_ok ? prefix_save_row(p, seq, vh, j, n, &save_len) : nullptr;
  TokenIn<EPL> cur, next;
  load_token(cur, p, s, t0, kh, vh, j, sub, row_ok);
  for (int i = 0; i < n; ++i) {
    const int t = t0 + i;
    if (i + 1 < n) load_token(next, p, s, t + 1, kh, vh, j, sub, row_ok);
    float dk = 0.0f, dq = 0.0f;
#pragma unroll
    for (int e = 0; e < EPL; ++e) {
      dk = __fmaf_rn(st[e], cur.k[e], dk);
      dq = __fmaf_rn(st[e], cur.q[e], dq);
    }
#pragma unroll
    for (int o = 1; o < kLanesPerRow; o <<= 1) {
      dk += __shfl_xor_sync(0xffffffffu, dk, o);
      dq += __shfl_xor_sync(0xffffffffu, dq, o);
    }
    // With S' = decay S + u k:  S'.k = decay (S.k) + u (k.k) and the op's
    // u = beta (v - (decay S).k);  o = S'.q = decay (S.q) + u (k.q).
    const float u = cur.beta * (cur.v - cur.decay * dk);
    const float o = cur.decay * dq + u * cur.kq;
#pragma unroll
    for (int e = 0; e < EPL; ++e) st[e] = __fmaf_rn(cur.decay, st[e], u * cur.k[e]);
    if (row_ok && sub == 0) out[static_cast<int64_t>(t) * out_stride] = f2bf(o);
    if (spec != nullptr && i + 1 < n) save_row<EPL>(spec + i * spec_stride, st, sub, Dk);
    if (save != nullptr && i + 1 == save_len) save_row<EPL>(save, st, sub, Dk);
    if (i + 1 < n) cur = next;
  }
  if (row_ok) {
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int d = i * kLanesPerRow + sub;
      if (d < Dk) srow[d] = st[i];
    }
  }
}

// 4-byte asynchronous copy global -> shared.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}

// The same recurrence for sequences of many tokens: the block stages the
// per-token inputs it shares (q, k, the scalars, its rows' v) in shared memory,
// kChunk tokens at a time, double buffered with cp.async, so that the token
// loop reads shared memory instead of waiting on L2. Needs an even v_dim (v is
// staged as bf16 pairs).
constexpr int kChunk = 16;

template <int EPL>
__global__ void __launch_bounds__(kRowsPerBlock * kLanesPerRow) staged_kernel(GatedDeltaRuleParams p, Scratch s, int chunked_from) {
  extern __shared__ float smem[];
  const int seq = blockIdx.z, vh = blockIdx.y;
  const int t0 = p.query_start_loc[seq], n = p.query_start_loc[seq + 1] - t0;
  if (n == 0 || n >= chunked_from) return;
  const int64_t slot = p.state_indices[seq];
  if (slot < 0 || slot >= p.num_slots) return;
  const int Dk = p.k_dim, Hk = p.num_k_heads, Hv = p.num_v_heads;
  const int kh = vh / (Hv / Hk);
  const int row0 = blockIdx.x * kRowsPerBlock;
  // Stage layout per buffer: q[kChunk][Dk] k[kChunk][Dk] scal[kChunk][4] v[kChunk][kRowsPerBlock / 2] (bf16 pairs)
  const int stage_floats = 2 * kChunk * Dk + kChunk * 4 + kChunk * (kRowsPerBlock / 2);
  const int64_t W = 2LL * Hk * Dk + static_cast<int64_t>(Hv) * p.v_dim;
  auto issue = [&](int buf, int c0) {
    float* st = smem + buf * stage_floats;
    const int cn = min(kChunk, n - c0);
    for (int i = threadIdx.x; i < cn * Dk; i += blockDim.x) {
      const int tt = i / Dk, d = i % Dk;
      const int64_t t = t0 + c0 + tt;
      cp_async4(st + tt * Dk + d, s.qn + (t * Hk + kh) * Dk + d);
      cp_async4(st + kChunk * Dk + tt * Dk + d, s.kn + (t * Hk + kh) * Dk + d);
    }
    float* scal = st + 2 * kChunk * Dk;
    for (int i = threadIdx.x; i < cn * 3; i += blockDim.x) {
      const int tt = i / 3, which = i % 3;
      const int64_t t = t0 + c0 + tt;
      const float* src = which == 0 ? s.decay + t * Hv + vh : which == 1 ? s.beta + t * Hv + vh : s.kq + t * Hk + kh;
      cp_async4(scal + tt * 4 + which, src);
    }
    float* vv = scal + kChunk * 4;
    constexpr int kPairs = kRowsPerBlock / 2;
    for (int i = threadIdx.x; i < cn * kPairs; i += blockDim.x) {
      const int tt = i / kPairs, pr = i % kPairs;
      const int j = row0 + 2 * pr;
      if (j < p.v_dim) {
        const int64_t t = t0 + c0 + tt;
        cp_async4(vv + tt * kPairs + pr, p.qkv + t * W + 2LL * Hk * Dk + static_cast<int64_t>(vh) * p.v_dim + j);
      }
    }
    cp_async_commit();
  };

  const int sub = threadIdx.x % kLanesPerRow;
  const int r = threadIdx.x / kLanesPerRow;
  const int j = row0 + r;
  const bool row_ok = j < p.v_dim;
  float* srow = p.state + ((slot * Hv + vh) * p.v_dim + (row_ok ? j : 0)) * Dk;
  const bool init = p.has_initial_state[seq] != 0;
  float st[EPL];
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int d = i * kLanesPerRow + sub;
    st[i] = (init && row_ok && d < Dk) ? srow[d] : 0.0f;
  }
  const int64_t out_stride = static_cast<int64_t>(Hv) * p.v_dim;
  uint16_t* out = p.out + static_cast<int64_t>(vh) * p.v_dim + j;
  float* spec = row_ok ? spec_row(p, slot, vh, j, n) : nullptr;
  const int64_t spec_stride = static_cast<int64_t>(Hv) * p.v_dim * Dk;
  int save_len = 0;
  float* save = row_ok ? prefix_save_row(p, seq, vh, j, n, &save_len) : nullptr;

  issue(0, 0);
  for (int c0 = 0, buf = 0; c0 < n; c0 += kChunk, buf ^= 1) {
    if (c0 + kChunk < n) {
      issue(buf ^ 1, c0 + kChunk);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* stq = smem + buf * stage_floats;
    const float* stk = stq + kChunk * Dk;
    const float* scal = stq + 2 * kChunk * Dk;
    const uint16_t* vv = reinterpret_cast<const uint16_t*>(scal + kChunk * 4);
    const int cn = min(kChunk, n - c0);
    for (int tt = 0; tt < cn; ++tt) {
      float q[EPL], k[EPL];
#pragma unroll
      for (int e = 0; e < EPL; ++e) {
        const int d = e * kLanesPerRow + sub;
        q[e] = d < Dk ? stq[tt * Dk + d] : 0.0f;
        k[e] = d < Dk ? stk[tt * Dk + d] : 0.0f;
      }
      const float decay = scal[tt * 4], beta = scal[tt * 4 + 1], kq = scal[tt * 4 + 2];
      const float v = row_ok ? bf2f(vv[tt * kRowsPerBlock + r]) : 0.0f;
      float dk = 0.0f, dq = 0.0f;
#pragma unroll
      for (int e = 0; e < EPL; ++e) {
        dk = __fmaf_rn(st[e], k[e], dk);
        dq = __fmaf_rn(st[e], q[e], dq);
      }
#pragma unroll
      for (int o = 1; o < kLanesPerRow; o <<= 1) {
        dk += __shfl_xor_sync(0xffffffffu, dk, o);
        dq += __shfl_xor_sync(0xffffffffu, dq, o);
      }
      const float u = beta * (v - decay * dk);
      const float o = decay * dq + u * kq;
#pragma unroll
      for (int e = 0; e < EPL; ++e) st[e] = __fmaf_rn(decay, st[e], u * k[e]);
      if (row_ok && sub == 0) out[static_cast<int64_t>(t0 + c0 + tt) * out_stride] = f2bf(o);
      if (spec != nullptr && c0 + tt + 1 < n) save_row<EPL>(spec + (c0 + tt) * spec_stride, st, sub, Dk);
      if (save != nullptr && c0 + tt + 1 == save_len) save_row<EPL>(save, st, sub, Dk);
    }
    __syncthreads();
  }
  if (row_ok) {
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int d = i * kLanesPerRow + sub;
      if (d < Dk) srow[d] = st[i];
    }
  }
}

template <int EPL>
void launch_epl(const GatedDeltaRuleParams& p, const Scratch& s, int chunked_from, cudaStream_t stream) {
  dim3 grid(ceil_div(p.v_dim, kRowsPerBlock), p.num_v_heads, p.num_seqs);
  // Decode (a few tokens per sequence) reads each token's inputs once: the
  // direct kernel. Longer sequences stage them.
  const bool staged = p.v_dim % 2 == 0 && (p.max_query_len == 0 || p.max_query_len > 4);
  if (!staged) {
    recurrent_kernel<EPL><<<grid, kRowsPerBlock * kLanesPerRow, 0, stream>>>(p, s, chunked_from);
    return;
  }
  const size_t smem = 2 * sizeof(float) * (2 * kChunk * p.k_dim + kChunk * 4 + kChunk * (kRowsPerBlock / 2));
  if (smem > 48 * 1024) {
    cudaFuncSetAttribute(staged_kernel<EPL>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  }
  staged_kernel<EPL><<<grid, kRowsPerBlock * kLanesPerRow, smem, stream>>>(p, s, chunked_from);
}

}  // namespace

bool gated_delta_rule_supported(int k_dim) { return k_dim >= 1 && k_dim <= 32 * kLanesPerRow; }

size_t gated_delta_rule_scratch_bytes(const GatedDeltaRuleParams& p) {
  return delta_rule_scratch_floats(p, use_chunked(p)) * sizeof(float);
}

void launch_gated_delta_rule(const GatedDeltaRuleParams& p, void* scratch, cudaStream_t stream) {
  if (p.tokens == 0 || p.num_seqs == 0) return;
  const bool chunked = use_chunked(p);
  const Scratch s = carve_delta_rule_scratch(p, scratch, chunked);
  prepare_kernel<<<p.tokens, 128, 0, stream>>>(p, s);
  // With the chunked kernels, the recurrence takes only the short sequences
  // (its blocks of long ones return at once).
  const int chunked_from = chunked ? kChunkedFromTokens : INT_MAX;
  const int epl = (p.k_dim + kLanesPerRow - 1) / kLanesPerRow;
  if (epl <= 2) {
    launch_epl<2>(p, s, chunked_from, stream);
  } else if (epl <= 4) {
    launch_epl<4>(p, s, chunked_from, stream);
  } else if (epl <= 8) {
    launch_epl<8>(p, s, chunked_from, stream);
  } else if (epl <= 16) {
    launch_epl<16>(p, s, chunked_from, stream);
  } else {
    launch_epl<32>(p, s, chunked_from, stream);
  }
  if (chunked) launch_chunked_delta_rule(p, s, stream);
}

}  // namespace hyllm::cuda
