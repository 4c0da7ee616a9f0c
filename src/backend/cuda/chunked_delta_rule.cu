// The chunked (WY) gated delta rule on tensor cores, for the sequences of a
// call with at least kChunkedFromTokens tokens. Per chunk of 64 tokens and
// value head, with G_i the log decay summed from the chunk start and
// gamma_i = exp(G_i):
//   A_ij = beta_i exp(G_i - G_j) k_i.k_j  (j < i),    T = (I + A)^-1
//   W = T diag(beta gamma) K,   U~ = T diag(beta) V,   P_ij = exp(G_i - G_j) q_i.k_j  (j <= i)
// and from the state S (Dk x Dv) at the chunk start:
//   U = U~ - W S,   O = diag(gamma) Q S + P U,
//   S' = gamma_last S + (diag(exp(G_last - G)) K)^T U.
// That is the recurrence of ops.h regrouped; every exp() factor is <= 1.
//
// A prefix-cache save splits the sequence into two segments (ChunkSpans).
//
// Kernel 1 (chunk_prepare.cu), parallel over chunks and value heads, forms
// K K^T and Q K^T on tensor cores, inverts I + A in fp32 by forward
// substitution (one column of T per thread, no barrier inside the solve), and
// forms W and U~ as products with T on tensor cores, T split into two TF32
// parts (about 22 of fp32's 24 mantissa bits). Kernel 2 (this file) walks the
// chunks of a sequence in order with a block of VB state columns (32 or 64),
// kept in fp32 registers with a TF32 copy in shared memory, and runs its
// products on tensor cores; it stages each chunk's operands while the
// previous chunk's products run.
//
// Precision: the state kernel's product operands carry a 10-bit mantissa
// (T's products in the preparation carry two TF32 parts) and accumulate in
// fp32; the state itself is only ever accumulated in fp32 (the accumulator
// starts from gamma_last S). Q, K, W and P, whose entries lie in [-1, 1], are
// stored as fp16 (DeltaRuleScratch): TF32's mantissa width in half the bytes
// (ties to even, and fewer bits below fp16's 2^-14 normal range: errors
// under 2^-25 an entry). S and U, which have no such bound, stay fp32 and
// enter the products rounded to TF32; U~ is only subtracted, in fp32. BF16
// operands, as other engines use, would carry 8 times the rounding.
#include "backend/cuda/delta_rule_chunks.cuh"

namespace hyllm::cuda {
namespace {

using namespace delta_rule_fragments;
using namespace delta_rule_chunks;

// ---------------------------------------------------------------------------
// Kernel 2: per (block of VB state columns, value head, sequence).
//
// The smaller block gives more blocks; the larger one reads the chunk's W, Q,
// K and P (the same for every block of a head) half as often. Two blocks of
// 32 columns fit an SM's shared memory, one of 64, so VB = 32 wins while its
// grid fits one wave at two blocks an SM and VB = 64 once it would not
// (choose_v_block).
template <int VB>
constexpr int kStateBlocksPerSm = VB == 32 ? 2 : 1;

// Shared-memory layout, byte offsets. Row strides are padded so that each
// fragment load touches 32 distinct banks (the fp32 rows by 8 floats: a
// half-warp's 8-byte k pairs then cover the banks once; the scalar stores
// that write them conflict two ways, and are fewer); every row starts 16-byte
// aligned. The fp32 B operands (S, U and the decayed U) are stored transposed
// and rounded to TF32, so that a fragment's k pair is one 8-byte load and
// needs no conversion; the fp16 A operands are read by ldmatrix, K transposed.
template <int DKP, int VB>
struct StateSmem {
  static constexpr int kH = DKP + 8;            // fp16 W, Q and K rows
  static constexpr int kP = kDeltaChunk + 8;    // fp16 P rows
  static constexpr int kV = VB + 4;             // fp32 U~ rows, as staged
  static constexpr int kT = kDeltaChunk + 8;    // fp32 U^T and (diag(exp(G_last - G)) U)^T rows
  static constexpr int kS = DKP + 8;            // fp32 S^T rows
  static constexpr int w = 0;
  static constexpr int q = w + 2 * kDeltaChunk * kH;
  static constexpr int k = q + 2 * kDeltaChunk * kH;
  static constexpr int p = k + 2 * kDeltaChunk * kH;
  static constexpr int ut = p + 2 * kDeltaChunk * kP;
  static constexpr int un = ut + 4 * kDeltaChunk * kV;
  static constexpr int ud = un + 4 * VB * kT;
  static constexpr int s = ud + 4 * VB * kT;
  static constexpr int gamma = s + 4 * VB * kS;            // exp(G_i)
  static constexpr int to_last = gamma + 4 * kDeltaChunk;  // exp(G_last - G_i)
  static constexpr int bytes = to_last + 4 * kDeltaChunk;
  static_assert(q % 16 == 0 && k % 16 == 0 && p % 16 == 0 && ut % 16 == 0 && un % 16 == 0 && ud % 16 == 0 &&
                    s % 16 == 0,
                "16-byte copies and ldmatrix rows");
  static_assert(s - un >= 4 * VB * kS, "S^T fits over U^T and Ud^T (store_state)");
  static_assert(kStateBlocksPerSm<VB> * (bytes + 1024) <= 228 * 1024, "the blocks an SM takes fit its shared memory");
};

template <int DKP, int VB>
__global__ void __launch_bounds__(kThreads, kStateBlocksPerSm<VB>)
    chunk_state_kernel(GatedDeltaRuleParams p, DeltaRuleScratch s) {
  using Lay = StateSmem<DKP, VB>;
  constexpr int NT = VB / 16;   // 8-column mma tiles per warp: two column halves of VB / 2
  constexpr int MT = DKP / 64;  // 16-row tiles of S per warp: four row quarters of DKP / 4
  extern __shared__ __align__(16) unsigned char smem[];
  const int seq = blockIdx.z, vh = blockIdx.y, j0 = blockIdx.x * VB;
  const int t0 = p.query_start_loc[seq], n = p.query_start_loc[seq + 1] - t0;
  if (n < kChunkedFromTokens) return;
  const int64_t slot = p.state_indices[seq];
  if (slot < 0 || slot >= p.num_slots) return;
  const int Dk = p.k_dim, Dv = p.v_dim, Hk = p.num_k_heads, Hv = p.num_v_heads;
  const int kh = vh / (Hv / Hk);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  uint16_t* Ws = reinterpret_cast<uint16_t*>(smem + Lay::w);
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem + Lay::q);
  uint16_t* Ks = reinterpret_cast<uint16_t*>(smem + Lay::k);
  uint16_t* Ps = reinterpret_cast<uint16_t*>(smem + Lay::p);
  float* Ut = reinterpret_cast<float*>(smem + Lay::ut);
  float* UnT = reinterpret_cast<float*>(smem + Lay::un);
  float* UdT = reinterpret_cast<float*>(smem + Lay::ud);
  float* StT = reinterpret_cast<float*>(smem + Lay::s);
  float* gamma = reinterpret_cast<float*>(smem + Lay::gamma);
  float* to_last = reinterpret_cast<float*>(smem + Lay::to_last);

  // Steps over the chunk's 64 rows: warp -> rows 16 (warp % 4), columns VB / 2 (warp / 4).
  const int m0 = 16 * (warp & 3), n0 = (VB / 2) * (warp >> 2);
  // The state update's tiles: warp -> state rows DKP / 4 (warp % 4), the same
  // columns. Each thread keeps its entries of S in fp32 registers across the
  // chunks (the accumulator layout of those tiles): S is only ever
  // accumulated there, and StT holds its TF32 copy for the products.
  float s_own[MT][NT][4];
  auto own_row = [&](int mt, int e) { return (warp & 3) * (DKP / 4) + 16 * mt + acc_row(e, g); };
  auto own_col = [&](int nt, int e) { return n0 + 8 * nt + acc_col(e, t); };
  float* state = p.state + (slot * Hv + vh) * static_cast<int64_t>(Dv) * Dk;
  // This thread's entries of S into a transposed [column][row] copy (stride
  // kS), rounded to TF32 where only products read it.
  auto put_own = [&](float* dst, bool tf32) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = s_own[mt][nt][e];
          dst[own_col(nt, e) * Lay::kS + own_row(mt, e)] = tf32 ? round_tf32(v) : v;
        }
  };
  // S into a slot's state (v-major) with whole-row stores, through shared
  // memory over U^T and Ud^T, which no warp reads after the first barrier.
  auto store_state = [&](float* dst) {
    float* Sx = UnT;
    __syncthreads();
    put_own(Sx, false);
    __syncthreads();
    for (int i = tid; i < DKP * VB; i += blockDim.x) {
      const int jj = i / DKP, k = i % DKP, j = j0 + jj;
      if (k < Dk && j < Dv) dst[static_cast<int64_t>(j) * Dk + k] = Sx[jj * Lay::kS + k];
    }
  };
  const int save_len = save_len_of(p, seq, n);
  float* save = save_len > 0 ? p.state + (static_cast<int64_t>(p.save_slots[seq]) * Hv + vh) * Dv * Dk : nullptr;

  const int64_t out_stride = static_cast<int64_t>(Hv) * Dv;
  const ChunkSpans spans = chunk_spans(p, seq, n);
  const int chunks = spans.count();

  // Chunk c's operands are staged in two cp.async groups, each into buffers
  // that an earlier phase has finished with, so that the loads of chunk c + 1
  // overlap the products of chunk c: group A (W, Q, U~, read by the first
  // phase) once the first phase of chunk c is done, group B (K, P, read by
  // the later phases) once chunk c is done. Groups are committed in the
  // order A(0) B(0) A(1) B(1) ..., one of each per chunk by every thread.
  auto stage_a = [&](int c) {
    const int64_t tb = t0 + spans.start(c);
    const int rows = spans.end(c) - spans.start(c);
    stage_rows(Ws, Lay::kH, s.w + (tb * Hv + vh) * DKP, static_cast<int64_t>(Hv) * DKP, rows, DKP);
    stage_rows(Ut, Lay::kV, s.u + (tb * Hv + vh) * s.dv_pad + j0, static_cast<int64_t>(Hv) * s.dv_pad, rows, VB);
    stage_qk<DKP>(Qs, Lay::kH, s.q16, p, tb, kh, rows);
    cp_async_commit();
  };
  auto stage_b = [&](int c) {
    const int64_t tb = t0 + spans.start(c);
    const int rows = spans.end(c) - spans.start(c);
    stage_rows(Ps, Lay::kP, s.p + (tb * Hv + vh) * kDeltaChunk, static_cast<int64_t>(Hv) * kDeltaChunk, rows,
               kDeltaChunk);
    stage_qk<DKP>(Ks, Lay::kH, s.k16, p, tb, kh, rows);
    cp_async_commit();
  };
  // G_i and G_last of chunk c, for thread i < kDeltaChunk: read into
  // registers one chunk ahead, written to gamma / to_last at the chunk's top.
  float g_i = 0.0f, g_last = 0.0f;
  auto load_g = [&](int c) {
    if (tid < kDeltaChunk) {
      const int rows = spans.end(c) - spans.start(c);
      const float* gc = s.gcum + (t0 + spans.start(c)) * Hv + vh;
      g_i = tid < rows ? gc[static_cast<int64_t>(tid) * Hv] : 0.0f;
      g_last = gc[static_cast<int64_t>(rows - 1) * Hv];
    }
  };
  stage_a(0);
  stage_b(0);
  load_g(0);
  // This thread's entries of S from state row j0 + column (v-major), element
  // row, while the first chunk's operands arrive.
  const bool init = p.has_initial_state[seq] != 0;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = own_row(mt, e), j = j0 + own_col(nt, e);
        s_own[mt][nt][e] = (init && k < Dk && j < Dv) ? state[static_cast<int64_t>(j) * Dk + k] : 0.0f;
      }
  put_own(StT, true);

  for (int c = 0; c < chunks; ++c) {
    const int64_t tb = t0 + spans.start(c);
    const int rows = spans.end(c) - spans.start(c);
    // gamma and to_last were last read before the barrier that ended chunk c - 1.
    if (tid < kDeltaChunk) {
      gamma[tid] = expf(g_i);
      to_last[tid] = tid < rows ? expf(g_last - g_i) : 0.0f;
    }
    cp_async_wait<1>();  // group A(c); B(c) may still be in flight
    __syncthreads();

    // U = U~ - W S and Q S on this warp's tile.
    float acc_u[NT][4] = {}, acc_o[NT][4] = {};
#pragma unroll 2
    for (int k0 = 0; k0 < DKP; k0 += 16) {
      uint32_t aw[2][4], aq[2][4];
      load_a_h_x2(aw, Ws, Lay::kH, m0, k0, lane);
      load_a_h_x2(aq, Qs, Lay::kH, m0, k0, lane);
      for_b_tiles_x2<NT>(StT, Lay::kS, k0, n0, lane, [&](int h, int nt, uint32_t b0, uint32_t b1) {
        mma_tf32(acc_u[nt], aw[h], b0, b1);
        mma_tf32(acc_o[nt], aq[h], b0, b1);
      });
    }
    // U and its rows decayed to the chunk's end, transposed, as TF32 operands only.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = m0 + g + 8 * half;
      const float decay = to_last[r];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = n0 + 8 * nt + 2 * t;
        const float2 ut = *reinterpret_cast<const float2*>(Ut + r * Lay::kV + col);
        const float u0 = ut.x - acc_u[nt][2 * half], u1 = ut.y - acc_u[nt][2 * half + 1];
        UnT[col * Lay::kT + r] = round_tf32(u0);
        UnT[(col + 1) * Lay::kT + r] = round_tf32(u1);
        UdT[col * Lay::kT + r] = round_tf32(decay * u0);
        UdT[(col + 1) * Lay::kT + r] = round_tf32(decay * u1);
      }
    }
    if (c + 1 < chunks) load_g(c + 1);
    cp_async_wait<0>();  // group B(c)
    __syncthreads();
    // Nothing reads W, Q or U~ of chunk c after the barrier above.
    if (c + 1 < chunks) stage_a(c + 1);

    // O = diag(gamma) Q S + P U.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float gm = gamma[m0 + acc_row(e, g)];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) acc_o[nt][e] *= gm;
    }
#pragma unroll
    for (int k0 = 0; k0 < kDeltaChunk; k0 += 16) {
      uint32_t ap[2][4];
      load_a_h_x2(ap, Ps, Lay::kP, m0, k0, lane);
      for_b_tiles_x2<NT>(UnT, Lay::kT, k0, n0, lane, [&](int h, int nt, uint32_t b0, uint32_t b1) {
        mma_tf32(acc_o[nt], ap[h], b0, b1);
      });
    }
    // Two adjacent columns a store where Dv keeps the pair 4-byte aligned.
    const bool paired_out = Dv % 2 == 0 && reinterpret_cast<uintptr_t>(p.out) % 4 == 0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = m0 + g + 8 * half;
      if (r >= rows) continue;
      uint16_t* out_row = p.out + (tb + r) * out_stride + static_cast<int64_t>(vh) * Dv;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int j = j0 + n0 + 8 * nt + 2 * t;
        const float o0 = acc_o[nt][2 * half], o1 = acc_o[nt][2 * half + 1];
        if (paired_out && j + 1 < Dv) {
          *reinterpret_cast<uint32_t*>(out_row + j) = pack_bf16(o0, o1);
        } else {
          if (j < Dv) out_row[j] = f2bf(o0);
          if (j + 1 < Dv) out_row[j + 1] = f2bf(o1);
        }
      }
    }

    // S' = gamma_last S + K^T (diag(exp(G_last - G)) U) on this thread's
    // entries. Nothing reads StT after the barrier above until the next one.
    const float gamma_last = gamma[rows - 1];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int ms = (warp & 3) * (DKP / 4) + 16 * mt;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s_own[mt][nt][e] *= gamma_last;
#pragma unroll
      for (int k0 = 0; k0 < kDeltaChunk; k0 += 16) {
        uint32_t a[2][4];
        load_a_h_trans_x2(a, Ks, Lay::kH, ms, k0, lane);
        for_b_tiles_x2<NT>(UdT, Lay::kT, k0, n0, lane, [&](int h, int nt, uint32_t b0, uint32_t b1) {
          mma_tf32(s_own[mt][nt], a[h], b0, b1);
        });
      }
    }
    put_own(StT, true);
    if (save != nullptr && spans.end(c) == save_len) store_state(save);
    __syncthreads();
    // Nothing reads K or P of chunk c after the barrier above.
    if (c + 1 < chunks) stage_b(c + 1);
  }

  store_state(state);
}

// The state kernel's column block for this call: 32 while its grid fits one
// wave at two blocks an SM, else 64 where the padded Dv allows.
int choose_v_block(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s) {
  const int64_t blocks32 = static_cast<int64_t>(s.dv_pad / 32) * p.num_v_heads * p.num_seqs;
  return s.dv_pad % 64 == 0 && blocks32 > kStateBlocksPerSm<32> * p.num_sms ? 64 : 32;
}

template <int DKP>
void launch_state_dk(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, cudaStream_t stream) {
  if (choose_v_block(p, s) == 64) {
    launch_with_smem(chunk_state_kernel<DKP, 64>, dim3(s.dv_pad / 64, p.num_v_heads, p.num_seqs),
                     StateSmem<DKP, 64>::bytes, p, s, stream);
  } else {
    launch_with_smem(chunk_state_kernel<DKP, 32>, dim3(s.dv_pad / 32, p.num_v_heads, p.num_seqs),
                     StateSmem<DKP, 32>::bytes, p, s, stream);
  }
}

}  // namespace

void launch_chunked_delta_rule(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, cudaStream_t stream) {
  launch_chunk_prepare(p, s, stream);
  if (s.dk_pad == 64) {
    launch_state_dk<64>(p, s, stream);
  } else {
    launch_state_dk<128>(p, s, stream);
  }
}

}  // namespace hyllm::cuda
