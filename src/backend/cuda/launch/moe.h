#pragma once
// Launchers of the MoE kernels and the grouped GEMM (see launch/dense.h for
// the conventions of these headers).

#include <cuda_runtime.h>

#include <cstdint>

namespace hyllm::cuda {

inline constexpr int kMoeMaxExperts = 1024;
inline constexpr int kMoeMaxTopK = 32;

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

// Sorts the T * top_k routed rows by expert: rows of expert e occupy
// [offsets[e], offsets[e+1]); sorted_token[pos] is the token of row pos and
// row_of[t * top_k + i] the position of (token t, choice i).
struct MoePermuteParams {
  const int32_t* topk_ids = nullptr;
  int tokens = 0;
  int top_k = 0;
  int experts = 0;
  int32_t* offsets = nullptr;       // [E + 1]
  int32_t* sorted_token = nullptr;  // [T * top_k]
  int32_t* row_of = nullptr;        // [T * top_k]
  int32_t* active = nullptr;        // [min(E, T * top_k) + 1]: experts with rows, ascending, then -1
};
void launch_moe_permute(const MoePermuteParams& p, cudaStream_t stream);

// out[pos, n] = bf16( sum_k A[pos, k] W_e[n, k] ) for every row pos of group
// e, where A[pos] = x[row_index[pos]] (or x[pos] without row_index) and W_e is
// w + e * w_expert_stride or w_table[e]. K must be a multiple of 8.
struct GroupedGemmParams {
  const uint16_t* x = nullptr;
  int64_t x_stride = 0;
  const int32_t* row_index = nullptr;
  const uint16_t* w = nullptr;
  int64_t w_expert_stride = 0;
  const uint16_t* const* w_table = nullptr;
  const int32_t* offsets = nullptr;  // [groups + 1]
  // Optional list of the groups that have rows (-1 ends it); block y then
  // handles group active[y], so the grid needs only min(groups, rows) blocks in y.
  const int32_t* active = nullptr;
  int grid_groups = 0;  // blocks in y (groups when active is null)
  uint16_t* out = nullptr;
  int64_t out_stride = 0;
  int groups = 0;
  int n = 0;
  int k = 0;
};
void launch_grouped_gemm(const GroupedGemmParams& p, cudaStream_t stream);

struct MoeCombineParams {
  const uint16_t* y = nullptr;  // [T * top_k, H], rows in sorted order
  const int32_t* row_of = nullptr;
  const int32_t* topk_ids = nullptr;
  const float* topk_weights = nullptr;
  const uint16_t* shared = nullptr;     // optional [T, H]
  const void* shared_gate = nullptr;    // optional [T, 1]
  bool shared_gate_f32 = false;
  uint16_t* out = nullptr;
  int tokens = 0;
  int top_k = 0;
  int hidden = 0;
};
void launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream);

}  // namespace hyllm::cuda
