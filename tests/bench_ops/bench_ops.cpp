// CPU op timings at the shapes of the embedded default model (hidden 320,
// MLP 768, attention 4/2 heads of 64, GDN 2/4 heads of 64, vocab 8192):
// decode (one token) and prefill (a few hundred tokens).
#include <benchmark/benchmark.h>

#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "tensor/host_buffer.h"

namespace hyllm {
namespace {

Backend& backend() {
  static auto be = make_cpu_backend();
  return *be;
}

HostBuffer random_bf16(Shape s, float sd = 1.0f) {
  HostBuffer b(DType::kBF16, s);
  std::mt19937 gen(42);
  std::normal_distribution<float> n(0.0f, sd);
  for (int64_t i = 0; i < s.numel(); ++i) b.data_as<uint16_t>()[i] = f32_to_bf16(n(gen));
  return b;
}

void BM_LinearBf16(benchmark::State& st) {
  const int64_t M = st.range(0), K = st.range(1), N = st.range(2);
  HostBuffer x = random_bf16({M, K}), w = random_bf16({N, K}, 0.05f), out(DType::kBF16, {M, N});
  for (auto _ : st) linear(backend(), {x.view(), LinearWeight::bf16(w.view()), out.view()});
  st.SetItemsProcessed(st.iterations() * M * N * K);
  st.SetBytesProcessed(st.iterations() * N * K * 2);
}
BENCHMARK(BM_LinearBf16)->Args({32, 320, 1536})->Args({24, 320, 1536})
    ->Args({1, 320, 1536})->Args({1, 768, 320})->Args({1, 320, 8192})->Args({2, 320, 1536})
    ->Args({4, 320, 1536})->Args({8, 320, 1536})->Args({16, 320, 1536})->Args({256, 320, 1536})
    ->Args({256, 320, 8192})->Unit(benchmark::kMicrosecond);

void BM_LinearFp8Block(benchmark::State& st) {
  const int64_t M = st.range(0), K = st.range(1), N = st.range(2);
  HostBuffer x = random_bf16({M, K}), w(DType::kF8E4M3, {N, K}), s(DType::kF32, {(N + 127) / 128, (K + 127) / 128}),
      out(DType::kBF16, {M, N});
  for (int64_t i = 0; i < N * K; ++i) w.data_as<uint8_t>()[i] = static_cast<uint8_t>(i * 37 % 0x7e);
  for (int64_t i = 0; i < s.view().numel(); ++i) s.data_as<float>()[i] = 1e-3f;
  for (auto _ : st) linear(backend(), {x.view(), LinearWeight::fp8_block(w.view(), s.view()), out.view()});
  st.SetItemsProcessed(st.iterations() * M * N * K);
}
BENCHMARK(BM_LinearFp8Block)->Args({1, 384, 1536})->Args({256, 384, 1536})->Unit(benchmark::kMicrosecond);

void BM_RmsNormResidual(benchmark::State& st) {
  const int64_t T = st.range(0), H = 320;
  HostBuffer x = random_bf16({T, H}), r = random_bf16({T, H}), w = random_bf16({H}), out(DType::kBF16, {T, H});
  for (auto _ : st) rms_norm(backend(), {x.view(), w.view(), out.view(), r.view(), r.view(), 1e-6f, true});
}
BENCHMARK(BM_RmsNormResidual)->Arg(1)->Arg(256)->Unit(benchmark::kMicrosecond);

struct GdnFixture {
  static constexpr int64_t Hk = 2, Hv = 4, Dk = 64, Dv = 64, C = 2 * Hk * Dk + Hv * Dv;
  HostBuffer qkv, ab, alog, dt, state, conv_w, conv_state, out, conv_out;
  explicit GdnFixture(int64_t T)
      : qkv(random_bf16({T, C})), ab(random_bf16({T, 2 * Hv})), alog(random_bf16({Hv})), dt(random_bf16({Hv})),
        state(DType::kF32, {1, Hv, Dv, Dk}), conv_w(random_bf16({C, 4})), conv_state(DType::kBF16, {1, 3, C}),
        out(DType::kBF16, {T, Hv * Dv}), conv_out(DType::kBF16, {T, C}) {}
};

HostBuffer i32(std::initializer_list<int32_t> v) {
  HostBuffer b(DType::kI32, {static_cast<int64_t>(v.size())});
  int i = 0;
  for (int32_t x : v) b.data_as<int32_t>()[i++] = x;
  return b;
}

void BM_GatedDeltaRule(benchmark::State& st) {
  const int64_t T = st.range(0);
  const auto algo = st.range(1) ? DeltaRuleAlgorithm::kChunked : DeltaRuleAlgorithm::kRecurrent;
  GdnFixture f(T);
  HostBuffer qsl = i32({0, static_cast<int32_t>(T)}), idx = i32({0}), init = i32({1});
  using F = GdnFixture;
  for (auto _ : st) {
    gated_delta_rule(backend(), {f.qkv.view(), ColSlice(f.ab.view(), 0, F::Hv), ColSlice(f.ab.view(), F::Hv, F::Hv),
                                 f.alog.view(), f.dt.view(), f.state.view(), qsl.view(), idx.view(), init.view(),
                                 f.out.view(), F::Hk, F::Hv, F::Dk, F::Dv, algo, 0});
  }
}
BENCHMARK(BM_GatedDeltaRule)->Args({1, 0})->Args({256, 0})->Args({256, 1})->Unit(benchmark::kMicrosecond);

void BM_GdnConv(benchmark::State& st) {
  const int64_t T = st.range(0);
  GdnFixture f(T);
  HostBuffer qsl = i32({0, static_cast<int32_t>(T)}), idx = i32({0}), init = i32({1});
  for (auto _ : st) {
    gdn_conv(backend(), {f.qkv.view(), f.conv_w.view(), f.conv_state.view(), qsl.view(), idx.view(), init.view(),
                         f.conv_out.view()});
  }
}
BENCHMARK(BM_GdnConv)->Arg(1)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_PagedAttention(benchmark::State& st) {
  const int64_t ctx = st.range(0), T = st.range(1), Hq = 4, Hkv = 2, D = 64, BS = 16;
  const int64_t L = ctx + T, blocks = (L + BS - 1) / BS;
  HostBuffer q = random_bf16({T, Hq * D}), gate = random_bf16({T, Hq * D}), out(DType::kBF16, {T, Hq * D});
  HostBuffer kc = random_bf16({blocks, BS, Hkv, D}), vc = random_bf16({blocks, BS, Hkv, D});
  HostBuffer bt(DType::kI32, {1, blocks});
  for (int64_t b = 0; b < blocks; ++b) bt.data_as<int32_t>()[b] = static_cast<int32_t>(b);
  HostBuffer qsl = i32({0, static_cast<int32_t>(T)}), lens = i32({static_cast<int32_t>(L)});
  for (auto _ : st) {
    paged_attention(backend(), {q.view(), {kc.view(), vc.view()}, bt.view(), qsl.view(), lens.view(), gate.view(),
                                out.view(), Hq, Hkv, D, 0.0f, T, L});
  }
}
BENCHMARK(BM_PagedAttention)->Args({511, 1})->Args({0, 256})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hyllm


