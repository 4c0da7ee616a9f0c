// The CUDA kernel table's token mixers: gated attention and Gated DeltaNet.
#include <cmath>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/launch/attention.h"
#include "backend/cuda/launch/gdn.h"

namespace hyllm {

using namespace cuda_detail;

void CudaKernels::attention_prep(const AttentionPrepArgs& a) {
  cuda::AttentionPrepParams p;
  const int64_t half = a.rotary_dim / 2;
  if (half > cuda::kMaxRotaryHalf) {
    fail(ErrorCode::kUnsupported, "attention_prep: rotary_dim {} exceeds the cuda kernel's {}", a.rotary_dim,
         2 * cuda::kMaxRotaryHalf);
  }
  if (a.head_dim > cuda::kMaxPrepHeadDim) {
    fail(ErrorCode::kUnsupported, "attention_prep: head_dim {} exceeds the cuda kernel's {}", a.head_dim,
         cuda::kMaxPrepHeadDim);
  }
  p.q_gate = col(a.q_gate);
  p.q_gate_stride = a.q_gate.stride();
  p.k = col(a.k);
  p.k_stride = a.k.stride();
  p.v = col(a.v);
  p.v_stride = a.v.stride();
  p.q_norm = a.q_norm.data();
  p.q_norm_f32 = is_f32(a.q_norm);
  p.k_norm = a.k_norm.data();
  p.k_norm_f32 = is_f32(a.k_norm);
  p.positions = i32(a.positions);
  p.slot_mapping = i32(a.slot_mapping);
  p.q_out = bf_mut(a.q_out);
  p.gate_out = bf_mut(a.gate_out);
  p.k_cache = a.cache.k.data();
  p.v_cache = a.cache.v.data();
  p.fp8_cache = a.cache.dtype() == DType::kF8E4M3;
  p.k_scale = a.cache.k_scale;
  p.v_scale = a.cache.v_scale;
  p.num_slots = a.cache.num_blocks() * a.cache.block_size();
  p.tokens = to_int(a.positions.dim(0), "tokens");
  p.num_q_heads = to_int(a.num_q_heads, "num_q_heads");
  p.num_kv_heads = to_int(a.num_kv_heads, "num_kv_heads");
  p.head_dim = to_int(a.head_dim, "head_dim");
  p.rotary_dim = to_int(a.rotary_dim, "rotary_dim");
  p.eps = a.eps;
  // The same fp32 expression as the CPU reference, so both rotate by the same angles.
  for (int64_t i = 0; i < half; ++i) {
    p.inv_freq[i] = 1.0f / std::pow(a.rope_theta, static_cast<float>(2 * i) / static_cast<float>(a.rotary_dim));
  }
  cuda::launch_attention_prep(p, stream_);
  check_launch("attention_prep");
}

void CudaKernels::paged_attention(const PagedAttentionArgs& a) {
  if (!cuda::paged_attention_supported(static_cast<int>(a.head_dim))) {
    fail(ErrorCode::kUnsupported, "paged_attention: head_dim {} is not built on the cuda backend (32/64/128/256)",
         a.head_dim);
  }
  cuda::PagedAttentionParams p;
  p.q = bf(a.q);
  p.k_cache = a.cache.k.data();
  p.v_cache = a.cache.v.data();
  p.fp8_cache = a.cache.dtype() == DType::kF8E4M3;
  p.k_scale = a.cache.k_scale;
  p.v_scale = a.cache.v_scale;
  p.block_tables = i32(a.block_tables);
  p.max_blocks_per_seq = to_int(a.block_tables.dim(1), "max blocks per sequence");
  p.query_start_loc = i32(a.query_start_loc);
  p.seq_lens = i32(a.seq_lens);
  p.gate = a.gate.empty() ? nullptr : bf(a.gate);
  p.out = bf_mut(a.out);
  p.num_seqs = to_int(a.seq_lens.dim(0), "sequences");
  p.tokens = to_int(a.q.dim(0), "tokens");
  p.num_q_heads = to_int(a.num_q_heads, "num_q_heads");
  p.num_kv_heads = to_int(a.num_kv_heads, "num_kv_heads");
  p.head_dim = to_int(a.head_dim, "head_dim");
  p.block_size = to_int(a.cache.block_size(), "block size");
  p.num_blocks = a.cache.num_blocks();
  p.scale = a.scale;
  p.max_query_len = to_int(a.max_query_len, "max_query_len");
  p.max_seq_len = to_int(a.max_seq_len, "max_seq_len");
  p.num_sms = num_sms_;
  p.split_counters = attn_split_counters_;
  p.warpgroup_mma = sm90a_ && warpgroup_attention_;
  if (!cuda::paged_attention_grid_fits(p)) {
    fail(ErrorCode::kUnsupported,
         "paged_attention: {} sequences and {} query tokens in one step exceed the cuda kernel's grid; "
         "lower --max-num-batched-tokens or --max-num-seqs", p.num_seqs, p.max_query_len);
  }
  const size_t bytes = cuda::paged_attention_scratch_bytes(p);
  cuda::launch_paged_attention(p, bytes ? scratch(bytes) : nullptr, stream_);
  check_launch("paged_attention");
}

void CudaKernels::gdn_conv(const GdnConvArgs& a) {
  const int64_t K = a.weight.dim(-1);
  if (!cuda::gdn_conv_supported(static_cast<int>(K))) {
    fail(ErrorCode::kUnsupported, "gdn_conv: kernel width {} is not built on the cuda backend (2-8)", K);
  }
  cuda::GdnConvParams p;
  p.x = col(a.x);
  p.x_stride = a.x.stride();
  p.weight = bf(a.weight);
  p.conv_state = bf_mut(a.conv_state);
  p.num_slots = a.conv_state.dim(0);
  p.query_start_loc = i32(a.query_start_loc);
  p.state_indices = i32(a.state_indices);
  p.has_initial_state = i32(a.has_initial_state);
  p.out = bf_mut(a.out);
  p.tokens = to_int(a.out.dim(0), "tokens");
  p.num_seqs = to_int(a.state_indices.dim(0), "sequences");
  p.channels = to_int(a.weight.dim(0), "channels");
  p.kernel = static_cast<int>(K);
  p.max_query_len = to_int(a.max_query_len, "max_query_len");
  if (!a.spec_states.empty()) {
    p.spec_states = bf_mut(a.spec_states);
    p.spec_k = to_int(a.spec_states.dim(1), "spec_states K");
  }
  if (!a.save.empty()) {
    p.save_slots = i32(a.save.save_slots);
    p.save_lens = i32(a.save.save_lens);
  }
  cuda::launch_gdn_conv(p, stream_);
  check_launch("gdn_conv");
}

void CudaKernels::gated_delta_rule(const GatedDeltaRuleArgs& a) {
  if (!cuda::gated_delta_rule_supported(static_cast<int>(a.k_dim))) {
    fail(ErrorCode::kUnsupported, "gated_delta_rule: k_dim {} exceeds the cuda kernel's 256", a.k_dim);
  }
  cuda::GatedDeltaRuleParams p;
  p.qkv = bf(a.qkv);
  p.a = col(a.a);
  p.a_stride = a.a.stride();
  p.b = col(a.b);
  p.b_stride = a.b.stride();
  p.A_log = a.A_log.data();
  p.A_log_f32 = is_f32(a.A_log);
  p.dt_bias = a.dt_bias.data();
  p.dt_bias_f32 = is_f32(a.dt_bias);
  p.state = a.state.data_as<float>();
  p.num_slots = a.state.dim(0);
  p.query_start_loc = i32(a.query_start_loc);
  p.state_indices = i32(a.state_indices);
  p.has_initial_state = i32(a.has_initial_state);
  p.out = bf_mut(a.out);
  p.tokens = to_int(a.qkv.dim(0), "tokens");
  p.num_seqs = to_int(a.state_indices.dim(0), "sequences");
  p.num_k_heads = to_int(a.num_k_heads, "num_k_heads");
  p.num_v_heads = to_int(a.num_v_heads, "num_v_heads");
  p.k_dim = to_int(a.k_dim, "k_dim");
  p.v_dim = to_int(a.v_dim, "v_dim");
  p.max_query_len = to_int(a.max_query_len, "max_query_len");
  p.chunked = a.algorithm == DeltaRuleAlgorithm::kChunked;
  p.num_sms = num_sms_;
  if (!a.spec_states.empty()) {
    p.spec_states = a.spec_states.data_as<float>();
    p.spec_k = to_int(a.spec_states.dim(1), "spec_states K");
  }
  if (!a.save.empty()) {
    p.save_slots = i32(a.save.save_slots);
    p.save_lens = i32(a.save.save_lens);
  }
  const size_t bytes = cuda::gated_delta_rule_scratch_bytes(p);
  cuda::launch_gated_delta_rule(p, bytes ? scratch(bytes) : nullptr, stream_);
  check_launch("gated_delta_rule");
}

void CudaKernels::select_state(const SelectStateArgs& a) {
  cuda::SelectStateParams p;
  p.live = a.live.data();
  p.saved = a.saved.data();
  p.num_slots = a.live.dim(0);
  p.slot_bytes = p.num_slots > 0 ? static_cast<int64_t>(a.live.nbytes()) / p.num_slots : 0;
  p.spec_k = to_int(a.saved.dim(1), "saved K");
  p.state_indices = i32(a.state_indices);
  p.keep = i32(a.keep);
  p.num_seqs = to_int(a.state_indices.dim(0), "sequences");
  if (p.slot_bytes % 2 != 0) fail(ErrorCode::kUnsupported, "select_state: {} bytes per slot", p.slot_bytes);
  cuda::launch_select_state(p, stream_);
  check_launch("select_state");
}

}  // namespace hyllm
