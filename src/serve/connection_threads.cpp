#include "serve/connection_threads.h"

#include "util/log.h"

namespace hyllm::serve {

ConnectionThreads::ConnectionThreads(size_t max_threads) : max_threads_(max_threads == 0 ? 1 : max_threads) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::unique_lock lock(mu_);
  jobs_.push_back(std::move(fn));
  // A new thread only when no idle one can take this job.
  if (idle_ < jobs_.size() && threads_.size() < max_threads_) {
    try {
      threads_.emplace_back([this] { worker(); });
    } catch (const std::system_error& e) {
      log::warn("cannot start a connection thread ({}); the connection waits for a free one", e.what());
    }
    if (threads_.size() == max_threads_) {
      log::warn("all {} connection threads are in use; new connections wait", max_threads_);
    }
  }
  lock.unlock();
  cv_.notify_one();
}

void ConnectionThreads::worker() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
      --idle_;
      if (jobs_.empty()) return;  // stopping, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) {
      log::error("connection thread: {}", e.what());
    } catch (...) {
      log::error("connection thread: unknown exception");
    }
  }
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}

size_t ConnectionThreads::thread_count() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

}  // namespace hyllm::serve
