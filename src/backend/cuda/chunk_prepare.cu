// Kernel 1 of the chunked delta rule (chunked_delta_rule.cu has the
// algorithm), per (chunk, value head, sequence): K K^T and Q K^T on tensor
// cores, T = (I + A)^-1 by forward substitution, and W, U~ as split-TF32
// products with T; P, W, U~ and the cumulative log decays go to the scratch
// for the state kernel.
#include "backend/cuda/delta_rule_chunks.cuh"

namespace hyllm::cuda {
namespace {

using namespace delta_rule_fragments;
using namespace delta_rule_chunks;

// Shared-memory layout, byte offsets. Row strides are padded so that each
// fragment load touches 32 distinct banks; every region starts 16-byte aligned.
// Regions are reused once their first contents are dead: P over q once Q K^T
// is formed, then T diag(beta gamma) over P once P is stored; T diag(beta)
// over A once T is solved.
template <int DKP>
struct PrepSmem {
  static constexpr int kQK = DKP + 8;           // fp16 q and k rows, read as A rows and as B^T
  static constexpr int kP = kDeltaChunk + 8;    // fp16 P rows
  static constexpr int kA = kDeltaChunk + 8;    // fp32 rows of A and of the scaled T (a k pair: 8 bytes)
  static constexpr int kQRegion = 2 * kDeltaChunk * kQK > 4 * kDeltaChunk * kA ? 2 * kDeltaChunk * kQK
                                                                                  : 4 * kDeltaChunk * kA;
  static constexpr int k = 0;
  static constexpr int q = k + 2 * kDeltaChunk * kQK;
  static constexpr int a = q + kQRegion;
  static constexpr int g = a + 4 * kDeltaChunk * kA;
  static constexpr int beta = g + 4 * kDeltaChunk;
  static constexpr int beta_gamma = beta + 4 * kDeltaChunk;
  static constexpr int v = beta_gamma + 4 * kDeltaChunk;  // bf16 [64][kV], zero past v_dim
  __host__ __device__ static int kV(int dv_pad) { return dv_pad + 8; }
  static size_t bytes(int dv_pad) { return v + sizeof(uint16_t) * kDeltaChunk * kV(dv_pad); }
  static_assert(q % 16 == 0 && a % 16 == 0 && v % 16 == 0, "16-byte copies, float4 reads and ldmatrix rows");
  static_assert(kP <= kQK, "P fits where q was");
};

// One warp's 32 columns of X = T diag(d) R, as split-TF32 products: T diag(d)
// (Ts, fp32, lower triangular) enters as hi + lo TF32 parts, R (fp16 K or
// bf16 V rows, exact in TF32) as is, so each product carries about 22 bits
// of T, where one TF32 part would carry 11. Rows < L of the warp's columns go to store(row, col, x0, x1)
// (columns col and col + 1).
template <bool kBf16, typename Store>
__device__ __forceinline__ void solve_products(const float* Ts, int ldt, const uint16_t* R, int ldr, int L, int lane,
                                               Store store) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kDeltaChunk / 16; ++mt) {
    const int m0 = 16 * mt;
    float acc[4][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < m0 + 16; k0 += 8) {  // T is zero right of its diagonal block
      const float2 lo_row = *reinterpret_cast<const float2*>(Ts + (m0 + g) * ldt + k0 + 2 * t);
      const float2 hi_row = *reinterpret_cast<const float2*>(Ts + (m0 + g + 8) * ldt + k0 + 2 * t);
      const float v[4] = {lo_row.x, hi_row.x, lo_row.y, hi_row.y};  // A fragment order, k slots paired
      uint32_t ah[4], al[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        ah[e] = to_tf32(v[e]);
        al[e] = to_tf32(v[e] - __uint_as_float(ah[e]));
      }
      // B[k][n] = R[k0 + k][8 nt + n]: rows k0 + 2t and k0 + 2t + 1 of column g, transposed by ldmatrix.
      uint32_t r[4];
      ldmatrix_x4_trans(r, R + (k0 + (lane & 7)) * ldr + 8 * (lane >> 3));
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const uint32_t b0 = kBf16 ? r[nt] << 16 : h2tf32(static_cast<uint16_t>(r[nt]));
        const uint32_t b1 = kBf16 ? r[nt] & 0xffff0000u : h2tf32(static_cast<uint16_t>(r[nt] >> 16));
        mma_tf32(acc[nt], al, b0, b1);
        mma_tf32(acc[nt], ah, b0, b1);
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = m0 + g + 8 * half;
      if (row >= L) continue;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) store(row, 8 * nt + 2 * t, acc[nt][2 * half], acc[nt][2 * half + 1]);
    }
  }
}

// Three blocks an SM (with fp16 q and k the shared memory allows it; the
// registers are capped to fit), so that one block's loads and stores overlap
// the others' products and solve.
template <int DKP>
__global__ void __launch_bounds__(kThreads, 3) chunk_prepare_kernel(GatedDeltaRuleParams p, DeltaRuleScratch s) {
  using Lay = PrepSmem<DKP>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int seq = blockIdx.z, vh = blockIdx.y, c = blockIdx.x;
  const int t0 = p.query_start_loc[seq], n = p.query_start_loc[seq + 1] - t0;
  if (n < kChunkedFromTokens) return;
  const ChunkSpans spans = chunk_spans(p, seq, n);
  if (c >= spans.count()) return;
  const int L = spans.end(c) - spans.start(c);
  const int64_t tb = t0 + spans.start(c);
  const int Dk = p.k_dim, Dv = p.v_dim, Hk = p.num_k_heads, Hv = p.num_v_heads;
  const int dv_pad = s.dv_pad, kV = Lay::kV(dv_pad);
  const int kh = vh / (Hv / Hk);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  uint16_t* Ks = reinterpret_cast<uint16_t*>(smem + Lay::k);
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem + Lay::q);
  uint16_t* Ps = Qs;                                      // P, once Q K^T is formed
  float* Tk = reinterpret_cast<float*>(smem + Lay::q);    // T diag(beta gamma), once P is stored
  float* Am = reinterpret_cast<float*>(smem + Lay::a);
  float* Tv = Am;                                         // T diag(beta), once T is solved
  float* Gs = reinterpret_cast<float*>(smem + Lay::g);
  float* Bs = reinterpret_cast<float*>(smem + Lay::beta);
  float* BGs = reinterpret_cast<float*>(smem + Lay::beta_gamma);
  uint16_t* Vs = reinterpret_cast<uint16_t*>(smem + Lay::v);
  stage_qk<DKP>(Ks, Lay::kQK, s.k16, p, tb, kh, L);
  stage_qk<DKP>(Qs, Lay::kQK, s.q16, p, tb, kh, L);
  {
    // The chunk's v rows of this head, zero past Dv and past L: with 16-byte
    // asynchronous copies alongside q and k when every row starts 16-byte
    // aligned, else with independent loads.
    const int64_t qkv_stride = 2LL * Hk * Dk + static_cast<int64_t>(Hv) * Dv;
    const int64_t v_col = 2LL * Hk * Dk + static_cast<int64_t>(vh) * Dv;
    const uint16_t* v = p.qkv + tb * qkv_stride + v_col;
    const bool aligned = Dv % 8 == 0 && qkv_stride % 8 == 0 && v_col % 8 == 0 &&
                         reinterpret_cast<uintptr_t>(p.qkv) % 16 == 0;
    if (aligned) {
      const int row8 = dv_pad / 8;
      for (int i = tid; i < kDeltaChunk * row8; i += blockDim.x) {
        const int r = i / row8, c8 = i % row8;
        const bool ok = r < L && 8 * c8 < Dv;
        cp_async16(Vs + r * kV + 8 * c8, v + (ok ? r * qkv_stride + 8 * c8 : 0), ok);
      }
    } else {
#pragma unroll 8
      for (int i = tid; i < kDeltaChunk * dv_pad; i += blockDim.x) {
        const int r = i / dv_pad, d = i % dv_pad;
        Vs[r * kV + d] = r < L && d < Dv ? v[r * qkv_stride + d] : uint16_t{0};
      }
    }
  }
  cp_async_commit();
  if (tid < 32) {
    // Inclusive prefix sum of g over the chunk (two tokens per lane).
    const int i = 2 * tid;
    const float a = i < L ? s.g[(tb + i) * Hv + vh] : 0.0f;
    const float b = i + 1 < L ? s.g[(tb + i + 1) * Hv + vh] : 0.0f;
    float x = a + b;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, x, o);
      if (tid >= o) x += y;
    }
    const float before = x - (a + b);
    Gs[i] = before + a;
    Gs[i + 1] = before + a + b;
  } else if (tid < 32 + kDeltaChunk) {
    const int i = tid - 32;
    Bs[i] = i < L ? s.beta[(tb + i) * Hv + vh] : 0.0f;
  }
  cp_async_wait<0>();
  __syncthreads();
  if (tid < kDeltaChunk) BGs[tid] = Bs[tid] * expf(Gs[tid]);

  // K K^T and Q K^T: warp -> rows 16 (warp % 4), columns 32 (warp / 4).
  {
    const int m0 = 16 * (warp & 3), n0 = 32 * (warp >> 2);
    float kk[4][4] = {}, qk[4][4] = {};
#pragma unroll 2
    for (int k0 = 0; k0 < DKP; k0 += 16) {
      uint32_t ak[4], aq[4];
      load_a16(ak, Ks, Lay::kQK, m0, k0, g, t);
      load_a16(aq, Qs, Lay::kQK, m0, k0, g, t);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        // B[k][n] = K[n][k]: column n of B is row n of K.
        const uint16_t* col = Ks + (n0 + 8 * nt + g) * Lay::kQK + k0 + 2 * t;
        const uint32_t b0 = lds32(col), b1 = lds32(col + 8);
        mma_f16(kk[nt], ak, b0, b1);
        mma_f16(qk[nt], aq, b0, b1);
      }
    }
    __syncthreads();  // every warp is done with Qs: P takes its place
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = m0 + acc_row(e, g), j = n0 + 8 * nt + acc_col(e, t);
        const float decay = j <= i ? expf(Gs[i] - Gs[j]) : 0.0f;
        Am[i * Lay::kA + j] = (j < i && i < L) ? Bs[i] * decay * kk[nt][e] : 0.0f;
        Ps[i * Lay::kP + j] = f2h(decay * qk[nt][e]);
      }
    }
  }
  __syncthreads();
  // P's rows out with 16-byte stores (the fragments' own would be 2-byte pieces).
  for (int c = tid; c < L * (kDeltaChunk / 8); c += blockDim.x) {
    const int i = c / (kDeltaChunk / 8), j = c % (kDeltaChunk / 8) * 8;
    *reinterpret_cast<uint4*>(s.p + ((tb + i) * Hv + vh) * kDeltaChunk + j) =
        *reinterpret_cast<const uint4*>(Ps + i * Lay::kP + j);
  }

  // T = (I + A)^-1 by forward substitution, one column per thread of the
  // first two warps: (I + A) x = e_j. A is zero on and above its diagonal, so
  // each row's sum runs over whole float4 groups, and x stays zero above j.
  float x[kDeltaChunk];
  const int j = tid;
  if (j < kDeltaChunk) {
#pragma unroll
    for (int i = 0; i < kDeltaChunk; ++i) x[i] = i == j ? 1.0f : 0.0f;
#pragma unroll
    for (int i = 1; i < kDeltaChunk; ++i) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int j4 = 0; j4 < (i + 3) / 4; ++j4) {
        const float4 a = *reinterpret_cast<const float4*>(Am + i * Lay::kA + 4 * j4);
        acc[0] = fmaf(a.x, x[4 * j4], acc[0]);
        acc[1] = fmaf(a.y, x[4 * j4 + 1], acc[1]);
        acc[2] = fmaf(a.z, x[4 * j4 + 2], acc[2]);
        acc[3] = fmaf(a.w, x[4 * j4 + 3], acc[3]);
      }
      x[i] -= (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
  }
  __syncthreads();  // every thread is done with A and with P's rows
  if (j < kDeltaChunk) {
    const float bg = BGs[j], b = Bs[j];
#pragma unroll
    for (int i = 0; i < kDeltaChunk; ++i) {
      Tk[i * Lay::kA + j] = x[i] * bg;
      Tv[i * Lay::kA + j] = x[i] * b;
    }
  }
  __syncthreads();

  // W = T diag(beta gamma) K and U~ = T diag(beta) V: warp -> 32 columns of
  // [W | U~] (DKP and dv_pad are multiples of 32, so a warp's columns are
  // all W's or all U~'s); padding columns come out zero. W is only ever a
  // tensor-core operand, stored as fp16; U~ is not.
  const int col0 = 32 * warp;
  if (col0 < DKP) {
    uint16_t* w = s.w + (tb * Hv + vh) * DKP + col0;
    const int64_t row_stride = static_cast<int64_t>(Hv) * DKP;
    solve_products<false>(Tk, Lay::kA, Ks + col0, Lay::kQK, L, lane, [&](int row, int col, float x0, float x1) {
      *reinterpret_cast<uint32_t*>(w + row * row_stride + col) =
          static_cast<uint32_t>(f2h(x0)) | (static_cast<uint32_t>(f2h(x1)) << 16);
    });
  } else if (col0 < DKP + dv_pad) {
    float* u = s.u + (tb * Hv + vh) * dv_pad + (col0 - DKP);
    const int64_t row_stride = static_cast<int64_t>(Hv) * dv_pad;
    solve_products<true>(Tv, Lay::kA, Vs + (col0 - DKP), kV, L, lane, [&](int row, int col, float x0, float x1) {
      *reinterpret_cast<float2*>(u + row * row_stride + col) = make_float2(x0, x1);
    });
  }
  if (tid < L) s.gcum[(tb + tid) * Hv + vh] = Gs[tid];
}

template <int DKP>
void launch_prepare_dk(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, cudaStream_t stream) {
  const int max_len = p.max_query_len > 0 ? p.max_query_len : p.tokens;
  // A save's split adds at most one chunk (ChunkSpans).
  const int max_chunks = ceil_div(max_len, kDeltaChunk) + (p.save_slots != nullptr ? 1 : 0);
  launch_with_smem(chunk_prepare_kernel<DKP>, dim3(max_chunks, p.num_v_heads, p.num_seqs),
                   PrepSmem<DKP>::bytes(s.dv_pad), p, s, stream);
}

}  // namespace

void launch_chunk_prepare(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, cudaStream_t stream) {
  if (s.dk_pad == 64) {
    launch_prepare_dk<64>(p, s, stream);
  } else {
    launch_prepare_dk<128>(p, s, stream);
  }
}

}  // namespace hyllm::cuda
