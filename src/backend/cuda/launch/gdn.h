#pragma once
// Launchers of the Gated DeltaNet kernels (see launch/dense.h for the
// conventions of these headers).

#include <cuda_runtime.h>

#include <cstdint>

namespace hyllm::cuda {

struct GdnConvParams {
  const uint16_t* x = nullptr;  // column slice [T, C]
  int64_t x_stride = 0;
  const uint16_t* weight = nullptr;  // [C, K]
  uint16_t* conv_state = nullptr;    // [slots, K - 1, C]
  int64_t num_slots = 0;
  const int32_t* query_start_loc = nullptr;
  const int32_t* state_indices = nullptr;
  const int32_t* has_initial_state = nullptr;
  uint16_t* out = nullptr;  // [T, C]
  int tokens = 0;
  int num_seqs = 0;
  int channels = 0;
  int kernel = 0;  // K
  uint16_t* spec_states = nullptr;  // optional [slots, spec_k, K - 1, C] (ops.h)
  int spec_k = 0;
  const int32_t* save_slots = nullptr;  // optional [num_seqs] (ops.h StateSaveArgs)
  const int32_t* save_lens = nullptr;
  int max_query_len = 0;  // host bound of any sequence's tokens, 0 = unknown
};
bool gdn_conv_supported(int kernel);
void launch_gdn_conv(const GdnConvParams& p, cudaStream_t stream);

struct GatedDeltaRuleParams {
  const uint16_t* qkv = nullptr;  // [T, 2 Hk Dk + Hv Dv]
  const uint16_t* a = nullptr;    // column slice [T, Hv]
  int64_t a_stride = 0;
  const uint16_t* b = nullptr;
  int64_t b_stride = 0;
  const void* A_log = nullptr;
  bool A_log_f32 = false;
  const void* dt_bias = nullptr;
  bool dt_bias_f32 = false;
  float* state = nullptr;  // [slots, Hv, Dv, Dk]
  int64_t num_slots = 0;
  const int32_t* query_start_loc = nullptr;
  const int32_t* state_indices = nullptr;
  const int32_t* has_initial_state = nullptr;
  uint16_t* out = nullptr;  // [T, Hv * Dv]
  int tokens = 0;
  int num_seqs = 0;
  int num_k_heads = 0;
  int num_v_heads = 0;
  int k_dim = 0;
  int v_dim = 0;
  int max_query_len = 0;  // host bound of any sequence's tokens, 0 = unknown
  bool chunked = false;   // the op asked for the chunked algorithm
  int num_sms = 132;      // the GPU's SMs, for the chunked kernels' grid shape
  float* spec_states = nullptr;  // optional [slots, spec_k, Hv, Dv, Dk] (ops.h)
  int spec_k = 0;
  const int32_t* save_slots = nullptr;  // optional [num_seqs] (ops.h StateSaveArgs)
  const int32_t* save_lens = nullptr;
};
bool gated_delta_rule_supported(int k_dim);
size_t gated_delta_rule_scratch_bytes(const GatedDeltaRuleParams& p);
void launch_gated_delta_rule(const GatedDeltaRuleParams& p, void* scratch, cudaStream_t stream);

// select_state (ops.h): for each s with keep[s] >= 0, copies the saved state
// [slot][keep[s]] of slot_bytes bytes over the live state [slot].
struct SelectStateParams {
  void* live = nullptr;
  const void* saved = nullptr;
  int64_t slot_bytes = 0;  // a multiple of 2
  int64_t num_slots = 0;
  int spec_k = 0;
  const int32_t* state_indices = nullptr;
  const int32_t* keep = nullptr;
  int num_seqs = 0;
};
void launch_select_state(const SelectStateParams& p, cudaStream_t stream);

}  // namespace hyllm::cuda
