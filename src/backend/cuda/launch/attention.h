#pragma once
// Launchers of the gated-attention kernels (see launch/dense.h for the
// conventions of these headers).

#include <cuda_runtime.h>

#include <cstdint>

namespace hyllm::cuda {

inline constexpr int kMaxRotaryHalf = 256;
// attention_prep holds a head in registers: the attention kernels' largest head.
inline constexpr int kMaxPrepHeadDim = 256;

struct AttentionPrepParams {
  const uint16_t* q_gate = nullptr;
  int64_t q_gate_stride = 0;
  const uint16_t* k = nullptr;
  int64_t k_stride = 0;
  const uint16_t* v = nullptr;
  int64_t v_stride = 0;
  const void* q_norm = nullptr;
  bool q_norm_f32 = false;
  const void* k_norm = nullptr;
  bool k_norm_f32 = false;
  const int32_t* positions = nullptr;
  const int32_t* slot_mapping = nullptr;
  uint16_t* q_out = nullptr;
  uint16_t* gate_out = nullptr;
  // bf16, or e4m3 codes of k / k_scale and v / v_scale when fp8_cache.
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  bool fp8_cache = false;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  int64_t num_slots = 0;
  int tokens = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;
  float eps = 1e-6f;
  // inv_freq[i] = 1 / theta^(2i / rotary_dim), computed on the host in fp32
  // exactly as the CPU reference computes it.
  float inv_freq[kMaxRotaryHalf] = {};
};
void launch_attention_prep(const AttentionPrepParams& p, cudaStream_t stream);

struct PagedAttentionParams {
  const uint16_t* q = nullptr;
  // bf16, or e4m3 codes read as float(code) * k_scale / v_scale when fp8_cache.
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  bool fp8_cache = false;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
  const int32_t* query_start_loc = nullptr;
  const int32_t* seq_lens = nullptr;
  const uint16_t* gate = nullptr;  // optional
  uint16_t* out = nullptr;
  int num_seqs = 0;
  int tokens = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  int64_t num_blocks = 0;
  float scale = 0.0f;
  int max_query_len = 0;  // upper bound of any sequence's new tokens
  int max_seq_len = 0;    // upper bound of any sequence's length, 0 = unknown
  int num_sms = 132;
  // paged_attention_split_counters(num_sms) counters, zero before the launch
  // and left at zero by it: the split-KV merge finds each group's last block
  // with them. Null: the launch never splits the keys.
  int32_t* split_counters = nullptr;
  // The device runs sm_90a's warpgroup MMAs: launches of more than one row
  // tile at head sizes 128 and 256 take them (paged_attention_mma.cuh).
  bool warpgroup_mma = false;
};
// Counters a backend with `num_sms` SMs owns for split_counters.
int paged_attention_split_counters(int num_sms);
// Scratch bytes the launch needs (split-KV partial results); 0 if none.
size_t paged_attention_scratch_bytes(const PagedAttentionParams& p);
// Returns false if head_dim is not one the kernels are built for.
bool paged_attention_supported(int head_dim);
// Whether the launch's grid dimensions hold its row tiles and (sequence,
// split) groups (65,535 each: 64-row tiles of tokens x query heads per KV head).
bool paged_attention_grid_fits(const PagedAttentionParams& p);
void launch_paged_attention(const PagedAttentionParams& p, void* scratch, cudaStream_t stream);

}  // namespace hyllm::cuda
