#pragma once
// httplib's task queue, replaced: one thread per open connection, created on
// demand and kept for reuse, up to a cap (beyond it, connections wait in
// FIFO order). httplib's own pool has a fixed size fixed at compile time of
// the Debian library, far below the hundreds of streams a server holds open.

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hyllm::serve {

class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads);
  ~ConnectionThreads() override;

  void enqueue(std::function<void()> fn) override;
  // Runs the queued work, then joins every thread.
  void shutdown() override;

  size_t thread_count() const;

 private:
  void worker();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace hyllm::serve
