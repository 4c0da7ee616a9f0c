#pragma once
// Launchers of the MoE kernels (see launch/dense.h for the conventions of
// these headers). One MoE block runs in one of two regimes, both without a
// host read of the routing:
//
//  small (decode, T <= kMoeSmallMaxTokens): three kernels.
//   1. route_small: the router GEMV (and the shared-expert gate row) split
//      over blocks; the last block to finish does softmax / top-k /
//      renormalisation and writes the plan: the routed rows sorted by expert,
//      cut into work items of at most 8 rows (the shared expert's rows last).
//   2. up_small: per (item, 16 intermediate columns): the gate and up rows
//      times the item's x rows on tensor cores, SwiGLU, bf16 hidden rows.
//      Block-FP8 experts from kMoeUpTmaMinTokens tokens on sm_90a: up_tma,
//      the same rows from weights streamed by TMA into warpgroup MMAs.
//   3. down_small: per 16 output columns: every item's down projection, then
//      each token's weighted sum in ascending expert id plus the gated shared
//      expert, written straight to the output.
//
//  grouped (prefill and large batches, sm_90): the router GEMM (cuBLASLt),
//  top-k with per-expert counts, a plan of row tiles per expert, a grouped
//  gate_up GEMM with SwiGLU in its epilogue and a grouped down GEMM (wgmma,
//  persistent over tiles), and a combine kernel per token.
//
// Row positions ("pos"): routed rows occupy [0, T * top_k) sorted by expert
// (within an expert in any order), the shared expert's rows [T * top_k,
// T * top_k + T) in token order.

#include <cuda_runtime.h>

#include <cstdint>

namespace hyllm::cuda {

inline constexpr int kMoeMaxExperts = 1024;
inline constexpr int kMoeMaxTopK = 32;
inline constexpr int kMoeSmallMaxTokens = 32;
// Rows of one work item of the small kernels (one mma n8 tile).
inline constexpr int kMoeItemRows = 8;

struct MoeRouteParams {
  const void* logits = nullptr;  // [T, E]
  bool logits_f32 = false;
  int32_t* topk_ids = nullptr;
  float* topk_weights = nullptr;
  int tokens = 0;
  int experts = 0;
  int top_k = 0;
};
void launch_moe_route(const MoeRouteParams& p, cudaStream_t stream);

// Expert weights as the kernels read them: expert e's gate_up rows at
// gate_up + e * gate_up_stride ([2I, H], rows [gate | up]) and down rows at
// down + e * down_stride ([H, I]) (strides in elements); the shared expert
// (id == experts) at its own pointers with intermediate size shared_inter.
// Block-FP8 experts use the _q codes and their fp32 128 x 128 block scales
// (expert e's at scale + e * scale_stride, [rows / 128, cols / 128]).
struct MoeExpertPtrs {
  const uint16_t* gate_up = nullptr;
  int64_t gate_up_stride = 0;
  const uint16_t* down = nullptr;
  int64_t down_stride = 0;
  const uint16_t* shared_gate_up = nullptr;  // null: no shared expert (bf16)
  const uint16_t* shared_down = nullptr;
  const uint8_t* gate_up_q = nullptr;
  const float* gate_up_scale = nullptr;
  int64_t gate_up_scale_stride = 0;
  const uint8_t* down_q = nullptr;
  const float* down_scale = nullptr;
  int64_t down_scale_stride = 0;
  const uint8_t* shared_gate_up_q = nullptr;  // null: no shared expert (fp8)
  const float* shared_gate_up_scale = nullptr;
  const uint8_t* shared_down_q = nullptr;
  const float* shared_down_scale = nullptr;
  int experts = 0;
  int hidden = 0;
  int inter = 0;
  int shared_inter = 0;
  __host__ __device__ bool has_shared() const { return shared_gate_up != nullptr || shared_gate_up_q != nullptr; }
};

// Work items of the small kernels and the per-token routing, in scratch.
struct MoeSmallPlan {
  int32_t* num_items = nullptr;    // [1]
  int32_t* item_expert = nullptr;  // [max_items] (experts = the shared expert)
  int32_t* item_pos = nullptr;     // [max_items] first row position
  int32_t* item_rows = nullptr;    // [max_items] 1..8
  int32_t* sorted_token = nullptr;  // [T * top_k + T] token of each row position
  float* sorted_weight = nullptr;   // [T * top_k + T] routing weight (shared rows: the gate)
  int32_t* token_pos = nullptr;     // [T, top_k] a token's row positions, ascending
  int max_items = 0;
};

struct MoeRouteSmallParams {
  const uint16_t* x = nullptr;       // [T, H]
  const uint16_t* router = nullptr;  // [E, H]
  const uint16_t* gate = nullptr;    // optional [H] shared_expert_gate
  float* logits = nullptr;           // scratch [T, E + 1]
  int32_t* counter = nullptr;        // zero between launches (reset by the last block)
  int32_t* topk_ids = nullptr;       // optional [T, top_k]
  float* topk_weights = nullptr;     // optional [T, top_k]
  int32_t* expert_load = nullptr;    // optional [E], accumulated
  MoeSmallPlan plan;
  int tokens = 0;
  int hidden = 0;
  int experts = 0;
  int top_k = 0;
  bool shared = false;  // append the shared expert's items
};
void launch_moe_route_small(const MoeRouteSmallParams& p, cudaStream_t stream);

// The small regime's bf16 expert kernels:
//  up: the expert id is read beside the item count and the first weight
//    windows are loaded before the token indices and x, which they do not
//    depend on.
//  down: (item, K half) work units over 16 warps, 8 output columns per block,
//    the hidden rows as the mma's m16 side (rows 8..15 zero) and the weight
//    rows as its n8 side; fp32 partial sums in shared memory, the combine's
//    tables staged in shared memory while the weights stream. When
//    T * (top_k + 1) rows of partials do not fit in 48 KiB of shared memory,
//    a kernel with 16 columns per block and bf16 rows takes over.
//  With at most kMoeLeanMaxTokens tokens the step is latency-bound: each block
//    first asks for its weight rows in L2 by bulk prefetches (no registers
//    held, so loads the compiler schedules late still find them), up is a
//    programmatic dependent launch of route_small (its blocks wait for the
//    plan already resident) and down one of up (its blocks take the SMs that
//    up's last blocks leave free, read the plan, ask for their weights, then
//    wait for up's hidden rows). With more tokens the prefetches and the early
//    blocks compete with the weight stream and cost more than they hide.
inline constexpr int kMoeLeanMaxTokens = 2;

struct MoeSmallParams {
  const uint16_t* x = nullptr;  // [T, H]
  const uint8_t* xq = nullptr;       // block FP8: x's e4m3 codes [T, H]
  const float* xq_scale = nullptr;   // and scales, token t's block j at xq_scale[j * xq_scale_ld + t]
  int64_t xq_scale_ld = 0;
  MoeExpertPtrs w;
  MoeSmallPlan plan;
  uint16_t* hidden = nullptr;  // [T * top_k + T, hidden_ld]
  int hidden_ld = 0;           // max(inter, shared_inter)
  // Block FP8: the hidden rows quantised once, between the up and down
  // kernels (quantize_fp8): codes [rows, hidden_ld] and scales, row r's
  // 128-column block j at hidden_scale[j * hidden_rows + r].
  const uint8_t* hidden_q = nullptr;
  const float* hidden_scale = nullptr;
  int hidden_rows = 0;
  uint16_t* out = nullptr;     // [T, H]
  int tokens = 0;
  int top_k = 0;
};
void launch_moe_up_small(const MoeSmallParams& p, cudaStream_t stream);
void launch_moe_down_small(const MoeSmallParams& p, cudaStream_t stream);
// The same for block-FP8 experts (launch/moe.h MoeExpertPtrs _q pointers).
void launch_moe_up_small_fp8(const MoeSmallParams& p, cudaStream_t stream);
void launch_moe_down_small_fp8(const MoeSmallParams& p, cudaStream_t stream);

// The block-FP8 gate|up projection on TMA and e4m3 warpgroup MMAs
// (moe_up_tma_fp8.cu), for devices where sm90a_kernels_supported() (other
// targets compile it empty), from this many tokens. It streams whole weight
// boxes several steps ahead where the register-fed kernels wait on chains of
// loads, and at every token count the up projection is a read of the routed
// experts' gate|up rows, so it starts at one token, where it is no slower
// than the bulk-copy kernel (docs/BENCHMARKS.md).
inline constexpr int kMoeUpTmaMinTokens = 1;
// False (nothing enqueued) when it cannot take the call: H not a multiple of
// 128, an intermediate size not one of 32, experts not one [E * 2I, H]
// matrix, or codes TMA or 16-byte copies cannot address.
bool launch_moe_up_tma_fp8(const MoeSmallParams& p, cudaStream_t stream);

// Grouped regime. Slots are the experts that received rows, ascending, then
// the shared expert; a slot's rows are cut into tiles of tile_rows, and its
// GEMM work items are (column tile, row tile) pairs, counted per GEMM in
// up_item_begin / down_item_begin (prefix sums over slots).
struct MoeGroupedPlan {
  int32_t* counts = nullptr;          // [E] zeroed before route_grouped
  int32_t* pair_rank = nullptr;       // [T * top_k] rank of the row within its expert
  int32_t* topk_ids = nullptr;        // [T * top_k]
  float* topk_weights = nullptr;      // [T * top_k]
  int32_t* sorted_token = nullptr;    // [T * top_k + T]
  float* sorted_weight = nullptr;     // [T * top_k + T]
  int32_t* token_pos = nullptr;       // [T * top_k], unordered within a token
  int32_t* num_slots = nullptr;       // [1]
  int32_t* slot_expert = nullptr;     // [E + 1]
  int32_t* slot_pos = nullptr;        // [E + 1]
  int32_t* slot_rows = nullptr;       // [E + 1]
  int32_t* up_item_begin = nullptr;   // [E + 2]
  int32_t* down_item_begin = nullptr; // [E + 2]
};

struct MoeRouteGroupedParams {
  const uint16_t* logits = nullptr;  // [T, logits_ld] bf16
  int64_t logits_ld = 0;
  const uint16_t* gate_logits = nullptr;  // optional, row t at gate_logits[t * gate_ld]
  int64_t gate_ld = 0;
  int32_t* user_ids = nullptr;        // optional [T, top_k]
  float* user_weights = nullptr;      // optional [T, top_k]
  MoeGroupedPlan plan;
  int tokens = 0;
  int experts = 0;
  int top_k = 0;
  bool shared = false;
};
void launch_moe_route_grouped(const MoeRouteGroupedParams& p, cudaStream_t stream);

struct MoePlanGroupedParams {
  MoeGroupedPlan plan;
  int32_t* expert_load = nullptr;  // optional [E], accumulated
  int tokens = 0;
  int experts = 0;
  int top_k = 0;
  bool shared = false;
  int tile_rows = 0;     // 64 or 128
  int up_col_tile = 0;   // intermediate columns per gate_up work item
  int down_col_tile = 0; // hidden columns per down work item
  int inter = 0;
  int shared_inter = 0;
  int hidden = 0;
};
void launch_moe_plan_grouped(const MoePlanGroupedParams& p, cudaStream_t stream);

struct MoeGroupedGemmParams {
  const uint16_t* x = nullptr;  // [T, H]
  MoeExpertPtrs w;
  MoeGroupedPlan plan;
  uint16_t* hidden = nullptr;  // [T * top_k + T, hidden_ld] (bf16 experts)
  int hidden_ld = 0;
  // Block-FP8 experts: x's codes [T, H] and group-major scales [H / 128,
  // x_scale_ld]; the hidden rows' codes [T * top_k + T, hidden_ld] and scales
  // [hidden_ld / 128, hidden_scale_ld], written by the gate_up GEMM.
  const uint8_t* xq = nullptr;
  const float* x_scale = nullptr;
  int64_t x_scale_ld = 0;
  uint8_t* hidden_q = nullptr;
  float* hidden_scale = nullptr;
  int64_t hidden_scale_ld = 0;
  uint16_t* y = nullptr;       // [T * top_k + T, H]
  uint16_t* out = nullptr;     // [T, H]
  int tokens = 0;
  int top_k = 0;
  int tile_rows = 0;
  int grid = 0;  // persistent blocks
  int max_up_items = 0;
  int max_down_items = 0;
};
// Columns per work item of the grouped GEMMs.
inline constexpr int kMoeUpColTile = 128;
inline constexpr int kMoeDownColTile = 256;
void launch_moe_up_grouped(const MoeGroupedGemmParams& p, cudaStream_t stream);
void launch_moe_down_grouped(const MoeGroupedGemmParams& p, cudaStream_t stream);
void launch_moe_combine(const MoeGroupedGemmParams& p, cudaStream_t stream);

// The grouped GEMMs for block-FP8 experts (w's _q and _scale pointers),
// e4m3 operands in the MMAs (moe_grouped_fp8.cu): tile_rows 64, and
// H, inter and shared_inter multiples of 128. The gate_up GEMM writes the
// SwiGLU rows as a producer would: quantised per row and 128 columns with the
// CPU quantiser's arithmetic, into hidden_q / hidden_scale (routed rows have
// `inter` columns, the shared expert's rows `shared_inter`); `hidden` is not
// used. The weight tiles are read through TMA: false (nothing enqueued) when
// the driver cannot map the experts' codes.
bool launch_moe_up_grouped_fp8(const MoeGroupedGemmParams& p, cudaStream_t stream);
bool launch_moe_down_grouped_fp8(const MoeGroupedGemmParams& p, cudaStream_t stream);

}  // namespace hyllm::cuda
