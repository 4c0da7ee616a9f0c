#pragma once
// A fixed pool of worker threads for data-parallel loops on the CPU backend.
// parallel_for splits [begin, end) into contiguous chunks, runs them on the
// workers and the calling thread, and returns when all are done. Not reentrant:
// a task must not call parallel_for on the same pool.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hyllm {

class ThreadPool {
 public:
  // num_threads counts the caller: 1 means run everything inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(chunk_begin, chunk_end) is called on disjoint chunks covering the range;
  // chunks hold at least min_chunk items. Exceptions are rethrown on the caller.
  void parallel_for(int64_t begin, int64_t end, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

  // The process-wide pool sized from HYLLM_NUM_THREADS or the core count.
  static ThreadPool& global();

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, chunk_ = 1;
  int64_t next_chunk_ = 0, num_chunks_ = 0, chunks_done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex call_mu_;  // serialises parallel_for callers
};

}  // namespace hyllm
