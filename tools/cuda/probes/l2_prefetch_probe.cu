// Does a bulk L2 prefetch of weights pay on this GPU? Standalone probe, built
// and run on the GPU machine (nvcc is there):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/l2p tools/cuda/probes/l2_prefetch_probe.cu
//   /tmp/l2p
// For weight ranges of several sizes, after a flush of L2 by a 512 MiB read,
// it times (CUDA events, mean over repetitions):
//   - a streaming read of the range from DRAM (cold);
//   - the same read right after an earlier read of it (warm: L2 hits);
//   - the prefetch kernel alone (cp.async.bulk.prefetch.L2 in 4 KiB chunks,
//     or prefetch.global.L2 per 128-byte line): whether a grid's completion
//     waits for the lines it asked for;
//   - the read after the prefetch and a 20 us spin (the gap of latency-bound
//     kernels a decode step has): whether the prefetched lines hit;
//   - prefetch and read back to back (no gap).
#include <cstdio>

#include "../../../tests/cuda/bench_check.cuh"

__global__ void read_kernel(const uint4* p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p + i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void bulk_prefetch_kernel(const char* base, size_t bytes, size_t chunk) {
  const size_t chunks = (bytes + chunk - 1) / chunk;
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < chunks; j += size_t(gridDim.x) * blockDim.x) {
    const size_t off = j * chunk;
    const size_t left = bytes - off;
    const unsigned n = unsigned(left < chunk ? left : chunk) & ~15u;
    if (n) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(n) : "memory");
  }
}

__global__ void line_prefetch_kernel(const char* base, size_t bytes) {
  for (size_t off = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * 128; off < bytes;
       off += size_t(gridDim.x) * blockDim.x * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off) : "memory");
}

__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  std::printf("SMs %d, L2 %.1f MiB\n", sms, l2 / 1048576.0);
  const size_t flush_bytes = size_t(512) << 20, max_w = size_t(64) << 20;
  char *flush, *w;
  unsigned* sink;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&w, max_w));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(flush, 1, flush_bytes));
  CHECK(cudaMemset(w, 2, max_w));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1, e2;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventCreate(&e2));
  const int read_blocks = sms * 4, threads = 512;
  auto do_flush = [&] { read_kernel<<<read_blocks, threads, 0, s>>>((const uint4*)flush, flush_bytes / 16, sink); };
  auto do_read = [&](size_t bytes) { read_kernel<<<read_blocks, threads, 0, s>>>((const uint4*)w, bytes / 16, sink); };
  auto bulk = [&](size_t bytes, int blocks) { bulk_prefetch_kernel<<<blocks, 64, 0, s>>>(w, bytes, 4096); };
  auto line = [&](size_t bytes) { line_prefetch_kernel<<<sms * 2, 256, 0, s>>>(w, bytes); };
  auto spin = [&] { spin_kernel<<<1, 32, 0, s>>>(20000); };
  const int reps = 20;
  // Times what runs between e1 and e2 after setup() (between e0 and e1).
  auto timed = [&](auto setup, auto body) {
    double sum = 0;
    for (int r = 0; r < reps + 2; ++r) {
      do_flush();
      setup();
      CHECK(cudaEventRecord(e1, s));
      body();
      CHECK(cudaEventRecord(e2, s));
      CHECK(cudaStreamSynchronize(s));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e1, e2));
      if (r >= 2) sum += ms;
    }
    return sum / reps * 1000.0;  // us
  };
  std::printf("| MiB | read cold | read warm | bulk pf alone (132 blk) | bulk pf alone (32 blk) | line pf alone | "
              "read after bulk pf + 20us | read after line pf + 20us | bulk pf + read | cold read + 20us spin |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t mib : {4, 8, 16, 25, 32, 40}) {
    const size_t b = mib << 20;
    auto none = [] {};
    const double cold = timed(none, [&] { do_read(b); });
    const double warm = timed([&] { do_read(b); }, [&] { do_read(b); });
    const double pf = timed(none, [&] { bulk(b, sms); });
    const double pf32 = timed(none, [&] { bulk(b, 32); });
    const double lpf = timed(none, [&] { line(b); });
    const double after = timed([&] { bulk(b, sms); spin(); }, [&] { do_read(b); });
    const double after_line = timed([&] { line(b); spin(); }, [&] { do_read(b); });
    const double both = timed(none, [&] { bulk(b, sms); do_read(b); });
    const double spin_cold = timed(none, [&] { spin(); do_read(b); });
    std::printf("| %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", mib, cold, warm, pf, pf32,
                lpf, after, after_line, both, spin_cold);
  }
  std::printf("(us; DRAM at 4.3 TB/s reads 1 MiB in %.2f us)\n", 1048576.0 / 4.3e12 * 1e6);
  return 0;
}
