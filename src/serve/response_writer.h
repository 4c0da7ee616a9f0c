#pragma once
// Writing responses: JSON bodies, errors, and the two ways a generation is
// delivered. Whole responses wait for every choice; streams send one SSE event
// per choice event as the engine produces it. Either way a client that goes
// away has its engine requests aborted (within one poll interval when idle,
// at the next write when streaming), which frees their cache.

#include <httplib.h>

#include <atomic>
#include <memory>

#include "serve/api_error.h"
#include "serve/generation.h"
#include "serve/json.h"
#include "serve/response_format.h"

namespace hyllm::serve {

void write_json(httplib::Response& res, int status, const Json& body);
void write_error(httplib::Response& res, const ApiError& error);

// Counts requests in flight so that shutdown can wait for them.
class ActivityCounter {
 public:
  class Guard {
   public:
    explicit Guard(ActivityCounter* c) : c_(c) {
      if (c_) c_->active_.fetch_add(1);
    }
    Guard(Guard&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    Guard(const Guard&) = delete;
    ~Guard() {
      if (c_) c_->active_.fetch_sub(1);
    }

   private:
    ActivityCounter* c_;
  };
  Guard enter() { return Guard(this); }
  int active() const { return active_.load(); }

 private:
  std::atomic<int> active_{0};
};

// Runs the generation to its end and writes the whole response (200), or a
// 500 when the engine failed the request.
void respond_whole(httplib::Response& res, Generation& generation, ResponseFormatter& formatter);

// Installs an SSE stream on res that drives the generation.
void respond_stream(httplib::Response& res, std::unique_ptr<Generation> generation,
                    std::unique_ptr<ResponseFormatter> formatter, ActivityCounter::Guard guard);

}  // namespace hyllm::serve
