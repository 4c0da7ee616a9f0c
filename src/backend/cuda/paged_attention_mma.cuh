// The two tensor-core forms of the paged attention kernel's math
// (paged_attention.cu), chosen per launch:
// - WarpMma: warp MMAs (mma.sync m16n8k16) over tiles of padded rows, each
//   warp owning 16 of the block's 64 rows. Every architecture; the decode
//   launches, where a warp with no valid row skips its math.
// - WarpgroupMma (sm_90a): the block's 4 warps as one warpgroup, asynchronous
//   warpgroup MMAs (wgmma) over 128-byte-swizzled tiles. S = Q K^T reads Q
//   and K from shared memory; O += P V takes P from the S registers and V
//   N-major from shared memory. A K or V tile is read from shared memory
//   once per 64 rows instead of once per warp of 16, which is what bounds
//   the warp form at prefill sizes.
// Both keep the same register layouts (a thread's S and O fragments are the
// m16n8 accumulator fragments of its warp's 16 rows), so the kernel's
// softmax, merges and epilogue serve either.
#pragma once

#include "backend/cuda/paged_attention_merge.cuh"
#include "backend/cuda/wgmma.cuh"

namespace hyllm::cuda::paged_attention_detail {

// S[16 rows of the warp][kKeys] and O[16][D] as m16n8 accumulator fragments.
using STile = float[kKeys / 8][4];
template <int D>
using OTile = float[D / 8][4];

struct WarpMma {
  // A tile's rows are padded by 16 bytes, so that ldmatrix rows hit distinct banks.
  template <int D>
  static constexpr int kStride = D + 8;
  template <int D>
  static constexpr size_t kTileBytes = static_cast<size_t>(kRows) * kStride<D> * 2;
  static constexpr size_t kAlign = 16;
  // Every warp computes only when it holds a valid row.
  static constexpr bool kWarpgroupWide = false;

  // Element offset of 16-byte chunk c (elements 8c..8c+7) of tile row r.
  template <int D>
  __device__ static __forceinline__ int chunk(int r, int c) {
    return r * kStride<D> + c * 8;
  }
  __device__ static __forceinline__ void tiles_written() {}

  // S = Q K^T for the warp's 16 rows over the tile's live 16-key chunks
  // (all of them when kFull).
  template <int D, bool kFull>
  __device__ static __forceinline__ void qk(STile& s, const uint16_t* sq, const uint16_t* sk, int warp, int lane,
                                            int live_chunks) {
    constexpr int S = kStride<D>;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, sq + (warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * S + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; nt += 2) {
        if (!kFull && nt / 2 >= live_chunks) break;
        uint32_t b[4];
        ldmatrix_x4(b, sk + (nt * 8 + (lane % 8) + (lane / 16) * 8) * S + kk * 16 + ((lane / 8) % 2) * 8);
        mma_bf16(s[nt], a, b[0], b[1]);
        mma_bf16(s[nt + 1], a, b[2], b[3]);
      }
    }
  }

  // O += P V with P from the S fragments (the C layout of two n-tiles is the
  // A layout of one k16 step), over the live 16-key chunks.
  template <int D, bool kFull>
  __device__ static __forceinline__ void pv(OTile<D>& acc, const STile& s, const uint16_t* sv, int lane,
                                            int live_chunks) {
    constexpr int S = kStride<D>;
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      if (!kFull && kc >= live_chunks) break;
      uint32_t a[4];
      a[0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
      a[1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
      a[2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
      a[3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, sv + (kc * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * S + dt * 8 + (lane / 16) * 8);
        mma_bf16(acc[dt], a, b[0], b[1]);
        mma_bf16(acc[dt + 1], a, b[2], b[3]);
      }
    }
  }
};

// A tile is D / 64 column blocks, each [64 rows][64 elements] with 128-byte
// rows in the 128-byte swizzle (8-row atoms of 1024 bytes): the K-major layout
// of the wgmma operands Q and K, and for V (whose K dimension is the keys) the
// N-major one, which the same bytes are.
struct WarpgroupMma {
  static_assert(kRows == 64 && kKeys == 64 && kThreads == 128, "one warpgroup of m64 MMAs over 64-key tiles");
  static constexpr int kBlockElems = kRows * 64;  // one column block
  template <int D>
  static constexpr size_t kTileBytes = static_cast<size_t>(kRows) * D * 2;
  static constexpr size_t kAlign = 1024;
  // wgmma is warpgroup-wide: every warp issues it, whatever its rows.
  static constexpr bool kWarpgroupWide = true;

  template <int D>
  __device__ static __forceinline__ int chunk(int r, int c) {
    return (c / 8) * kBlockElems + wgmma::swizzled(r, c % 8) / 2;
  }
  // The tiles' bytes came through the generic proxy (cp.async, st.shared):
  // each writer fences them for the async proxy before the barrier that
  // publishes them to the MMAs.
  __device__ static __forceinline__ void tiles_written() {
#ifdef HYLLM_WGMMA
    wgmma::fence_proxy_async();
#endif
  }

  // Every key chunk is computed (the mask hides the dead ones, whose K rows
  // are zero): an m64n64 MMA has no narrower form worth a branch.
  template <int D, bool kFull>
  __device__ static __forceinline__ void qk(STile& s, const uint16_t* sq, const uint16_t* sk, int, int, int) {
#ifdef HYLLM_WGMMA
    float(&d)[kKeys / 2] = reinterpret_cast<float(&)[kKeys / 2]>(s);
    wgmma::fence_operands(d);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int block = (kk / 4) * kBlockElems;
      const uint64_t a = wgmma::smem_desc(sq + block) + 2 * (kk % 4);
      const uint64_t b = wgmma::smem_desc(sk + block) + 2 * (kk % 4);
      wgmma::m64n64k16_bf16(d, a, b, kk > 0 ? 1 : 0);
    }
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operands(d);
#endif
  }

  template <int D, bool kFull>
  __device__ static __forceinline__ void pv(OTile<D>& acc, const STile& s, const uint16_t* sv, int,
                                            int live_chunks) {
#ifdef HYLLM_WGMMA
    uint32_t a[kKeys / 16][4];
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      a[kc][0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
      a[kc][1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
      a[kc][2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
      a[kc][3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
    }
    float(&o)[D / 2] = reinterpret_cast<float(&)[D / 2]>(acc);
    wgmma::fence_operands(o);
    wgmma::fence();
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      if (!kFull && kc >= live_chunks) break;
#pragma unroll
      for (int cb = 0; cb < D / 64; ++cb) {
        // Keys 16 kc .. 16 kc + 15 are two 8-row atoms of column block cb.
        const uint64_t b = wgmma::smem_desc_n_major(sv + cb * kBlockElems + kc * 16 * 64);
        wgmma::m64n64k16_bf16_rs_n_major(reinterpret_cast<float(&)[32]>(o[cb * 32]), a[kc], b);
      }
    }
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operands(o);
    wgmma::fence_operands(a);
#endif
  }
};

}  // namespace hyllm::cuda::paged_attention_detail
