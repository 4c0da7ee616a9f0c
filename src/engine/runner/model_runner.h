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

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/device_sampler.h"
#include "engine/executor.h"
#include "engine/sampler.h"
#include "model/model.h"

namespace hyllm {

struct RunnerOptions {
  int64_t max_num_tokens = 2048;  // per step; must not exceed the model's
  int64_t max_num_seqs = 256;     // per step; must not exceed the model's
  int64_t max_model_len = 4096;   // bounds a block table's length
  // Cache bytes the engine may use; 0 = the backend's default (CPU: 1 GiB;
  // device: 90% of the memory free after loading).
  size_t cache_memory_bytes = 0;
  // Samples on the device that computes the logits; null: the host Sampler.
  // The app makes it for its backend (e.g. make_cuda_sampler), so that the
  // runner stays backend-agnostic. A step in which a row asks for more top
  // logprobs than a device sampler returns falls back to the host Sampler.
  std::shared_ptr<DeviceSampler> device_sampler;
  // Also copy the sampled rows' logits to the host (last_logits()) when
  // sampling on the device: for tests; the host path always has them.
  bool keep_logits = false;
};

class ModelRunner final : public ModelExecutor {
 public:
  ModelRunner(std::unique_ptr<Model> model, const RunnerOptions& options);

  CacheLayout cache_layout() const override;
  int vocab_size() const override;
  size_t cache_memory_budget() const override;
  void allocate_cache(const CacheAllocation& allocation) override;
  StepOutput execute(const StepInput& input) override;

  Model& model() { return *model_; }
  const RunnerOptions& options() const { return opts_; }
  // The logits of the last step's sampled rows, [rows, vocab] row-major; empty
  // after a device-sampled step unless RunnerOptions::keep_logits.
  const std::vector<float>& last_logits() const { return logits_host_; }

 private:
  // Fixed-capacity device copies of the step's metadata.
  struct DeviceInputs {
    DeviceBuffer token_ids, positions, slot_mapping, query_start_loc, seq_lens, block_tables, state_indices,
        has_initial_state, sample_rows;
  };
  StepContext plan(const StepInput& input);
  bool can_sample_on_device(const StepInput& input) const;
  void sample_on_device(const StepInput& input, const TensorView& logits, StepOutput& out);
  void sample_on_host(const StepInput& input, StepOutput& out);

  std::unique_ptr<Model> model_;
  RunnerOptions opts_;
  int64_t max_blocks_per_seq_ = 0;
  int block_size_ = 0, num_blocks_ = 0, num_slots_ = 0;
  DeviceInputs dev_;
  // Host staging, same capacities.
  std::vector<int32_t> token_ids_, positions_, slot_mapping_, query_start_loc_, seq_lens_, block_tables_,
      state_indices_, has_initial_state_, sample_rows_;
  std::vector<float> logits_host_;
  Sampler sampler_;
  std::vector<DeviceSamplingRow> device_rows_;
};

}  // namespace hyllm
