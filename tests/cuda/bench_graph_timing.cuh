#pragma once
// How the CUDA benchmarks time a kernel: `iters` launches captured into one
// CUDA graph (launch(i, stream) enqueues the i-th, so that a bench can rotate
// its inputs), the graph replayed once to warm up and then five times; the
// median replay's time over iters is the seconds per launch. Replays back to
// back leave the host's launch cost out.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "bench_check.cuh"

template <typename Launch>
double graph_seconds_per_launch(cudaStream_t s, int iters, Launch&& launch) {
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < iters; ++i) launch(i, s);
  CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaGraphLaunch(ge, s));  // warm-up
  CHECK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / 1e3 / iters);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
