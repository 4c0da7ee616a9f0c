#pragma once
// What one forward step reads besides the weights: flat tokens of S sequences
// (no padding) and their per-token / per-sequence metadata, all as device
// tensors of the backend the model runs on (see backend/ops.h for the
// meaning of each), plus host-side sizes. The runner plans these on the host
// into fixed-capacity buffers; views here cover the used prefix.

#include <cstdint>

#include "tensor/tensor.h"

namespace hyllm {

struct StepContext {
  int64_t num_tokens = 0;  // T
  int64_t num_seqs = 0;    // S
  TensorView token_ids;          // [T] i32
  TensorView positions;          // [T] i32
  TensorView slot_mapping;       // [T] i32: KV slot of each token (block * block_size + offset)
  TensorView query_start_loc;    // [S + 1] i32
  TensorView seq_lens;           // [S] i32: tokens in the cache after this step
  TensorView block_tables;       // [S, max_blocks_per_seq] i32
  TensorView state_indices;      // [S] i32: GDN state slot of each sequence
  TensorView has_initial_state;  // [S] i32: 0 when the sequence starts in this step
  TensorView sample_rows;        // [R] i32: flat token indices whose logits are wanted
  // Prefix caching (ops.h StateSaveArgs), empty when no sequence saves: the
  // GDN layers also write each sequence's state after its first
  // state_save_lens[s] tokens of the step to slot state_save_slots[s] (< 0: none).
  TensorView state_save_slots;   // [S] i32
  TensorView state_save_lens;    // [S] i32
  int64_t max_query_len = 0;     // host hints for launch sizing
  int64_t max_seq_len = 0;
  // True when every sequence computes one token (pure decode): the GDN uses
  // its recurrent form.
  bool decode_only = false;
  // Speculative verify step: the GDN layers also keep their state after each
  // of a sequence's first K tokens (K = ModelOptions::num_speculative_tokens),
  // so that Model::rollback_states can return to any of them.
  bool keep_spec_states = false;
  // Every sequence computes this many tokens and samples each of them (a
  // speculative verify step with the same number of drafts everywhere); 0
  // otherwise. Such steps depend only on their shape, like decode steps, and
  // are replayed from device graphs too.
  int64_t uniform_query_len = 0;
  // Prompt logprobs: keep every token's final hidden state, so that
  // Model::final_logits can give the logits of any of the step's tokens.
  bool keep_final_hidden = false;
};

}  // namespace hyllm
