// The gated delta rule's recurrent kernels. The recurrence is independent
// across the value dimension (row j of the per-head state Sv = S^T evolves on
// its own given q, k, g and beta), so the kernels parallelise over (sequence,
// value head, state row) and walk the tokens of a sequence in order with the
// state in registers: exact fp32 arithmetic, each state read and written once
// per call. They run every sequence of the recurrent algorithm and, for the
// chunked one, the sequences shorter than kChunkedFromTokens (decode tokens
// among them); chunked_delta_rule.cu runs the longer ones on tensor cores.
//
// The per-token inputs (L2-normalised q scaled by 1/sqrt(Dk) and k, q.k, the
// log decay g, exp(g) and beta) come from a preparation kernel for the staged
// and chunked kernels, and are computed inside the decode kernel (one launch
// per layer for decode and verify steps).
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

// Warp-wide: the L2-normalised q (scaled by 1/sqrt(Dk)) and k of key head kh
// at token t, element d of each passed to store(d, q, k) by lane d % 32;
// returns k.q (on every lane). The one routine of the preparation kernel and
// the decode kernel, so both round alike.
template <typename Store>
__device__ __forceinline__ float normalize_qk(const GatedDeltaRuleParams& p, int t, int kh, int lane, Store store) {
  const int Dk = p.k_dim, Hk = p.num_k_heads;
  const int64_t W = 2LL * Hk * Dk + static_cast<int64_t>(p.num_v_heads) * p.v_dim;
  const uint16_t* q = p.qkv + t * W + static_cast<int64_t>(kh) * Dk;
  const uint16_t* k = p.qkv + t * W + static_cast<int64_t>(Hk + kh) * Dk;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(Dk));
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
  float dot = 0.0f;
  for (int d = lane; d < Dk; d += 32) {
    const float qv = __fmul_rn(bf2f(q[d]), q_inv), kv = __fmul_rn(bf2f(k[d]), k_inv);
    store(d, qv, kv);
    dot += qv * kv;
  }
  return warp_sum(dot);
}
// normalize_qk's store into fp32 rows of q and k.
struct StoreRows {
  float* qn;
  float* kn;
  __device__ __forceinline__ void operator()(int d, float q, float k) const {
    qn[d] = q;
    kn[d] = k;
  }
};

// The gates of value head vh at token t: g, exp(g), beta.
struct Gates {
  float g, decay, beta;
};
__device__ __forceinline__ Gates token_gates(const GatedDeltaRuleParams& p, int t, int vh) {
  const float a = bf2f(p.a[t * p.a_stride + vh]), b = bf2f(p.b[t * p.b_stride + vh]);
  const float neg_a = -expf(load_float(p.A_log, p.A_log_f32, vh));
  const float g = __fmul_rn(neg_a, softplus(__fadd_rn(a, load_float(p.dt_bias, p.dt_bias_f32, vh))));
  return {g, expf(g), sigmoid(b)};
}

// Block (x) = token, block (y) = a group of key heads, one per warp; then
// the threads of all the token's blocks = value heads.
constexpr int kPrepareThreads = 128;

__global__ void __launch_bounds__(kPrepareThreads) prepare_kernel(GatedDeltaRuleParams p, Scratch s) {
  const int t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  const int Dk = p.k_dim, Hk = p.num_k_heads;
  const int kh = blockIdx.y * warps + warp;
  // In a chunked call a token of a long sequence feeds only the chunked
  // kernels (fp16 q and k), one of a short sequence only the recurrence
  // (fp32 q and k, k.q); each gets only what it reads.
  bool chunked_token = false;
  if (s.q16 != nullptr) {
    const int seq = find_sequence(p.query_start_loc, p.num_seqs, t);
    chunked_token = p.query_start_loc[seq + 1] - p.query_start_loc[seq] >= kChunkedFromTokens;
  }
  if (kh < Hk) {
    const int64_t head = static_cast<int64_t>(t) * Hk + kh;
    if (chunked_token) {
      // The chunked kernels' fp16 operands, padded with zeros.
      uint16_t* q16 = s.q16 + head * s.dk_pad;
      uint16_t* k16 = s.k16 + head * s.dk_pad;
      normalize_qk(p, t, kh, lane, [&](int d, float qv, float kv) {
        q16[d] = f2h(qv);
        k16[d] = f2h(kv);
      });
      for (int d = Dk + lane; d < s.dk_pad; d += 32) q16[d] = k16[d] = uint16_t{0};
    } else {
      const float dot = normalize_qk(p, t, kh, lane, StoreRows{s.qn + head * Dk, s.kn + head * Dk});
      if (lane == 0) s.kq[head] = dot;
    }
  }
  for (int vh = blockIdx.y * blockDim.x + threadIdx.x; vh < p.num_v_heads; vh += gridDim.y * blockDim.x) {
    const Gates gt = token_gates(p, t, vh);
    const int64_t i = static_cast<int64_t>(t) * p.num_v_heads + vh;
    s.decay[i] = gt.decay;
    s.g[i] = gt.g;
    s.beta[i] = gt.beta;
  }
}

// A lane's EPL elements of a state row (and of q and k): element e is
// d = elem_d(e, sub). With Vec (Dk % 4 == 0, EPL % 4 == 0), runs of 4
// contiguous elements, so that the 8 lanes of a row move 128 contiguous bytes
// per 16-byte access; else single elements strided by 8. Every kernel that
// runs short sequences uses the same mapping for a given Dk, so a decode
// token's dot products sum in the same order whichever kernel runs it.
template <bool Vec>
__device__ __forceinline__ int elem_d(int e, int sub) {
  return Vec ? ((e >> 2) * kLanesPerRow + sub) * 4 + (e & 3) : e * kLanesPerRow + sub;
}

template <int EPL, bool Vec>
__device__ __forceinline__ void load_row(float (&st)[EPL], const float* row, int sub, int Dk, bool ok) {
#pragma unroll
  for (int e = 0; e < EPL; e += Vec ? 4 : 1) {
    const int d = elem_d<Vec>(e, sub);
    if constexpr (Vec) {
      const float4 v = ok && d < Dk ? *reinterpret_cast<const float4*>(row + d) : make_float4(0.f, 0.f, 0.f, 0.f);
      st[e] = v.x;
      st[e + 1] = v.y;
      st[e + 2] = v.z;
      st[e + 3] = v.w;
    } else {
      st[e] = ok && d < Dk ? row[d] : 0.0f;
    }
  }
}

template <int EPL, bool Vec>
__device__ __forceinline__ void save_row(float* dst, const float (&st)[EPL], int sub, int Dk) {
#pragma unroll
  for (int e = 0; e < EPL; e += Vec ? 4 : 1) {
    const int d = elem_d<Vec>(e, sub);
    if (d >= Dk) continue;
    if constexpr (Vec) {
      *reinterpret_cast<float4*>(dst + d) = make_float4(st[e], st[e + 1], st[e + 2], st[e + 3]);
    } else {
      dst[d] = st[e];
    }
  }
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

// One token of the recurrence on a lane's elements; returns o (on every lane
// of the row). With S' = decay S + u k:  S'.k = decay (S.k) + u (k.k) and the
// op's u = beta (v - (decay S).k);  o = S'.q = decay (S.q) + u (k.q).
template <int EPL>
__device__ __forceinline__ float recurrence_step(float (&st)[EPL], const float (&q)[EPL], const float (&k)[EPL],
                                                 float v, float decay, float beta, float kq) {
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
  return o;
}

// The recurrence of short sequences (decode and verify tokens), with the
// per-token preparation inside: block = 16 state rows of one (sequence, value
// head); 8 lanes per row. Each warp prepares one token of a group of
// kPrepTokens (q, k of the head's key head, k.q and the gates) in shared
// memory; every block of a head prepares it again, which costs a few hundred
// bytes of L2 reads and saves a launch and a round trip through scratch.
constexpr int kPrepTokens = kRowsPerBlock * kLanesPerRow / 32;
constexpr int kMaxDk = 32 * kLanesPerRow;

template <int EPL, bool Vec>
__global__ void __launch_bounds__(kRowsPerBlock * kLanesPerRow) decode_kernel(GatedDeltaRuleParams p, int chunked_from) {
  __shared__ __align__(16) float sq[kPrepTokens][kMaxDk];
  __shared__ __align__(16) float sk[kPrepTokens][kMaxDk];
  __shared__ float sgate[kPrepTokens][3];  // decay, beta, k.q
  const int seq = blockIdx.z, vh = blockIdx.y;
  const int t0 = p.query_start_loc[seq], n = p.query_start_loc[seq + 1] - t0;
  const int64_t slot = p.state_indices[seq];
  const bool run = n > 0 && n < chunked_from && slot >= 0 && slot < p.num_slots;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int sub = threadIdx.x % kLanesPerRow;
  const int j = blockIdx.x * kRowsPerBlock + threadIdx.x / kLanesPerRow;
  const bool row_ok = j < p.v_dim;
  const int Dk = p.k_dim, Hk = p.num_k_heads, Hv = p.num_v_heads;
  const int kh = vh / (Hv / Hk);
  float* srow = p.state + (((run ? slot : 0) * Hv + vh) * p.v_dim + (row_ok ? j : 0)) * Dk;
  // Launched programmatically: the state row (written by an earlier step;
  // the kernels that may still run, the conv and those it waited for, do not
  // touch it) is read while the conv runs; its outputs, the gates and every
  // write come after the wait, which every thread passes.
  float st[EPL];
  load_row<EPL, Vec>(st, srow, sub, Dk, run && row_ok && p.has_initial_state[seq] != 0);
  wait_for_prerequisite();
  allow_dependents();  // the gated norm's blocks may launch meanwhile
  if (!run) return;
  const int64_t W = 2LL * Hk * Dk + static_cast<int64_t>(Hv) * p.v_dim;
  const uint16_t* vin = p.qkv + 2LL * Hk * Dk + static_cast<int64_t>(vh) * p.v_dim + (row_ok ? j : 0);
  const int64_t out_stride = static_cast<int64_t>(Hv) * p.v_dim;
  uint16_t* out = p.out + static_cast<int64_t>(vh) * p.v_dim + j;
  float* spec = row_ok ? spec_row(p, slot, vh, j, n) : nullptr;
  const int64_t spec_stride = static_cast<int64_t>(Hv) * p.v_dim * Dk;
  int save_len = 0;
  float* save = row_ok ? prefix_save_row(p, seq, vh, j, n, &save_len) : nullptr;
  for (int c0 = 0; c0 < n; c0 += kPrepTokens) {
    const int cn = min(kPrepTokens, n - c0);
    if (c0 > 0) __syncthreads();  // the previous group's reads of shared memory are done
    if (warp < cn) {
      const int t = t0 + c0 + warp;
      const float dot = normalize_qk(p, t, kh, lane, StoreRows{sq[warp], sk[warp]});
      if (lane == 0) {
        const Gates gt = token_gates(p, t, vh);
        sgate[warp][0] = gt.decay;
        sgate[warp][1] = gt.beta;
        sgate[warp][2] = dot;
      }
    }
    __syncthreads();
    for (int tt = 0; tt < cn; ++tt) {
      const int i = c0 + tt, t = t0 + i;
      float q[EPL], k[EPL];
      load_row<EPL, Vec>(q, sq[tt], sub, Dk, true);
      load_row<EPL, Vec>(k, sk[tt], sub, Dk, true);
      const float v = row_ok ? bf2f(vin[t * W]) : 0.0f;
      const float o = recurrence_step<EPL>(st, q, k, v, sgate[tt][0], sgate[tt][1], sgate[tt][2]);
      if (row_ok && sub == 0) out[static_cast<int64_t>(t) * out_stride] = f2bf(o);
      if (spec != nullptr && i + 1 < n) save_row<EPL, Vec>(spec + i * spec_stride, st, sub, Dk);
      if (save != nullptr && i + 1 == save_len) save_row<EPL, Vec>(save, st, sub, Dk);
    }
  }
  if (row_ok) save_row<EPL, Vec>(srow, st, sub, Dk);
}

// The same recurrence for sequences of many tokens: the block stages the
// per-token inputs it shares (q, k, the scalars, its rows' v) in shared memory,
// kChunk tokens at a time, double buffered with cp.async, so that the token
// loop reads shared memory instead of waiting on L2. Needs an even v_dim (v is
// staged as bf16 pairs).
constexpr int kChunk = 16;

template <int EPL, bool Vec>
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
  float st[EPL];
  load_row<EPL, Vec>(st, srow, sub, Dk, row_ok && p.has_initial_state[seq] != 0);
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
      // Scalar reads: a token's row starts at tt * Dk floats, 16-byte aligned only when Dk % 4 == 0.
      float q[EPL], k[EPL];
#pragma unroll
      for (int e = 0; e < EPL; ++e) {
        const int d = elem_d<Vec>(e, sub);
        q[e] = d < Dk ? stq[tt * Dk + d] : 0.0f;
        k[e] = d < Dk ? stk[tt * Dk + d] : 0.0f;
      }
      const float decay = scal[tt * 4], beta = scal[tt * 4 + 1], kq = scal[tt * 4 + 2];
      const float v = row_ok ? bf2f(vv[tt * kRowsPerBlock + r]) : 0.0f;
      const float o = recurrence_step<EPL>(st, q, k, v, decay, beta, kq);
      if (row_ok && sub == 0) out[static_cast<int64_t>(t0 + c0 + tt) * out_stride] = f2bf(o);
      if (spec != nullptr && c0 + tt + 1 < n) save_row<EPL, Vec>(spec + (c0 + tt) * spec_stride, st, sub, Dk);
      if (save != nullptr && c0 + tt + 1 == save_len) save_row<EPL, Vec>(save, st, sub, Dk);
    }
    __syncthreads();
  }
  if (row_ok) save_row<EPL, Vec>(srow, st, sub, Dk);
}

// Whether the staged kernel runs the recurrence (needs an even v_dim: v is
// staged as bf16 pairs); else the decode kernel does.
bool use_staged(const GatedDeltaRuleParams& p) {
  return p.v_dim % 2 == 0 && (p.max_query_len == 0 || p.max_query_len > 4);
}

// Whether the preparation kernel runs: for the staged and the chunked
// kernels, which read its scratch; the decode kernel prepares its own tokens.
bool use_prepare(const GatedDeltaRuleParams& p) { return use_staged(p) || use_chunked(p); }

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Decode and verify chunks (a few tokens per sequence, or an odd v_dim,
// which the staged kernel cannot stage) take the decode kernel, which also
// prepares their tokens; longer sequences the staged kernel, after the
// preparation kernel.
template <int EPL, bool Vec>
void launch_recurrence(const GatedDeltaRuleParams& p, const Scratch& s, bool staged, int chunked_from,
                       cudaStream_t stream) {
  dim3 grid(ceil_div(p.v_dim, kRowsPerBlock), p.num_v_heads, p.num_seqs);
  if (!staged) {
    launch_maybe_pdl(decode_kernel<EPL, Vec>, true, grid, kRowsPerBlock * kLanesPerRow, 0, stream, p, chunked_from);
    return;
  }
  const size_t smem = 2 * sizeof(float) * (2 * kChunk * p.k_dim + kChunk * 4 + kChunk * (kRowsPerBlock / 2));
  if (smem > 48 * 1024) {
    cudaFuncSetAttribute(staged_kernel<EPL, Vec>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  }
  staged_kernel<EPL, Vec><<<grid, kRowsPerBlock * kLanesPerRow, smem, stream>>>(p, s, chunked_from);
}

template <int EPL>
void launch_epl(const GatedDeltaRuleParams& p, const Scratch& s, bool staged, int chunked_from, cudaStream_t stream) {
  if constexpr (EPL % 4 == 0) {
    // 16-byte state accesses: every state row then starts on a 16-byte boundary.
    const bool vec = p.k_dim % 4 == 0 && aligned16(p.state) && aligned16(p.spec_states);
    if (vec) return launch_recurrence<EPL, true>(p, s, staged, chunked_from, stream);
  }
  launch_recurrence<EPL, false>(p, s, staged, chunked_from, stream);
}

}  // namespace

bool gated_delta_rule_supported(int k_dim) { return k_dim >= 1 && k_dim <= 32 * kLanesPerRow; }

size_t gated_delta_rule_scratch_bytes(const GatedDeltaRuleParams& p) {
  if (!use_prepare(p)) return 0;
  return delta_rule_scratch_floats(p, use_chunked(p)) * sizeof(float);
}

void launch_gated_delta_rule(const GatedDeltaRuleParams& p, void* scratch, cudaStream_t stream) {
  if (p.tokens == 0 || p.num_seqs == 0) return;
  const bool chunked = use_chunked(p);
  const Scratch s = scratch != nullptr ? carve_delta_rule_scratch(p, scratch, chunked) : Scratch{};
  const bool staged = use_staged(p);
  if (use_prepare(p)) {
    const dim3 grid(p.tokens, ceil_div(p.num_k_heads, kPrepareThreads / 32));
    prepare_kernel<<<grid, kPrepareThreads, 0, stream>>>(p, s);
  }
  // With the chunked kernels, the recurrence takes only the short sequences
  // (its blocks of long ones return at once).
  const int chunked_from = chunked ? kChunkedFromTokens : INT_MAX;
  const int epl = (p.k_dim + kLanesPerRow - 1) / kLanesPerRow;
  if (epl <= 2) {
    launch_epl<2>(p, s, staged, chunked_from, stream);
  } else if (epl <= 4) {
    launch_epl<4>(p, s, staged, chunked_from, stream);
  } else if (epl <= 8) {
    launch_epl<8>(p, s, staged, chunked_from, stream);
  } else if (epl <= 16) {
    launch_epl<16>(p, s, staged, chunked_from, stream);
  } else {
    launch_epl<32>(p, s, staged, chunked_from, stream);
  }
  if (chunked) launch_chunked_delta_rule(p, s, stream);
}

}  // namespace hyllm::cuda
