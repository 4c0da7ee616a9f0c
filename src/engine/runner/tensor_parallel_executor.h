#pragma once
// Tensor parallelism in one process: one ModelRunner per rank, each on its
// own backend (a GPU, or a CPU backend in tests) and its own thread, all
// running the same step. Every rank plans the step from the same StepInput,
// uploads it to its device and runs its share of the model, whose layers
// exchange partial results through the backends' communicators
// (backend/communicator.h); rank 0 alone samples, and its StepOutput is the
// step's. The scheduler above stays single and sees one executor whose cache
// layout is one rank's: every rank holds the same number of blocks and slots
// of its own heads, so the budget is the smallest rank's.
//
// Why threads and not processes: the ranks share the engine's host state
// (the step input, the token masks, the sampler's inputs) without copying or
// serialising it, and NCCL's ncclCommInitAll makes every rank's communicator
// in one call. A rank thread binds its backend once (Backend::
// bind_to_current_thread) and makes every call on that backend, the runner's
// construction and destruction included.
//
// A rank that fails mid-step aborts the group's communicator (and the
// exchange of sampled rows), so the others return instead of waiting for it;
// the group is unusable afterwards and every later step fails with that error.

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/executor.h"
#include "engine/runner/model_runner.h"

namespace hyllm {

class TensorParallelExecutor final : public ModelExecutor {
 public:
  // RunnerOptions::share_samples for one rank: rank 0 publishes its sampled
  // rows, the others receive them (speculative decoding).
  using ShareSamples = std::function<void(std::vector<SampledToken>&)>;
  // Makes rank `rank`'s runner on `backend`, on the rank's thread. The
  // runner of rank 0 samples; the others must have RunnerOptions::samples
  // false. With speculative decoding every rank's runner takes `share` as its
  // RunnerOptions::share_samples.
  using MakeRunner = std::function<std::unique_ptr<ModelRunner>(int rank, Backend& backend, ShareSamples share)>;

  // One rank per backend, each already holding its rank's communicator.
  TensorParallelExecutor(std::vector<std::unique_ptr<Backend>> backends, const MakeRunner& make_runner);
  ~TensorParallelExecutor() override;
  TensorParallelExecutor(const TensorParallelExecutor&) = delete;
  TensorParallelExecutor& operator=(const TensorParallelExecutor&) = delete;

  CacheLayout cache_layout() const override;
  int vocab_size() const override;
  size_t cache_memory_budget() override;
  void allocate_cache(const CacheAllocation& allocation) override;
  StepOutput execute(const StepInput& input) override;
  int64_t recorded_graphs() const override;
  ExecutorTimes times() const override;

  int size() const { return static_cast<int>(ranks_.size()); }
  ModelRunner& runner(int rank);

 private:
  struct Rank;
  class SampleExchange;
  // Runs fn(rank) on every rank's thread at once and waits for all; rethrows
  // the first failure after aborting the group (see the top).
  void on_every_rank(const std::function<void(int)>& fn);
  // Frees every rank's runner and backend on its thread, then ends the threads.
  void shut_down();

  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unique_ptr<std::atomic<bool>> failed_;  // a rank has failed and aborted the group
  std::shared_ptr<SampleExchange> samples_;
};

}  // namespace hyllm
