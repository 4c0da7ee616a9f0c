#pragma once
// Runs the ranks of an in-process tensor-parallel group on threads, one CPU
// backend each, and reports each rank's error; a rank that throws aborts the
// group, as an executor would. A group that does not finish
// within the deadline is aborted and the test fails instead of hanging.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/communicator.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_communicator.h"
#include "util/status.h"

namespace hyllm::test {

struct RankOutcome {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
};

struct RankGroup {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::shared_ptr<Communicator>> comms;

  explicit RankGroup(int size) : comms(make_cpu_communicators(size)) {
    for (int r = 0; r < size; ++r) {
      backends.push_back(make_cpu_backend());
      backends.back()->set_communicator(comms[static_cast<size_t>(r)]);
    }
  }
  int size() const { return static_cast<int>(comms.size()); }

  // fn(rank, backend) on one thread per rank; returns each rank's outcome.
  std::vector<RankOutcome> run(const std::function<void(int, Backend&)>& fn,
                               std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
    std::vector<RankOutcome> outcomes(static_cast<size_t>(size()));
    std::mutex mu;
    std::condition_variable cv;
    int finished = 0;
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        Backend& be = *backends[static_cast<size_t>(r)];
        be.bind_to_current_thread();
        RankOutcome& o = outcomes[static_cast<size_t>(r)];
        try {
          fn(r, be);
        } catch (const Error& e) {
          o = {e.code(), e.what()};
        } catch (const std::exception& e) {
          o = {ErrorCode::kInternal, std::string("not an hyllm::Error: ") + e.what()};
        }
        // As an executor would: a failed rank releases the others.
        if (o.code != ErrorCode::kOk) comms[static_cast<size_t>(r)]->abort();
        std::lock_guard lk(mu);
        ++finished;
        cv.notify_all();
      });
    }
    bool hung = false;
    {
      std::unique_lock lk(mu);
      if (!cv.wait_for(lk, deadline, [&] { return finished == size(); })) {
        hung = true;
        comms[0]->abort();
      }
    }
    for (auto& t : threads) t.join();
    EXPECT_FALSE(hung) << "the ranks did not finish in time; the group was aborted";
    return outcomes;
  }
};

inline void expect_all_ok(const std::vector<RankOutcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r)
    EXPECT_EQ(outcomes[r].code, ErrorCode::kOk) << "rank " << r << ": " << outcomes[r].message;
}

}  // namespace hyllm::test
