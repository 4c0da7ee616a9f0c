// ModelRunner, decode graphs: padding decode steps to capture sizes, and
// recording every padded decode shape at startup (decode_graphs.h), so that
// serving replays recordings and never records a plain decode step.
#include <algorithm>
#include <chrono>

#include "engine/runner/model_runner.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm {

// The largest batch a decode step is padded to and recorded at: a step holds
// at most max_num_seqs sequences and max_num_tokens tokens, and no recording
// is larger than the graphs' bound.
int64_t ModelRunner::graph_batch_limit() const {
  return std::min({opts_.max_num_seqs, opts_.max_num_tokens, graphs_.max_batch()});
}

int64_t ModelRunner::pad_decode_step(int64_t S, int64_t& T, int64_t& R) {
  const int64_t padded = DecodeGraphs::capture_size(S, graph_batch_limit());
  if (padded == S && R == S) return S;
  if (padded > S) {
    HYLLM_CHECK(model_->num_attention_layers() == 0 || num_blocks_ - 1 >= usable_blocks_,
                "padding a step without a reserved KV block");
    HYLLM_CHECK(model_->num_gdn_layers() == 0 || num_slots_ - 1 >= usable_slots_,
                "padding a step without a reserved state slot");
  }
  append_padding(S, padded, T, R);
  // Real sequences that sample nothing (a prompt's non-final one-token
  // chunk) leave the rows short of one per sequence: the extra rows read
  // any token, so every step of this size samples the same number of rows.
  while (R < padded) sample_rows_[R++] = static_cast<int32_t>(T - 1);
  padding_seqs_ += padded - S;
  return padded;
}

void ModelRunner::append_padding(int64_t S, int64_t padded, int64_t& T, int64_t& R) {
  // Padding sequences: token 0 at position 0, a context of that one token in
  // the last KV block, a fresh state in the last state slot (the reserved
  // ones). Their KV writes all go to the same cache slot and their states to
  // the same state slot (identical values, read by padding sequences only).
  const bool attn = model_->num_attention_layers() > 0, gdn = model_->num_gdn_layers() > 0;
  const int32_t null_block = attn ? num_blocks_ - 1 : 0;
  const int32_t scratch_slot = gdn ? num_slots_ - 1 : 0;
  for (int64_t s = S; s < padded; ++s) {
    int32_t* table = &block_tables_[s * max_blocks_per_seq_];
    std::fill(table, table + max_blocks_per_seq_, 0);
    table[0] = null_block;
    token_ids_[T] = 0;
    positions_[T] = 0;
    slot_mapping_[T] = attn ? static_cast<int32_t>(null_block * block_size_) : -1;
    sample_rows_[R++] = static_cast<int32_t>(T);
    ++T;
    query_start_loc_[s + 1] = static_cast<int32_t>(T);
    seq_lens_[s] = 1;
    state_indices_[s] = scratch_slot;
    has_initial_state_[s] = 0;
  }
}

void ModelRunner::capture_decode_graphs() {
  // With speculative decoding no step is padded (its verify steps and MTP
  // passes come in every batch size): those are recorded lazily.
  if (!graphs_.enabled() || num_spec_ > 0 || block_size_ == 0) return;
  const auto start = std::chrono::steady_clock::now();
  // Largest first, as vLLM captures: the first steps grow the scratch arena
  // and plan the GEMMs of the largest batches, so later (smaller) ones rarely
  // move it. A step that still moves it leaves the recordings before it
  // stale; the second round records those again, after every shape has run
  // once and the arena has its final size.
  std::vector<int64_t> sizes = DecodeGraphs::capture_sizes(graph_batch_limit());
  std::vector<int64_t> buckets = DecodeGraphs::seq_len_buckets(opts_.max_model_len);
  std::reverse(sizes.begin(), sizes.end());
  std::reverse(buckets.begin(), buckets.end());
  auto forward = [this](const StepContext& c) { return model_->forward(c); };
  for (int round = 0; round < 2 && graphs_.enabled(); ++round) {
    for (int64_t seqs : sizes) {
      for (int64_t bound : buckets) {
        // Only padding sequences: they write the reserved KV block and state
        // slot, or (a runner of one sequence reserves none) the last block
        // and slot of a cache that holds nothing yet.
        int64_t T = 0, R = 0;
        query_start_loc_[0] = 0;
        append_padding(0, seqs, T, R);
        step_seqs_ = step_tokens_ = step_rows_ = 0;
        StepContext ctx = upload_step(seqs, T, R, 1, bound, true, false, false, false);
        if (graphs_.enabled()) graphs_.capture(ctx, forward);
      }
    }
  }
  model_->backend().synchronize();
  if (!graphs_.enabled() || !opts_.samples) return;
  log::info("Captured {} decode graphs ({} batch sizes x {} sequence-length bounds) in {:.2f} seconds",
            graphs_.recorded(), sizes.size(), buckets.size(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace hyllm
