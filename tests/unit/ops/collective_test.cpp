// The collectives (all_reduce, all_gather_columns) over the in-process CPU
// communicator, with 1 to 4 ranks on threads, and the vocabulary-parallel
// embedding. The CPU sums in rank order in fp32, so the references below are
// that sum, computed here the same way, rounded once.
#include <cmath>

#include "ops_test_util.h"
#include "rank_threads.h"

namespace hyllm::test {
namespace {

constexpr int64_t kRows = 3, kCols = 37;  // odd, so that the ranks' shares are uneven

// x of rank r: fresh random values in dtype, with element 0 chosen so that
// rounding the sum once differs from rounding the addends first (f32 -> bf16)
// or from accumulating in bf16 (bf16 -> bf16, three or more ranks).
std::vector<HostTensor> rank_inputs(int ranks, DType dtype, Rng& rng) {
  std::vector<HostTensor> xs;
  for (int r = 0; r < ranks; ++r) {
    HostTensor x(dtype, {kRows, kCols});
    x.fill_normal(rng);
    const double tail = dtype == DType::kF32 ? std::ldexp(1.0, -8) + std::ldexp(1.0, -20) : std::ldexp(1.0, -8);
    x.set(0, r == 0 ? 1.0 : (dtype == DType::kF32 && r > 1 ? 0.0 : tail));
    xs.push_back(std::move(x));
  }
  return xs;
}

// The fp32 sum in rank order of element i.
float rank_order_sum(const std::vector<HostTensor>& xs, int64_t i) {
  float s = static_cast<float>(xs[0].v[i]);
  for (size_t r = 1; r < xs.size(); ++r) s += static_cast<float>(xs[r].v[i]);
  return s;
}

double rounded(float s, DType dtype) { return dtype == DType::kBF16 ? bf16_to_f32(f32_to_bf16(s)) : s; }

void check_all_reduce(int ranks, DType x_dtype, DType out_dtype, bool in_place) {
  SCOPED_TRACE(fmt::format("{} ranks, {} -> {}{}", ranks, dtype_name(x_dtype), dtype_name(out_dtype),
                           in_place ? ", in place" : ""));
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  std::vector<HostTensor> xs = rank_inputs(ranks, x_dtype, rng), outs;
  std::vector<double> want(static_cast<size_t>(kRows * kCols));
  for (int64_t i = 0; i < kRows * kCols; ++i) want[i] = rounded(rank_order_sum(xs, i), out_dtype);
  for (int r = 0; r < ranks; ++r) {
    outs.push_back(HostTensor(out_dtype, {kRows, kCols}));
    outs.back().poison();
  }
  RankGroup group(ranks);
  expect_all_ok(group.run([&](int r, Backend& be) {
    const TensorView out = in_place ? xs[r].view() : outs[r].view();
    all_reduce(be, {xs[r].view(), out});
  }));
  for (int r = 0; r < ranks; ++r) {
    const HostTensor& got = in_place ? xs[r] : outs[r];
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.get(i), want[i]) << "rank " << r << " element " << i;
  }
}

TEST(AllReduce, F32ToF32) {
  for (int ranks = 1; ranks <= 4; ++ranks) check_all_reduce(ranks, DType::kF32, DType::kF32, false);
}

TEST(AllReduce, F32ToBf16RoundsOnce) {
  for (int ranks = 1; ranks <= 4; ++ranks) check_all_reduce(ranks, DType::kF32, DType::kBF16, false);
  // Element 0 is 1 + 2^-8 + 2^-20: once rounded it is 1 + 2^-7; rounding the
  // addends to bf16 first would give 1 + 2^-8, a tie that rounds to 1.
  std::vector<HostTensor> xs(2);
  xs[0] = f32_tensor({1, 1});
  xs[1] = f32_tensor({1, 1});
  xs[0].set(0, 1.0);
  xs[1].set(0, std::ldexp(1.0, -8) + std::ldexp(1.0, -20));
  HostTensor out0 = bf16_tensor({1, 1}), out1 = bf16_tensor({1, 1});
  RankGroup group(2);
  expect_all_ok(group.run([&](int r, Backend& be) { all_reduce(be, {xs[r].view(), (r ? out1 : out0).view()}); }));
  EXPECT_EQ(out0.get(0), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(out1.get(0), 1.0 + std::ldexp(1.0, -7));
}

TEST(AllReduce, Bf16ToBf16AccumulatesInF32) {
  for (int ranks = 1; ranks <= 4; ++ranks) check_all_reduce(ranks, DType::kBF16, DType::kBF16, false);
  // Three ranks: 1 + 2^-8 + 2^-8 is 1 + 2^-7 in fp32; a bf16 accumulator
  // would round 1 + 2^-8 down to 1 twice.
  std::vector<HostTensor> xs;
  for (int r = 0; r < 3; ++r) {
    xs.push_back(bf16_tensor({1, 1}));
    xs.back().set(0, r == 0 ? 1.0 : std::ldexp(1.0, -8));
  }
  RankGroup group(3);
  expect_all_ok(group.run([&](int r, Backend& be) { all_reduce(be, {xs[r].view(), xs[r].view()}); }));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(xs[r].get(0), 1.0 + std::ldexp(1.0, -7)) << "rank " << r;
}

TEST(AllReduce, InPlace) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    check_all_reduce(ranks, DType::kBF16, DType::kBF16, true);
    check_all_reduce(ranks, DType::kF32, DType::kF32, true);
  }
}

TEST(AllReduce, Bf16ToF32) {
  for (int ranks = 1; ranks <= 4; ++ranks) check_all_reduce(ranks, DType::kBF16, DType::kF32, false);
}

// x [R, w] of rank r holds 1000 r + column index + 100 row; out [R, N].
void check_all_gather(int ranks, int64_t w, int64_t N, DType dtype) {
  SCOPED_TRACE(fmt::format("{} ranks, w {}, N {}, {}", ranks, w, N, dtype_name(dtype)));
  const int64_t R = 3;
  std::vector<HostTensor> xs, outs;
  for (int r = 0; r < ranks; ++r) {
    xs.push_back(HostTensor(dtype, {R, w}));
    for (int64_t i = 0; i < R * w; ++i) xs.back().set(i, 1000.0 * r + 100.0 * (i / w) + static_cast<double>(i % w));
    outs.push_back(HostTensor(dtype, {R, N}));
    outs.back().poison();
  }
  RankGroup group(ranks);
  expect_all_ok(group.run([&](int r, Backend& be) { all_gather_columns(be, {xs[r].view(), outs[r].view()}); }));
  for (int r = 0; r < ranks; ++r) {
    for (int64_t row = 0; row < R; ++row) {
      for (int64_t col = 0; col < N; ++col) {
        const double want = xs[static_cast<size_t>(col / w)].v[row * w + col % w];
        ASSERT_EQ(outs[r].get(row * N + col), want) << "rank " << r << " row " << row << " column " << col;
      }
    }
  }
}

TEST(AllGatherColumns, UnevenCut) {
  check_all_gather(1, 7, 7, DType::kF32);
  check_all_gather(1, 7, 5, DType::kBF16);
  check_all_gather(2, 8, 16, DType::kBF16);
  check_all_gather(3, 5, 13, DType::kF32);  // the last rank's block is cut to 3 columns
  check_all_gather(4, 4, 12, DType::kBF16);  // the last rank's block is all padding
}

// Hundreds of back-to-back collectives, each rank rewriting its x as soon as
// a call returns: a rank that returned while another still read its x (or
// wrote its out) would show up as a wrong sum.
TEST(Collectives, ManyCallsInARow) {
  constexpr int kRanks = 4, kCalls = 300;
  constexpr int64_t W = 21;
  std::vector<HostTensor> xs, gathered;
  for (int r = 0; r < kRanks; ++r) {
    xs.push_back(f32_tensor({2, W}));
    gathered.push_back(f32_tensor({2, kRanks * W - 3}));
  }
  std::vector<int> wrong(kRanks, 0);
  RankGroup group(kRanks);
  expect_all_ok(group.run([&](int r, Backend& be) {
    float* x = xs[r].buf.data_as<float>();
    const float* g = gathered[r].buf.data_as<float>();
    for (int call = 0; call < kCalls; ++call) {
      for (int64_t i = 0; i < 2 * W; ++i) x[i] = static_cast<float>(call * 7 + r * 3 + i);
      all_gather_columns(be, {xs[r].view(), gathered[r].view()});
      for (int64_t col = 0; col < kRanks * W - 3; ++col) {
        const int64_t q = col / W, i = W + col % W;  // row 1
        if (g[W * kRanks - 3 + col] != static_cast<float>(call * 7 + q * 3 + i)) ++wrong[r];
      }
      all_reduce(be, {xs[r].view(), xs[r].view()});
      for (int64_t i = 0; i < 2 * W; ++i) {
        const float want = static_cast<float>(kRanks * (call * 7 + i) + 3 * (0 + 1 + 2 + 3));
        if (x[i] != want) ++wrong[r];
      }
    }
  }));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(wrong[r], 0) << "rank " << r;
}

TEST(Collectives, AbortReleasesWaitingRanks) {
  RankGroup group(3);
  std::vector<HostTensor> xs;
  for (int r = 0; r < 3; ++r) xs.push_back(f32_tensor({2, 4}));
  const auto outcomes = group.run([&](int r, Backend& be) {
    all_reduce(be, {xs[r].view(), xs[r].view()});  // one that completes
    if (r == 2) {
      // Rank 2 fails before its next collective, while 0 and 1 wait in it.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      be.communicator()->abort();
      all_reduce(be, {xs[r].view(), xs[r].view()});  // a later call throws too
      return;
    }
    all_reduce(be, {xs[r].view(), xs[r].view()});
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(outcomes[r].code, ErrorCode::kInternal) << "rank " << r << ": " << outcomes[r].message;
    EXPECT_NE(outcomes[r].message.find("aborted"), std::string::npos) << outcomes[r].message;
  }
}

TEST(Collectives, AbortFromAnotherThread) {
  RankGroup group(2);
  HostTensor x = f32_tensor({1, 8}), out = f32_tensor({1, 16});
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    group.comms[1]->abort();
  });
  // Only rank 0 calls: it waits for rank 1 until the abort.
  const auto outcomes = group.run([&](int r, Backend& be) {
    if (r == 0) all_gather_columns(be, {x.view(), out.view()});
  });
  aborter.join();
  EXPECT_EQ(outcomes[0].code, ErrorCode::kInternal) << outcomes[0].message;
}

TEST(Collectives, MismatchedShapesFailOnEveryRank) {
  RankGroup group(3);
  std::vector<HostTensor> xs;
  for (int r = 0; r < 3; ++r) xs.push_back(f32_tensor({2, r == 1 ? 5 : 4}));
  auto outcomes = group.run([&](int r, Backend& be) { all_reduce(be, {xs[r].view(), xs[r].view()}); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(outcomes[r].code, ErrorCode::kInvalidArgument) << "rank " << r << ": " << outcomes[r].message;
    EXPECT_NE(outcomes[r].message.find("disagree"), std::string::npos) << outcomes[r].message;
  }
  // Different ops on different ranks, and different dtypes.
  RankGroup group2(2);
  HostTensor a = f32_tensor({2, 4}), b = f32_tensor({2, 8}), c = bf16_tensor({2, 4});
  outcomes = group2.run([&](int r, Backend& be) {
    if (r == 0) all_reduce(be, {a.view(), a.view()});
    else all_gather_columns(be, {a.view(), b.view()});
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(outcomes[r].code, ErrorCode::kInvalidArgument) << outcomes[r].message;
  RankGroup group3(2);
  HostTensor d = f32_tensor({2, 4});
  outcomes = group3.run([&](int r, Backend& be) { all_reduce(be, {(r ? c : d).view(), (r ? c : d).view()}); });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(outcomes[r].code, ErrorCode::kInvalidArgument) << outcomes[r].message;
}

TEST(Collectives, NeedACommunicator) {
  auto be = make_cpu_backend();
  HostTensor x = f32_tensor({2, 4}), out = f32_tensor({2, 8});
  try {
    all_reduce(*be, {x.view(), x.view()});
    FAIL() << "all_reduce without a communicator did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tensor parallelism is off"), std::string::npos) << e.what();
  }
  try {
    all_gather_columns(*be, {x.view(), out.view()});
    FAIL() << "all_gather_columns without a communicator did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

// Each rank's own arguments are checked before any rank waits for another.
TEST(Collectives, RejectBadArguments) {
  RankGroup group(2);
  Backend& be = *group.backends[0];
  HostTensor x = f32_tensor({2, 4}), wide = f32_tensor({2, 9}), bf = bf16_tensor({2, 8}), i32(DType::kI32, {2, 4});
  HostTensor pair = f32_tensor({2, 8});
  const TensorView shifted(pair.buf.data_as<float>() + 2, DType::kF32, {2, 4});
  const TensorView front(pair.buf.data(), DType::kF32, {2, 4});
  const TensorView front_bf(pair.buf.data(), DType::kBF16, {2, 4});
  const auto expect_invalid = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
  };
  expect_invalid([&] { all_reduce(be, {x.view(), wide.view()}); });            // shape
  expect_invalid([&] { all_reduce(be, {i32.view(), i32.view()}); });           // dtype
  expect_invalid([&] { all_reduce(be, {front, shifted}); });                   // partial overlap
  expect_invalid([&] { all_reduce(be, {front, front_bf}); });                  // x read as f32, written as bf16
  expect_invalid([&] { all_gather_columns(be, {x.view(), wide.view()}); });    // 9 > 2 ranks x 4
  expect_invalid([&] { all_gather_columns(be, {x.view(), bf.view()}); });      // dtype differs
  expect_invalid([&] { all_gather_columns(be, {front, pair.view()}); });       // out aliases x
}

// The vocabulary split over ranks: each rank's part gives zeros outside its
// rows, and the sum over ranks (here by all_reduce, as a model does) is the
// whole table's embedding.
void check_vocab_parallel_embedding(int ranks) {
  SCOPED_TRACE(fmt::format("{} ranks", ranks));
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  constexpr int64_t V = 50, H = 24;
  HostTensor table = bf16_tensor({V, H});
  table.fill_normal(rng);
  HostTensor ids = i32_tensor({0, 49, 16, 17, 33, 34, 25, 0});
  const int64_t T = ids.numel();
  auto whole_be = make_cpu_backend();
  HostTensor whole = bf16_tensor({T, H});
  embedding(*whole_be, {ids.view(), table.view(), whole.view()});

  const int64_t part = (V + ranks - 1) / ranks;  // the last part is shorter
  std::vector<HostTensor> outs;
  for (int r = 0; r < ranks; ++r) {
    outs.push_back(bf16_tensor({T, H}));
    outs.back().poison();
  }
  RankGroup group(ranks);
  expect_all_ok(group.run([&](int r, Backend& be) {
    const int64_t start = r * part, rows = std::min(part, V - start);
    const TensorView slice(table.buf.data_as<uint16_t>() + start * H, DType::kBF16, {rows, H});
    EmbeddingArgs a{ids.view(), slice, outs[r].view()};
    a.part_of_vocab = true;
    a.vocab_start = start;
    embedding(be, a);
    for (int64_t t = 0; t < T; ++t) {
      const bool mine = ids.v[t] >= start && ids.v[t] < start + rows;
      for (int64_t h = 0; h < H; ++h) {
        const double want = mine ? whole.get(t * H + h) : 0.0;
        if (outs[r].get(t * H + h) != want) fail(ErrorCode::kInternal, "rank {} row {} column {}", r, t, h);
      }
    }
    all_reduce(be, {outs[r].view(), outs[r].view()});
  }));
  for (int r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < T * H; ++i) ASSERT_EQ(outs[r].get(i), whole.get(i)) << "rank " << r << " at " << i;
}

TEST(Embedding, PartOfVocabSumsToTheWholeTable) {
  check_vocab_parallel_embedding(2);
  check_vocab_parallel_embedding(3);
}

TEST(Embedding, PartOfVocabValidation) {
  auto be = make_cpu_backend();
  HostTensor table = bf16_tensor({4, 8}), ids = i32_tensor({-1, 100, 5}), out = bf16_tensor({3, 8});
  out.poison();
  EmbeddingArgs a{ids.view(), table.view(), out.view()};
  a.part_of_vocab = true;
  a.vocab_start = 4;
  embedding(*be, a);  // ids outside the part, even outside any vocabulary: zeros, no error
  for (int64_t i = 0; i < 3 * 8; ++i) ASSERT_EQ(out.get(i), 0.0) << i;
  a.vocab_start = -1;
  EXPECT_THROW(embedding(*be, a), Error);
  a.part_of_vocab = false;
  a.vocab_start = 4;
  EXPECT_THROW(embedding(*be, a), Error);
}

}  // namespace
}  // namespace hyllm::test
