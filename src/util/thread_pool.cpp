#include "util/thread_pool.h"

#include <algorithm>

#include "util/env.h"

namespace hyllm {

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); ++i) {
    workers_.emplace_back([this, i] { worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    int n = env().num_threads;
    if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return n;
  }());
  return pool;
}

void ThreadPool::parallel_for(int64_t begin, int64_t end,
                              const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (end <= begin) return;
  const int64_t n = end - begin;
  const int64_t threads = num_threads();
  int64_t chunk = std::max<int64_t>(std::max<int64_t>(1, min_chunk), (n + threads - 1) / threads);
  if (threads == 1 || chunk >= n) {
    fn(begin, end);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  fn_ = &fn;
  begin_ = begin;
  end_ = end;
  chunk_ = chunk;
  next_chunk_ = 0;
  num_chunks_ = (n + chunk - 1) / chunk;
  chunks_done_ = 0;
  error_ = nullptr;
  ++generation_;
  work_cv_.notify_all();
  // The caller works too.
  while (next_chunk_ < num_chunks_) {
    int64_t c = next_chunk_++;
    lock.unlock();
    std::exception_ptr err;
    try {
      fn(begin + c * chunk, std::min(end, begin + (c + 1) * chunk));
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
    ++chunks_done_;
  }
  done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_chunk_ < num_chunks_); });
    if (stop_) return;
    seen = generation_;
    while (fn_ != nullptr && next_chunk_ < num_chunks_) {
      int64_t c = next_chunk_++;
      const auto* fn = fn_;
      int64_t b = begin_ + c * chunk_, e = std::min(end_, begin_ + (c + 1) * chunk_);
      lock.unlock();
      std::exception_ptr err;
      try {
        (*fn)(b, e);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
      if (++chunks_done_ == num_chunks_) done_cv_.notify_all();
    }
  }
}

}  // namespace hyllm
