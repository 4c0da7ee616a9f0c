#pragma once
// What the chunked delta rule's two kernels share (chunk_prepare.cu and
// chunked_delta_rule.cu, whose top comment has the algorithm): their block
// size, the staging of a chunk's q or k rows, the chunks of a sequence, and
// their launch.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/delta_rule_fragments.cuh"
#include "backend/cuda/delta_rule_scratch.cuh"
#include "backend/cuda/dynamic_smem.cuh"

namespace hyllm::cuda::delta_rule_chunks {

constexpr int kThreads = 256;  // eight warps in both kernels

// The chunk's rows of q16 or k16 for key head kh ([T, Hk, DKP] scratch).
template <int DKP>
__device__ __forceinline__ void stage_qk(uint16_t* dst, int ld, const uint16_t* src, const GatedDeltaRuleParams& p,
                                         int64_t tb, int kh, int rows) {
  delta_rule_fragments::stage_rows(dst, ld, src + (tb * p.num_k_heads + kh) * DKP,
                                   static_cast<int64_t>(p.num_k_heads) * DKP, rows, DKP);
}

// The chunks of one sequence of n tokens: kDeltaChunk tokens each from its
// start. A prefix-cache save after `split` tokens (0 < split < n, ops.h
// StateSaveArgs) cuts the sequence into two segments, [0, split) and
// [split, n), chunked each from its own start: a chunk then ends at the
// split, where the state kernel copies the state out, and that state is
// the one a call over [0, split) alone computes (the same chunks). Both
// kernels derive the same spans from the same arguments.
struct ChunkSpans {
  int n = 0;
  int split = 0;   // 0: one segment
  int before = 0;  // chunks of the first segment
  __device__ int count() const {
    return split > 0 ? before + (n - split + kDeltaChunk - 1) / kDeltaChunk : (n + kDeltaChunk - 1) / kDeltaChunk;
  }
  __device__ int start(int c) const { return c < before ? c * kDeltaChunk : split + (c - before) * kDeltaChunk; }
  __device__ int end(int c) const {
    return c < before ? min(split, (c + 1) * kDeltaChunk) : min(n, split + (c - before + 1) * kDeltaChunk);
  }
};

// The save length of sequence seq (0: none); the sequence has n tokens.
__device__ __forceinline__ int save_len_of(const GatedDeltaRuleParams& p, int seq, int n) {
  if (p.save_slots == nullptr) return 0;
  const int64_t slot = p.save_slots[seq];
  const int len = p.save_lens[seq];
  return slot >= 0 && slot < p.num_slots && len >= 1 && len <= n ? len : 0;
}

__device__ __forceinline__ ChunkSpans chunk_spans(const GatedDeltaRuleParams& p, int seq, int n) {
  ChunkSpans c;
  c.n = n;
  const int len = save_len_of(p, seq, n);
  c.split = len < n ? len : 0;
  c.before = (c.split + kDeltaChunk - 1) / kDeltaChunk;
  return c;
}

template <typename Kernel>
void launch_with_smem(Kernel kernel, dim3 grid, size_t smem, const GatedDeltaRuleParams& p,
                      const DeltaRuleScratch& s, cudaStream_t stream) {
  // With the whole carve-out as shared memory, so that the state kernel's
  // blocks that fit side by side (kStateBlocksPerSm) do.
  if (smem > 48 * 1024) allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, /*max_shared_carveout=*/true);
  kernel<<<grid, kThreads, smem, stream>>>(p, s);
}

}  // namespace hyllm::cuda::delta_rule_chunks

namespace hyllm::cuda {

// Kernel 1 of the chunked path (chunk_prepare.cu): W, U~, P and the chunks'
// cumulative log decays into the scratch, for every chunk of every sequence.
void launch_chunk_prepare(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, cudaStream_t stream);

}  // namespace hyllm::cuda
