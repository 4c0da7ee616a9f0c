#pragma once
// ModelRunner: the ModelExecutor of engine/executor.h over a Model. Each step
// it flattens the chunks of all sequences into fixed-capacity host arrays
// (token ids, positions, KV slot of every token, per-sequence start offsets,
// lengths, block tables, GDN state slots), copies the used prefix to
// same-capacity device buffers (fixed addresses, so a captured graph can
// replay them), runs the model, and samples the rows it asked logits for:
// on the device with RunnerOptions::device_sampler when one is given (only
// tokens and logprobs cross to the host, one stream sync per step), else by
// copying the sampled rows' logits to the host for the engine's Sampler.
//
//   auto runner = ModelRunner(load_model(dir, backend, {...}), RunnerOptions{...});
//   runner.allocate_cache({.block_size = 16, .num_blocks = n, .num_state_slots = m});
//   StepOutput out = runner.execute(step);
//
// Decode steps replayed from device graphs are padded to the next capture
// size (DecodeGraphs::capture_size), so that a few recordings serve every
// batch: each padding sequence computes token 0 at position 0 into the
// reserved KV block and GDN state slot (CacheLayout::reserved_*; the engine
// never hands them out), attends to that one token, and samples a row the
// runner drops before sampling, so no request, count or cache sees it.
// Steps run op by op are not padded. allocate_cache() records every padded
// decode shape (capture_decode_graphs), so serving records none.
//
// Speculative decoding (the model's options().num_speculative_tokens > 0)
// follows executor.h: the verify rows are sampled like the rows of separate
// decode steps, drafts are accepted while they equal those samples, the GDN
// states roll back to the last accepted token (Model::rollback_states), and
// the MTP head proposes the next drafts (model_runner_spec.cpp).

#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/device_graph.h"
#include "backend/device_sampler.h"
#include "engine/executor.h"
#include "engine/runner/decode_graphs.h"
#include "engine/runner/device_step_clock.h"
#include "engine/sampler.h"
#include "model/model.h"

namespace hyllm {

struct RunnerOptions {
  int64_t max_num_tokens = 2048;  // per step; must not exceed the model's
  int64_t max_num_seqs = 256;     // per step; must not exceed the model's
  int64_t max_model_len = 4096;   // bounds a block table's length
  // Cache bytes the engine may use; 0 = the backend's default (CPU: 1 GiB;
  // device: gpu_memory_utilization x total memory, less what is in use after
  // the weights and a profile step, see memory_profile.h).
  size_t cache_memory_bytes = 0;
  double gpu_memory_utilization = 0.9;
  // Samples on the device that computes the logits; null: the host Sampler.
  // The app makes it for its backend (e.g. make_cuda_sampler), so that the
  // runner stays backend-agnostic. A step in which a row asks for more top
  // logprobs than a device sampler returns falls back to the host Sampler.
  std::shared_ptr<DeviceSampler> device_sampler;
  // Also copy the sampled rows' logits to the host (last_logits()) when
  // sampling on the device: for tests; the host path always has them.
  bool keep_logits = false;
  // Records decode steps as device graphs and replays them (decode_graphs.h);
  // null: every step is launched op by op (--enforce-eager). The app gives
  // its backend's recorder (e.g. cuda_capture_graph).
  GraphRecorder record_graph;
  // The largest batch recorded, for decode steps and draft passes alike
  // (vLLM's --max-cudagraph-capture-size; DecodeGraphs caps it at kMaxBatch);
  // larger steps run op by op.
  int64_t max_graph_batch = DecodeGraphs::kMaxBatch;
  // Pads decode steps to capture sizes without a recorder too: a test hook,
  // so that CPU tests show a padded step computes the same rows as the
  // unpadded one. Production pads exactly when graphs are recorded.
  bool pad_decode_steps = false;
  // False on every rank of a tensor-parallel group but the first: the step
  // runs its forward (and the collectives in it) and samples nothing, and
  // execute() returns an empty StepOutput after the device has finished.
  bool samples = true;
  // Tensor parallelism with speculative decoding: every rank accepts drafts,
  // rolls its GDN states back and runs the MTP passes, so the ranks that do
  // not sample need the sampled rows. The sampling rank calls this with its
  // rows (to publish them), the others with an empty vector (filled with
  // them). Unset without speculative decoding or tensor parallelism.
  std::function<void(std::vector<SampledToken>&)> share_samples;
};

class ModelRunner final : public ModelExecutor {
 public:
  ModelRunner(std::unique_ptr<Model> model, const RunnerOptions& options);

  CacheLayout cache_layout() const override;
  int vocab_size() const override;
  // On a device: runs profile_run() first, so the budget excludes peak activations.
  size_t cache_memory_budget() override;
  void allocate_cache(const CacheAllocation& allocation) override;
  StepOutput execute(const StepInput& input) override;

  // One step at the largest shapes (memory_profile.h) through the real
  // forward and sampler on a temporary cache, freed again; grows every
  // activation buffer and scratch arena to its peak. Call before allocate_cache.
  void profile_run();
  // Records every padded decode shape as a device graph (decode_graphs.h):
  // allocate_cache() calls it when the runner records graphs.
  void capture_decode_graphs();

  Model& model() { return *model_; }
  const RunnerOptions& options() const { return opts_; }
  // The logits of the last step's sampled rows, [rows, vocab] row-major; empty
  // after a device-sampled step unless RunnerOptions::keep_logits.
  const std::vector<float>& last_logits() const { return logits_host_; }
  // Decode steps replayed from recorded graphs so far.
  int64_t graph_replays() const { return graphs_.replays() + draft_graphs_[0].replays() + draft_graphs_[1].replays(); }
  int64_t recorded_graphs() const override {
    return graphs_.recorded() + draft_graphs_[0].recorded() + draft_graphs_[1].recorded();
  }
  ExecutorTimes times() const override;
  // Padding sequences added to decode steps so far.
  int64_t padding_seqs() const { return padding_seqs_; }

 private:
  // Fixed-capacity device copies of the step's metadata.
  struct DeviceInputs {
    DeviceBuffer token_ids, positions, slot_mapping, query_start_loc, seq_lens, block_tables, state_indices,
        has_initial_state, sample_rows, score_rows, save_slots, save_lens;
    DeviceBuffer hidden_rows, keep;  // speculative decoding: draft passes, state rollback
  };
  // One sequence of an MTP pass: n tokens at positions start_pos.., reading
  // hidden rows hidden_row.., with the block table of row plan_row of the step.
  struct DraftSeq {
    int64_t plan_row = 0;
    int64_t start_pos = 0;
    std::vector<int32_t> tokens;
    int64_t hidden_row = 0;
    bool sample = false;
  };
  StepContext plan(const StepInput& input);
  void set_block_geometry(int block_size);
  // Decode steps are padded (with graphs, or forced by RunnerOptions::pad_decode_steps).
  bool pads_decode_steps() const { return graphs_.enabled() || opts_.pad_decode_steps; }
  // Appends padding sequences to plan()'s arrays up to the capture size of a
  // decode step of S sequences, T tokens and R sampled rows; returns the padded S.
  int64_t pad_decode_step(int64_t S, int64_t& T, int64_t& R);
  int64_t graph_batch_limit() const;
  // Writes padding sequences S..padded-1 (model_runner_graphs.cpp) into plan()'s arrays.
  void append_padding(int64_t S, int64_t padded, int64_t& T, int64_t& R);
  // Uploads plan()'s arrays for a step of S sequences, T tokens and R sampled
  // rows and returns its context.
  StepContext upload_step(int64_t S, int64_t T, int64_t R, int64_t max_q, int64_t max_len, bool decode_only,
                          bool verify, bool uniform, bool saves);
  // The rows to sample: one per sampled SeqWork, 1 + num_drafts for a verify chunk (rows_).
  void expand_rows(const StepInput& input);
  void sample_on_device(const TensorView& logits, std::vector<SampledToken>& out);
  void sample_on_host(std::vector<SampledToken>& out);
  // After sample_on_device: the rows it cannot sample (host_rows_), again on
  // the host from their logits in host_row_logits_.
  void resample_host_rows(std::vector<SampledToken>& out);
  // Prompt logprobs (model_runner_scoring.cpp): the scored positions'
  // entries, one list per SeqWork with score_ids (StepOutput::scored), from
  // the step's final hidden states in passes of up to the sampled-row
  // capacity through Model::final_logits.
  std::vector<std::vector<TokenLogprob>> score_positions();
  // One pass's positions [begin, begin + out.size()) from their logits.
  void score_on_device(const TensorView& logits, int64_t begin, std::span<TokenLogprob> out);
  void score_on_host(const TensorView& logits, int64_t begin, std::span<TokenLogprob> out);
  // Speculative decoding after the target step (model_runner_spec.cpp):
  // acceptance, GDN rollback, the MTP passes that propose the next drafts.
  // Returns the nanoseconds the MTP passes took.
  int64_t verify_and_propose(const StepInput& input, std::vector<SampledToken> rows, StepOutput& out);
  StepContext plan_draft(const std::vector<DraftSeq>& seqs);
  std::vector<int32_t> draft_argmax(const TensorView& logits, int64_t rows);
  // Structured output: the bitmask of every constrained sampled row, computed
  // on the host while the device runs the forward.
  void fill_token_masks(const StepInput& input);
  std::span<const uint32_t> token_mask(size_t sample_row) const;

  std::unique_ptr<Model> model_;
  RunnerOptions opts_;
  int64_t max_blocks_per_seq_ = 0;
  int block_size_ = 0, num_blocks_ = 0, num_slots_ = 0;
  // Ids below these are the engine's; the reserved ones above (when the
  // runner pads) belong to the padding sequences.
  int usable_blocks_ = 0, usable_slots_ = 0;
  // This step's real sequences, tokens and sampled rows (plan() may pad past them).
  int64_t step_seqs_ = 0, step_tokens_ = 0, step_rows_ = 0;
  int64_t padding_seqs_ = 0;
  DeviceInputs dev_;
  // Host staging, same capacities.
  std::vector<int32_t> token_ids_, positions_, slot_mapping_, query_start_loc_, seq_lens_, block_tables_,
      state_indices_, has_initial_state_, sample_rows_, save_slots_, save_lens_;
  std::vector<float> logits_host_;
  int64_t num_spec_ = 0;               // the model's num_speculative_tokens
  std::vector<SeqWork> rows_;          // this step's sampled rows
  std::vector<size_t> row_seq_;        // the sampled sequence (its index among them) of each row
  std::vector<int32_t> hidden_rows_, keep_, draft_tables_;
  std::vector<float> draft_logits_;
  Sampler sampler_;
  std::vector<DeviceSamplingRow> device_rows_;
  std::vector<size_t> host_rows_;          // rows of a device-sampled step that the host samples
  std::vector<float> host_row_logits_;     // their logits, [host_rows_, vocab]
  std::vector<int32_t> score_rows_;        // this step's scored prompt positions (flat token indices)
  std::vector<std::pair<const SeqWork*, size_t>> score_src_;  // each one's chunk and index in its score_ids
  std::vector<float> score_logits_;        // one pass's logits, [rows, vocab]
  std::vector<uint32_t> token_masks_;  // [sampled rows, bitmask_words(vocab)]
  std::vector<uint8_t> row_masked_;    // per sampled row: its mask applies
  std::vector<std::pair<size_t, TokenConstraint*>> constrained_rows_;  // (sampled row, its constraint)
  // From this many constrained rows on, their masks are filled on the thread pool.
  static constexpr int64_t kParallelMaskRows = 4;
  bool profiling_ = false;  // the profile step's tokens are not checked
  DecodeGraphs graphs_;
  // MTP passes whose sequences all have the same number of tokens: pass 1
  // (reading the target's hidden states) and passes 2..K (the head's own).
  DecodeGraphs draft_graphs_[2];
  bool generation_step_ = false;  // this step: every sequence computes its last token (+ drafts) only
  int64_t step_rows_on_device_ = 0;  // leading rows of dev_.block_tables that are this step's, in step order
  // Where a step's wall time goes (debug log every kTimingSteps steps): host
  // planning and input upload, enqueueing the forward, sampling (which waits
  // for the GPU). An enqueue time close to the step time means launch-bound.
  struct StepTiming {
    int steps = 0;
    int64_t tokens = 0;
    double plan_s = 0, enqueue_s = 0, sample_s = 0;
  } timing_;
  // The same steps on the device's clock (only while debug logging is on).
  std::unique_ptr<DeviceStepClock> device_clock_;
  void record_timing(double plan_s, double enqueue_s, double sample_s, int64_t tokens);
  // times(): steps and nanoseconds, written by the engine thread.
  std::atomic<int64_t> timed_steps_{0}, target_ns_{0}, draft_ns_{0};
};

}  // namespace hyllm
