// Harness: the vocabulary-parallel embedding and the NCCL collectives against
// the CPU reference (the in-process communicator). One GPU makes a group of
// one; the multi-GPU cases skip themselves with fewer than two GPUs visible.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "backend/cuda/nccl_communicator.h"
#include "cuda_test_util.h"
#include "rank_threads.h"

namespace hyllm::test {
namespace {

TEST_F(CudaOpTest, EmbeddingPartOfVocab) {
  Rng rng(seed_);
  const int64_t V = 300, H = 72, start = 100, rows = 120;
  HostTensor table = bf16_tensor({rows, H});
  table.fill_normal(rng);
  std::vector<int64_t> id_list = {0, 99, 100, 219, 220, 299, -5, 100000};
  for (int i = 0; i < 9; ++i) id_list.push_back(rng.integer(0, V - 1));
  HostTensor ids = i32_tensor(id_list), out = bf16_tensor({static_cast<int64_t>(id_list.size()), H});
  EmbeddingArgs a{ids.view(), table.view(), out.view()};
  a.part_of_vocab = true;
  a.vocab_start = start;
  embedding(*cpu_, a);
  Mirror dids(*gpu_, ids), dtable(*gpu_, table), dout(*gpu_, out);
  dout.poison();
  EmbeddingArgs d{dids.view(), dtable.view(), dout.view()};
  d.part_of_vocab = true;
  d.vocab_start = start;
  embedding(*gpu_, d);
  expect_equal("embedding part_of_vocab", dout, out);
}

// Runs fn(rank) on one thread per rank; rethrows the first rank's error.
void on_rank_threads(int ranks, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// x of rank r [T, W]: random values plus element 0 chosen so that rounding
// the sum once differs from rounding the addends first (f32 x) or from a bf16
// accumulator (bf16 x, 3+ ranks). Every fp32 order gives the same sum there.
std::vector<HostTensor> rank_inputs(int ranks, DType dtype, int64_t T, int64_t W, Rng& rng) {
  std::vector<HostTensor> xs;
  for (int r = 0; r < ranks; ++r) {
    xs.emplace_back(dtype, Shape{T, W});
    xs.back().fill_normal(rng);
    const double tail = dtype == DType::kF32 ? std::ldexp(1.0, -8) + std::ldexp(1.0, -20) : std::ldexp(1.0, -8);
    xs.back().set(0, r == 0 ? 1.0 : (dtype == DType::kF32 && r > 1 ? 0.0 : tail));
  }
  return xs;
}

// The CPU group's all_reduce of xs into fresh outputs of out_dtype.
std::vector<HostTensor> cpu_all_reduce(std::vector<HostTensor>& xs, DType out_dtype) {
  const int ranks = static_cast<int>(xs.size());
  std::vector<HostTensor> outs;
  for (auto& x : xs) outs.emplace_back(out_dtype, x.view().shape());
  RankGroup group(ranks);
  expect_all_ok(group.run([&](int r, Backend& be) { all_reduce(be, {xs[r].view(), outs[r].view()}); }));
  return outs;
}

std::vector<HostTensor> cpu_all_gather(std::vector<HostTensor>& xs, int64_t N) {
  const int ranks = static_cast<int>(xs.size());
  std::vector<HostTensor> outs;
  for (auto& x : xs) outs.emplace_back(x.dtype(), Shape{x.view().dim(0), N});
  RankGroup group(ranks);
  expect_all_ok(group.run([&](int r, Backend& be) { all_gather_columns(be, {xs[r].view(), outs[r].view()}); }));
  return outs;
}

// A group of `ranks` CUDA backends on GPUs 0..ranks-1 with NCCL communicators.
struct GpuGroup {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::shared_ptr<Communicator>> comms;
  explicit GpuGroup(int ranks) {
    std::vector<Backend*> raw;
    for (int r = 0; r < ranks; ++r) {
      backends.push_back(make_cuda_backend(r));
      raw.push_back(backends.back().get());
    }
    comms = make_nccl_communicators(raw);
    for (int r = 0; r < ranks; ++r) backends[r]->set_communicator(comms[r]);
  }
};

// all_reduce on `ranks` GPUs (eagerly, then replayed from a CUDA graph with
// new inputs) against the CPU group; in_place reduces into x.
void check_nccl_all_reduce(int ranks, DType x_dtype, DType out_dtype, bool in_place, uint32_t seed) {
  SCOPED_TRACE(fmt::format("{} GPUs, {} -> {}{} (seed {})", ranks, dtype_name(x_dtype), dtype_name(out_dtype),
                           in_place ? ", in place" : "", seed));
  Rng rng(seed);
  const int64_t T = 5, W = 1000;
  std::vector<HostTensor> xs = rank_inputs(ranks, x_dtype, T, W, rng);
  std::vector<HostTensor> xs2 = rank_inputs(ranks, x_dtype, T, W, rng);
  std::vector<HostTensor> want = cpu_all_reduce(xs, in_place ? x_dtype : out_dtype);
  std::vector<HostTensor> want2 = cpu_all_reduce(xs2, in_place ? x_dtype : out_dtype);
  GpuGroup group(ranks);
  std::vector<std::vector<double>> got(ranks), got2(ranks);
  on_rank_threads(ranks, [&](int r) {
    Backend& be = *group.backends[r];
    be.bind_to_current_thread();
    HostTensor out_host(in_place ? x_dtype : out_dtype, {T, W});
    Mirror dx(be, xs[r]), dout(be, out_host);
    dout.poison();
    const TensorView out = in_place ? dx.view() : dout.view();
    all_reduce(be, {dx.view(), out});
    got[r] = (in_place ? dx : dout).values();
    // The same op recorded in a graph, replayed on new inputs.
    dx.upload();
    auto graph = cuda_capture_graph(be, [&] { all_reduce(be, {dx.view(), out}); });
    Mirror dx2(be, xs2[r]);
    be.copy_on_device(dx.view().data(), dx2.view().data(), xs2[r].buf.size());
    graph->replay();
    got2[r] = (in_place ? dx : dout).values();
  });
  const double tol = (in_place ? x_dtype : out_dtype) == DType::kBF16 ? kOneBf16Step : 1e-6;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_LE(normalized_error(got[r], want[r].values()), tol) << "rank " << r;
    EXPECT_LE(normalized_error(got2[r], want2[r].values()), tol) << "rank " << r << " (graph)";
    EXPECT_EQ(got[r][0], want[r].get(0)) << "rank " << r << ": element 0 is not rounded once";
  }
  auto& e = error_table()[fmt::format("nccl all_reduce {}->{}", dtype_name(x_dtype), dtype_name(out_dtype))];
  for (int r = 0; r < ranks; ++r) e.first = std::max(e.first, normalized_error(got[r], want[r].values()));
  e.second = tol;
}

void check_nccl_all_gather(int ranks, DType dtype, int64_t R, int64_t w, int64_t N, uint32_t seed) {
  SCOPED_TRACE(fmt::format("{} GPUs, {} [{}, {}] -> [{}, {}]", ranks, dtype_name(dtype), R, w, R, N));
  Rng rng(seed);
  std::vector<HostTensor> xs;
  for (int r = 0; r < ranks; ++r) {
    xs.emplace_back(dtype, Shape{R, w});
    xs.back().fill_normal(rng);
  }
  std::vector<HostTensor> want = cpu_all_gather(xs, N);
  GpuGroup group(ranks);
  std::vector<std::vector<double>> got(ranks);
  on_rank_threads(ranks, [&](int r) {
    Backend& be = *group.backends[r];
    be.bind_to_current_thread();
    HostTensor out_host(dtype, {R, N});
    Mirror dx(be, xs[r]), dout(be, out_host);
    dout.poison();
    all_gather_columns(be, {dx.view(), dout.view()});
    got[r] = dout.values();
  });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(normalized_error(got[r], want[r].values()), 0.0) << "rank " << r;
  error_table()["nccl all_gather_columns"].second = 0.0;
}

void check_all_collectives(int ranks, uint32_t seed) {
  check_nccl_all_reduce(ranks, DType::kF32, DType::kF32, false, seed);
  check_nccl_all_reduce(ranks, DType::kF32, DType::kBF16, false, seed);
  check_nccl_all_reduce(ranks, DType::kBF16, DType::kBF16, false, seed);
  check_nccl_all_reduce(ranks, DType::kBF16, DType::kBF16, true, seed);
  check_nccl_all_reduce(ranks, DType::kBF16, DType::kF32, false, seed);
  check_nccl_all_reduce(ranks, DType::kF32, DType::kF32, true, seed);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    check_nccl_all_gather(ranks, dt, 1, 64, ranks * 64, seed);      // one row, no cut: gathered in place
    check_nccl_all_gather(ranks, dt, 3, 40, ranks * 40 - 7, seed);  // the last block cut
    check_nccl_all_gather(ranks, dt, 1, 40, ranks * 40 - 1, seed);
  }
}

TEST_F(CudaOpTest, NcclOneGpu) { check_all_collectives(1, seed_); }

TEST_F(CudaOpTest, NcclTwoGpus) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 GPUs, " << cuda_device_count() << " visible";
  check_all_collectives(2, seed_);
}

TEST_F(CudaOpTest, NcclAllGpus) {
  const int n = std::min(cuda_device_count(), 8);
  if (n < 3) GTEST_SKIP() << "needs 3 or more GPUs, " << n << " visible";
  check_all_collectives(n, seed_);
}

TEST_F(CudaOpTest, NcclAbortedGroupThrows) {
  GpuGroup group(1);
  Backend& be = *group.backends[0];
  HostTensor x = f32_tensor({2, 8});
  Mirror dx(be, x);
  all_reduce(be, {dx.view(), dx.view()});
  be.synchronize();
  group.comms[0]->abort();
  try {
    all_reduce(be, {dx.view(), dx.view()});
    FAIL() << "all_reduce after abort did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal) << e.what();
  }
}

// Rank 1 never joins; a third thread aborts the group: rank 0's stream drains
// and its next collective throws.
TEST_F(CudaOpTest, NcclAbortReleasesAWaitingGpu) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 GPUs, " << cuda_device_count() << " visible";
  GpuGroup group(2);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    group.comms[1]->abort();
  });
  ErrorCode second = ErrorCode::kOk;
  on_rank_threads(1, [&](int) {
    Backend& be = *group.backends[0];
    be.bind_to_current_thread();
    HostTensor x = f32_tensor({2, 8});
    Mirror dx(be, x);
    all_reduce(be, {dx.view(), dx.view()});
    try {
      be.synchronize();  // returns once the abort ends the waiting kernel
    } catch (const Error&) {
    }
    try {
      all_reduce(be, {dx.view(), dx.view()});
    } catch (const Error& e) {
      second = e.code();
    }
  });
  aborter.join();
  EXPECT_EQ(second, ErrorCode::kInternal);
}

// Every backend entry point from a thread other than the creator's, once it
// bound the backend: with two GPUs the creator's current device is the other one.
TEST_F(CudaOpTest, BackendUsableFromABoundThread) {
  const int n = std::min(cuda_device_count(), 2);
  std::vector<std::unique_ptr<Backend>> backends;
  for (int i = 0; i < n; ++i) backends.push_back(make_cuda_backend(i));
  on_rank_threads(n, [&](int r) {
    Backend& be = *backends[r];
    be.bind_to_current_thread();
    Rng rng(seed_ + r);
    HostTensor table = bf16_tensor({64, 32}), ids = i32_tensor({3, 63, 0}), out = bf16_tensor({3, 32});
    table.fill_normal(rng);
    Mirror dtable(be, table), dids(be, ids), dout(be, out);
    embedding(be, {dids.view(), dtable.view(), dout.view()});
    DeviceBuffer copy(be, DType::kBF16, Shape{3, 32});
    be.copy_on_device(copy.data(), dout.view().data(), out.buf.size());
    be.fill_zero(dout.view().data(), out.buf.size());
    HostTensor back = bf16_tensor({3, 32});
    be.copy_to_host(back.buf.data(), copy.data(), back.buf.size());
    be.synchronize();
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t h = 0; h < 32; ++h) ASSERT_EQ(back.get(t * 32 + h), table.v[ids.v[t] * 32 + h]);
    EXPECT_GT(be.memory_info().total_bytes, 0u);
    auto graph = cuda_capture_graph(be, [&] { embedding(be, {dids.view(), dtable.view(), dout.view()}); });
    graph->replay();
    be.synchronize();
  });
}

}  // namespace
}  // namespace hyllm::test
