// EngineClient on a thread: callers hand requests and aborts to an inbox; the
// engine thread drains it before each step, runs the core, and hands the
// step's outputs to a publisher thread, which pushes each to its request's
// stream.

#include "engine/engine_client.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/engine_core.h"
#include "engine/executor.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm {
namespace {

class QueueStream final : public ResponseStream {
 public:
  explicit QueueStream(std::string id) : id_(std::move(id)) {}

  std::optional<RequestOutput> next(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || ended_; })) return std::nullopt;
    if (queue_.empty()) return std::nullopt;
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    if (out.finished) ended_ = true;
    return out;
  }
  bool ended() const override {
    std::lock_guard lock(mu_);
    return ended_;
  }
  const std::string& request_id() const override { return id_; }

  void push(RequestOutput out) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(out));
    }
    cv_.notify_all();
  }

 private:
  const std::string id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool ended_ = false;
};

// Delivers the engine's outputs on a thread of its own, batch by batch in the
// order posted. Each output pushed wakes the thread that reads its stream;
// with a thousand streams that is a thousand wake-ups a step, which the
// engine thread would otherwise pay for between two steps, while the device
// waits for the next one.
class Publisher {
 public:
  explicit Publisher(std::function<void(std::vector<RequestOutput>&)> deliver)
      : deliver_(std::move(deliver)), thread_([this] { run(); }) {}
  ~Publisher() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void post(std::vector<RequestOutput> batch) {
    if (batch.empty()) return;
    {
      std::lock_guard lock(mu_);
      batches_.push_back(std::move(batch));
    }
    cv_.notify_all();
  }

  // Returns once every batch posted before the call has been delivered.
  void flush() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return batches_.empty() && !delivering_; });
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !batches_.empty() || stopping_; });
      if (batches_.empty()) return;  // stopping, and everything delivered
      std::vector<RequestOutput> batch = std::move(batches_.front());
      batches_.pop_front();
      delivering_ = true;
      lock.unlock();
      deliver_(batch);
      lock.lock();
      delivering_ = false;
      cv_.notify_all();  // flush() waits on the same condition
    }
  }

  const std::function<void(std::vector<RequestOutput>&)> deliver_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<RequestOutput>> batches_;
  bool delivering_ = false;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

class ThreadedEngineClient final : public EngineClient {
 public:
  ThreadedEngineClient(std::unique_ptr<ModelExecutor> executor, EngineConfig config)
      : executor_(std::move(executor)), core_(*executor_, std::move(config)) {}

  ~ThreadedEngineClient() override { shutdown(std::chrono::milliseconds(0)); }

  void start() override {
    std::lock_guard lock(mu_);
    if (state_ != EngineState::kStarting) return;
    state_ = EngineState::kReady;
    thread_ = std::thread([this] { run(); });
  }

  std::shared_ptr<ResponseStream> submit(EngineRequest request) override {
    std::vector<EngineRequest> one;
    one.push_back(std::move(request));
    return submit_batch(std::move(one)).front();
  }

  std::vector<std::shared_ptr<ResponseStream>> submit_batch(std::vector<EngineRequest> requests) override {
    for (const EngineRequest& r : requests) core_.validate(r);
    std::vector<std::shared_ptr<ResponseStream>> streams;
    streams.reserve(requests.size());
    {
      std::lock_guard lock(mu_);
      if (state_ != EngineState::kReady) {
        fail(ErrorCode::kUnavailable, "the engine is {}",
             state_ == EngineState::kDead ? "dead" : state_ == EngineState::kStarting ? "starting" : "shutting down");
      }
      // A taken id (live, or earlier in this batch) takes back this batch's
      // entries, so that nothing of a refused batch stays.
      for (size_t i = 0; i < requests.size(); ++i) {
        auto stream = std::make_shared<QueueStream>(requests[i].request_id);
        if (!streams_.emplace(requests[i].request_id, stream).second) {
          for (size_t j = 0; j < i; ++j) streams_.erase(requests[j].request_id);
          fail(ErrorCode::kInvalidArgument, "request id '{}' is already in use", requests[i].request_id);
        }
        streams.push_back(std::move(stream));
      }
      for (EngineRequest& r : requests) inbox_.push_back(std::move(r));
    }
    cv_.notify_one();
    return streams;
  }

  void abort(const std::string& request_id) override {
    {
      std::lock_guard lock(mu_);
      if (!streams_.count(request_id)) return;
      aborts_.push_back(request_id);
    }
    cv_.notify_one();
  }

  EngineStats stats() const override { return core_.stats(); }

  bool reset_prefix_cache(bool reset_running_requests) override {
    std::future<bool> done;
    {
      std::lock_guard lock(mu_);
      if (state_ != EngineState::kReady) fail(ErrorCode::kUnavailable, "the engine is not running");
      resets_.emplace_back();
      resets_.back().reset_running = reset_running_requests;
      done = resets_.back().done.get_future();
    }
    cv_.notify_one();
    return done.get();
  }

  void shutdown(std::chrono::milliseconds drain_timeout) override {
    {
      std::lock_guard lock(mu_);
      if (state_ == EngineState::kStarting) state_ = EngineState::kStopped;
      if (state_ == EngineState::kReady) {
        state_ = EngineState::kDraining;
        drain_deadline_ = Clock::now() + drain_timeout;
      }
    }
    cv_.notify_one();
    std::lock_guard join_lock(join_mu_);
    if (thread_.joinable()) thread_.join();
    // Every output of the last steps is in its stream when shutdown returns.
    publisher_.flush();
  }

  EngineState state() const override {
    std::lock_guard lock(mu_);
    return state_;
  }

  const EngineConfig& config() const override { return core_.config(); }

 private:
  // The engine thread.
  void run() {
    try {
      loop();
      refuse_resets();
    } catch (const std::exception& e) {
      log::error("engine loop failed: {}", e.what());
      {
        std::lock_guard lock(mu_);
        state_ = EngineState::kDead;
      }
      // Every request still live ends with an error; nothing is left hanging.
      try {
        core_.finish_all(FinishReason::kError, std::string("engine failed: ") + e.what());
        publisher_.post(core_.step());
      } catch (const std::exception& e2) {
        log::error("engine could not finish its requests: {}", e2.what());
      }
      fail_leftover_streams(std::string("engine failed: ") + e.what());
    }
  }

  void loop() {
    for (;;) {
      std::vector<EngineRequest> incoming;
      std::vector<std::string> aborts;
      std::deque<Reset> resets;
      bool drain_expired = false;
      {
        std::unique_lock lock(mu_);
        auto has_input = [&] {
          return !inbox_.empty() || !aborts_.empty() || !resets_.empty() || state_ != EngineState::kReady;
        };
        if (!core_.has_unfinished_requests()) {
          const double interval = core_.config().log_stats_interval_s;
          if (interval > 0) {
            cv_.wait_for(lock, std::chrono::duration<double>(interval), has_input);
          } else {
            cv_.wait(lock, has_input);
          }
        }
        incoming.swap(inbox_);
        aborts.swap(aborts_);
        if (state_ == EngineState::kDraining) {
          if (inbox_.empty() && incoming.empty() && !core_.has_unfinished_requests()) {
            state_ = EngineState::kStopped;
            return;
          }
          drain_expired = Clock::now() >= drain_deadline_;
        }
        if (state_ == EngineState::kStopped) return;
        resets.swap(resets_);
      }
      for (EngineRequest& r : incoming) core_.add_request(std::move(r));
      for (const std::string& id : aborts) core_.abort_request(id);
      for (Reset& r : resets) {
        try {
          r.done.set_value(core_.reset_prefix_cache(r.reset_running));
        } catch (...) {
          r.done.set_exception(std::current_exception());
        }
      }
      if (drain_expired) core_.finish_all(FinishReason::kAbort);
      if (core_.has_unfinished_requests()) publisher_.post(core_.step());
      core_.log_stats_if_due();
    }
  }

  // On the publisher's thread.
  void deliver(std::vector<RequestOutput>& outputs) {
    for (RequestOutput& out : outputs) {
      std::shared_ptr<QueueStream> stream;
      {
        std::lock_guard lock(mu_);
        auto it = streams_.find(out.request_id);
        if (it == streams_.end()) continue;
        stream = it->second;
        if (out.finished) streams_.erase(it);
      }
      stream->push(std::move(out));
    }
  }

  // Resets asked for after the last step: the engine stopped, nothing is reset.
  void refuse_resets() {
    std::deque<Reset> resets;
    {
      std::lock_guard lock(mu_);
      resets.swap(resets_);
    }
    for (Reset& r : resets) r.done.set_value(false);
  }

  void fail_leftover_streams(const std::string& message) {
    // The outputs already posted first: a stream's error comes after its tokens.
    publisher_.flush();
    std::unordered_map<std::string, std::shared_ptr<QueueStream>> left;
    {
      std::lock_guard lock(mu_);
      left.swap(streams_);
      inbox_.clear();
    }
    refuse_resets();
    for (auto& [id, stream] : left) {
      RequestOutput out;
      out.request_id = id;
      out.finished = true;
      out.error_message = message;
      stream->push(std::move(out));
    }
  }

  std::unique_ptr<ModelExecutor> executor_;
  EngineCore core_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  EngineState state_ = EngineState::kStarting;
  std::vector<EngineRequest> inbox_;
  std::vector<std::string> aborts_;
  struct Reset {
    bool reset_running = false;
    std::promise<bool> done;
  };
  std::deque<Reset> resets_;
  std::unordered_map<std::string, std::shared_ptr<QueueStream>> streams_;
  Clock::time_point drain_deadline_{};
  std::mutex join_mu_;
  std::thread thread_;
  // Last: destroyed (its thread joined, every posted batch delivered) before
  // the streams it delivers to.
  Publisher publisher_{[this](std::vector<RequestOutput>& outputs) { deliver(outputs); }};
};

}  // namespace

std::unique_ptr<EngineClient> make_engine_client(std::unique_ptr<ModelExecutor> executor, EngineConfig config) {
  HYLLM_CHECK(executor != nullptr, "make_engine_client needs an executor");
  auto client = std::make_unique<ThreadedEngineClient>(std::move(executor), std::move(config));
  client->start();
  return client;
}

}  // namespace hyllm
