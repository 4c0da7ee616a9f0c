// The chunked gated delta rule's outputs (chunked_delta_rule.cu's notation):
//   O = diag(gamma) Q S + P U
// per chunk, from the chunk's start state S and U, which the state kernel
// left in the scratch (hs, and u over U~). No chunk waits for another, so
// this runs over all chunks, value heads and column blocks at once, off the
// sequential walk. The products, their operands and their order are the ones
// the walk would form: Q S over ascending k in TF32 with Q rounded here and S
// stored rounded, scaled by gamma, then P U accumulated onto it.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/delta_rule_scratch.cuh"
#include "backend/cuda/delta_rule_tiles.cuh"

namespace hyllm::cuda {
namespace {

using namespace delta_tiles;

// Shared-memory layout in floats, strides padded as in the state kernel.
template <int DKP, int VB>
struct OutputSmem {
  static constexpr int kQ = DKP + 4;          // Q, read as A rows
  static constexpr int kP = kDeltaChunk + 4;  // P, read as A rows
  static constexpr int kV = VB + 8;           // S and U, read as B
  static constexpr int q = 0;
  static constexpr int p = q + kDeltaChunk * kQ;
  static constexpr int s = p + kDeltaChunk * kP;
  static constexpr int u = s + DKP * kV;
  static constexpr int gamma = u + kDeltaChunk * kV;  // exp(G_i)
  static constexpr int total = gamma + kDeltaChunk;
};

// Block (chunk x column block, value head, sequence): the chunk's 64 output
// rows of VB columns; warp -> rows 16 (warp % 4), columns VB / 2 (warp / 4).
template <int DKP, int VB>
__global__ void __launch_bounds__(kThreads) chunk_output_kernel(GatedDeltaRuleParams p, DeltaRuleScratch s) {
  using Lay = OutputSmem<DKP, VB>;
  constexpr int NT = VB / 16;
  extern __shared__ __align__(16) float sm[];
  __shared__ int red[kThreads / 32];
  const int col_blocks = s.dv_pad / VB;
  const int c = blockIdx.x / col_blocks, j0 = (blockIdx.x % col_blocks) * VB;
  const int seq = blockIdx.z, vh = blockIdx.y;
  const int t0 = p.query_start_loc[seq], n = p.query_start_loc[seq + 1] - t0;
  if (n < kChunkedFromTokens) return;
  const int64_t slot = p.state_indices[seq];
  if (slot < 0 || slot >= p.num_slots) return;  // the state kernel skipped it too
  const ChunkSpans spans = chunk_spans(p, seq, n);
  if (c >= spans.count()) return;
  const int Dv = p.v_dim, Hk = p.num_k_heads, Hv = p.num_v_heads;
  const int kh = vh / (Hv / Hk);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int64_t tb = t0 + spans.start(c);
  const int rows = spans.end(c) - spans.start(c);
  float* Qs = sm + Lay::q;
  float* Ps = sm + Lay::p;
  float* Ss = sm + Lay::s;
  float* Us = sm + Lay::u;
  float* gamma = sm + Lay::gamma;

  // Q, P and U do not depend on the slot numbering: asked for first.
  stage_qk(Qs, Lay::kQ, s.qn, p, tb, kh, rows, DKP);
  stage_rows16(Ps, Lay::kP, s.p + (tb * Hv + vh) * kDeltaChunk, static_cast<int64_t>(Hv) * kDeltaChunk, rows,
               kDeltaChunk / 4, kDeltaChunk / 4);
  stage_rows16(Us, Lay::kV, s.u + (tb * Hv + vh) * s.dv_pad + j0, static_cast<int64_t>(Hv) * s.dv_pad, rows, VB / 4,
               VB / 4);
  const int slot_base = chunk_slot_base(p, seq, red);
  const float* hs = s.hs + ((static_cast<int64_t>(slot_base) + c) * Hv + vh) * DKP * s.dv_pad + j0;
  stage_rows16(Ss, Lay::kV, hs, s.dv_pad, DKP, VB / 4, VB / 4, DKP);
  cp_async_commit();
  if (tid < kDeltaChunk) gamma[tid] = expf(tid < rows ? s.gcum[(tb + tid) * Hv + vh] : 0.0f);
  cp_async_wait<0>();
  __syncthreads();

  const int m0 = 16 * (warp & 3), n0 = (VB / 2) * (warp >> 2);
  float acc[NT][4] = {};
  mma_rows<NT, DKP, false, true>(acc, Qs, Lay::kQ, Ss, Lay::kV, m0, n0, g, t);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float gm = gamma[m0 + acc_row(e, g)];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[nt][e] *= gm;
  }
  mma_rows<NT, kDeltaChunk, true, true>(acc, Ps, Lay::kP, Us, Lay::kV, m0, n0, g, t);
  const int64_t out_stride = static_cast<int64_t>(Hv) * Dv;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = m0 + acc_row(e, g), j = j0 + n0 + 8 * nt + acc_col(e, t);
      if (r < rows && j < Dv) p.out[(tb + r) * out_stride + static_cast<int64_t>(vh) * Dv + j] = f2bf(acc[nt][e]);
    }
  }
}

template <int DKP, int VB>
void launch_vb(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, int max_chunks, cudaStream_t stream) {
  const size_t smem = sizeof(float) * OutputSmem<DKP, VB>::total;
  auto kernel = chunk_output_kernel<DKP, VB>;
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  kernel<<<dim3(max_chunks * (s.dv_pad / VB), p.num_v_heads, p.num_seqs), kThreads, smem, stream>>>(p, s);
}

template <int DKP>
void launch_dk(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, int max_chunks, cudaStream_t stream) {
  if (s.dv_pad % 64 == 0) {
    launch_vb<DKP, 64>(p, s, max_chunks, stream);
  } else {
    launch_vb<DKP, 32>(p, s, max_chunks, stream);
  }
}

}  // namespace

void launch_chunk_output(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, int max_chunks,
                         cudaStream_t stream) {
  if (s.dk_pad == 64) {
    launch_dk<64>(p, s, max_chunks, stream);
  } else {
    launch_dk<128>(p, s, max_chunks, stream);
  }
}

}  // namespace hyllm::cuda
