#pragma once
// Sends a list of requests with vLLM's arrival process: all at once for an
// infinite rate, otherwise gamma-distributed gaps (Poisson when burstiness is
// 1) rescaled so that the last request is sent at N / rate; a client-side
// semaphore bounds the requests in flight (--max-concurrency).

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "bench/endpoint_client.h"

namespace hyllm::bench {

struct LoadOptions {
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  std::optional<int> max_concurrency;
  uint64_t seed = 0;
};

// Arrival offsets in seconds from the start, one per request.
std::vector<double> arrival_offsets(int num_requests, const LoadOptions& opt);

struct LoadRun {
  std::vector<RequestResult> results;  // in input order
  double duration_s = 0.0;             // first send to last completion
};

// `send` is the request function (the streaming client in production, a
// scripted one in tests); it is called from several threads at once.
using SendFn = std::function<RequestResult(const RequestInput&)>;

LoadRun run_load(const std::vector<RequestInput>& inputs, const LoadOptions& opt, const SendFn& send);

}  // namespace hyllm::bench
