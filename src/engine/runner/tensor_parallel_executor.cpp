#include "engine/runner/tensor_parallel_executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "backend/communicator.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm {

// Rank 0's sampled rows of the current step, for the other ranks
// (speculative decoding). Steps do not overlap (on_every_rank waits for every
// rank), so one slot with a step counter is enough: a rank reads the rows of
// the step after the one it read last.
class TensorParallelExecutor::SampleExchange {
 public:
  void publish(const std::vector<SampledToken>& rows) {
    std::lock_guard lock(mu_);
    rows_ = rows;
    ++published_;
    cv_.notify_all();
  }
  void receive(std::vector<SampledToken>& rows, uint64_t& seen) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return published_ > seen || aborted_; });
    if (published_ <= seen) fail(ErrorCode::kInternal, "tensor parallelism: the sampling rank failed this step");
    rows = rows_;
    seen = published_;
  }
  void abort() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SampledToken> rows_;
  uint64_t published_ = 0;
  bool aborted_ = false;
};

// A rank: its backend, its runner, and the thread that makes every call on
// them. The thread takes one task at a time from on_every_rank.
struct TensorParallelExecutor::Rank {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<ModelRunner> runner;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  const std::function<void(int)>* task = nullptr;  // set: run it; cleared when done
  std::exception_ptr error;
  bool error_is_first = false;  // this rank failed first, and aborted the group
  bool stop = false;

  void loop(int rank, std::atomic<bool>& failed, SampleExchange& samples) {
    backend->bind_to_current_thread();
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return task != nullptr || stop; });
      if (task == nullptr) return;
      const std::function<void(int)>* fn = task;
      lock.unlock();
      std::exception_ptr e;
      bool first = false;
      try {
        (*fn)(rank);
      } catch (...) {
        e = std::current_exception();
        // The first failure aborts the group: the other ranks may be waiting
        // for this one in a collective.
        first = !failed.exchange(true);
        if (first) {
          if (backend->communicator() != nullptr) backend->communicator()->abort();
          samples.abort();
        }
      }
      lock.lock();
      error = e;
      error_is_first = first;
      task = nullptr;
      cv.notify_all();
    }
  }
};

TensorParallelExecutor::TensorParallelExecutor(std::vector<std::unique_ptr<Backend>> backends,
                                               const MakeRunner& make_runner) {
  if (backends.empty()) fail(ErrorCode::kInvalidArgument, "tensor parallelism over no backends");
  const int n = static_cast<int>(backends.size());
  for (int r = 0; r < n; ++r) {
    const Communicator* c = backends[static_cast<size_t>(r)]->communicator();
    if (n > 1 && (c == nullptr || c->size() != n || c->rank() != r))
      fail(ErrorCode::kInternal, "tensor parallel rank {} of {}: its backend's communicator is {}", r, n,
           c == nullptr ? "missing" : fmt::format("rank {} of {}", c->rank(), c->size()));
  }
  failed_ = std::make_unique<std::atomic<bool>>(false);
  samples_ = std::make_shared<SampleExchange>();
  for (int r = 0; r < n; ++r) {
    auto rank = std::make_unique<Rank>();
    rank->backend = std::move(backends[static_cast<size_t>(r)]);
    ranks_.push_back(std::move(rank));
  }
  for (int r = 0; r < n; ++r) {
    Rank* rank = ranks_[static_cast<size_t>(r)].get();
    rank->thread = std::thread([rank, r, this] { rank->loop(r, *failed_, *samples_); });
  }
  try {
    on_every_rank([&](int r) {
      ShareSamples share;
      if (r == 0) {
        share = [ex = samples_](std::vector<SampledToken>& rows) { ex->publish(rows); };
      } else {
        share = [ex = samples_, seen = uint64_t{0}](std::vector<SampledToken>& rows) mutable { ex->receive(rows, seen); };
      }
      ranks_[static_cast<size_t>(r)]->runner = make_runner(r, *ranks_[static_cast<size_t>(r)]->backend, share);
    });
  } catch (...) {
    shut_down();
    throw;
  }
  log::info("tensor parallelism: {} ranks on {} ... {}", n, ranks_.front()->backend->name(),
            ranks_.back()->backend->name());
}

TensorParallelExecutor::~TensorParallelExecutor() { shut_down(); }

void TensorParallelExecutor::shut_down() {
  // Runners and backends are freed on their own threads (a GPU backend's
  // memory is freed with its device selected), runners first.
  try {
    on_every_rank([&](int r) {
      Rank& rank = *ranks_[static_cast<size_t>(r)];
      rank.runner.reset();
      rank.backend.reset();
    });
  } catch (const std::exception& e) {
    log::error("tensor parallelism: freeing a rank failed: {}", e.what());
  }
  for (auto& rank : ranks_) {
    {
      std::lock_guard lock(rank->mu);
      rank->stop = true;
    }
    rank->cv.notify_all();
    if (rank->thread.joinable()) rank->thread.join();
  }
  ranks_.clear();
}

void TensorParallelExecutor::on_every_rank(const std::function<void(int)>& fn) {
  for (auto& rank : ranks_) {
    std::lock_guard lock(rank->mu);
    rank->error = nullptr;
    rank->task = &fn;
    rank->cv.notify_all();
  }
  // The error to report is the one that caused the others (they fail with
  // the group's abort), else any.
  std::exception_ptr cause, any;
  for (auto& rank : ranks_) {
    std::unique_lock lock(rank->mu);
    rank->cv.wait(lock, [&] { return rank->task == nullptr; });
    if (rank->error && rank->error_is_first) cause = rank->error;
    if (rank->error && !any) any = rank->error;
  }
  if (cause) std::rethrow_exception(cause);
  if (any) std::rethrow_exception(any);
}

ModelRunner& TensorParallelExecutor::runner(int rank) { return *ranks_[static_cast<size_t>(rank)]->runner; }

CacheLayout TensorParallelExecutor::cache_layout() const { return ranks_.front()->runner->cache_layout(); }

int TensorParallelExecutor::vocab_size() const { return ranks_.front()->runner->vocab_size(); }

size_t TensorParallelExecutor::cache_memory_budget() {
  // Each rank profiles a step (which runs collectives): all at once.
  std::vector<size_t> budgets(ranks_.size());
  on_every_rank([&](int r) { budgets[static_cast<size_t>(r)] = runner(r).cache_memory_budget(); });
  return *std::min_element(budgets.begin(), budgets.end());
}

void TensorParallelExecutor::allocate_cache(const CacheAllocation& allocation) {
  on_every_rank([&](int r) { runner(r).allocate_cache(allocation); });
}

StepOutput TensorParallelExecutor::execute(const StepInput& input) {
  StepOutput out;
  on_every_rank([&](int r) {
    StepOutput o = runner(r).execute(input);
    if (r == 0) out = std::move(o);
  });
  return out;
}

int64_t TensorParallelExecutor::recorded_graphs() const { return ranks_.front()->runner->recorded_graphs(); }

ExecutorTimes TensorParallelExecutor::times() const { return ranks_.front()->runner->times(); }

}  // namespace hyllm
