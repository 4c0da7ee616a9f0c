// bench_cuda_step: times whole forward steps of a Qwen3.5 model at real scale
// (a config.json, random bf16 weights on one GPU) through the CUDA backend:
// prefill of one prompt and decode at several batch sizes, each beside its
// physical floor (BENCHMARKING.md section 4: bytes over copy bandwidth, FLOPs
// over bf16 tensor peak, both as measured on our H200).
//   bench_cuda_step CONFIG_DIR [--prefill 1024] [--context 1024] [--batches 1,8,32] [--iters 20]
//                   [--router-skew S] [--moe-tokens 1,32,1024] [--moe-stream 1] [--moe-only 1]
// MoE configs also get the MoE blocks alone (every layer's, one after
// another, from a CUDA graph) at each --moe-tokens row count, beside the
// bytes of the experts they must read, and the routing's load spread.
// --moe-stream times the small regime over every layer's distinct expert
// weights (so that they stream from memory, not L2) at the --moe-tokens
// counts up to 32, last; --moe-only skips the prefill and decode steps.
#include <execinfo.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/device_sampler.h"
#include "synthetic_model.h"

namespace hyllm::bench {
namespace {

constexpr double kCopyBandwidth = 4.28e12;  // bytes/s, device copy (read + write), measured
constexpr double kBf16Peak = 790e12;        // FLOP/s, 8192^3 bf16 GEMM, measured

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  double forward_s, step_s, graph_s;
};

// Per-op-kind wall time of one synchronised forward (each op waits for the
// previous one, so small ops include a launch and a sync each).
void print_profile(SyntheticModel& m) {
  std::map<std::string, double> prof;
  m.forward(&prof);
  double total = 0.0;
  for (const auto& [k, v] : prof) total += v;
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [k, v] : prof) order.emplace_back(v, k);
  std::sort(order.rbegin(), order.rend());
  std::printf("    per op (synchronised after each op, %.2f ms in all):", total * 1e3);
  for (const auto& [v, k] : order) std::printf("  %s %.2f ms (%.0f%%);", k.c_str(), v * 1e3, 100.0 * v / total);
  std::printf("\n");
}

// `record` captured once in a CUDA graph, then the median time of a replay
// (two warm-up replays first).
template <typename F>
double median_replay_s(Backend& be, F&& record, int iters) {
  auto g = cuda_capture_graph(be, record);
  std::vector<double> ts;
  for (int i = 0; i < iters + 2; ++i) {
    be.synchronize();
    const double t0 = now_s();
    g->replay();
    be.synchronize();
    if (i >= 2) ts.push_back(now_s() - t0);
  }
  return median(ts);
}

// Distinct experts that T tokens of an even routing (k of E each) touch.
double distinct_experts(double E, double k, int64_t T) {
  return E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(T)));
}

// Median over iterations: forward alone (synchronised), and forward + GPU
// greedy sampling + token readback (a whole step as the runner would run it).
Timing time_steps(Backend& be, SyntheticModel& m, DeviceSampler& sampler, int iters) {
  std::vector<DeviceSamplingRow> rows(static_cast<size_t>(m.planned_seqs()));
  for (auto& r : rows) r.temperature = 0.0f;
  std::vector<double> fwd, step;
  for (int i = 0; i < iters + 2; ++i) {
    be.synchronize();
    const double t0 = now_s();
    m.forward();
    be.synchronize();
    const double t1 = now_s();
    if (i >= 2) fwd.push_back(t1 - t0);
  }
  for (int i = 0; i < iters; ++i) {
    be.synchronize();
    const double t0 = now_s();
    m.forward();
    sampler.sample(m.logits(), rows);
    step.push_back(now_s() - t0);
  }
  // The same forward captured once in a CUDA graph and replayed: no launch gaps.
  return {median(fwd), median(step), median_replay_s(be, [&] { m.forward(); }, iters)};
}

std::vector<int64_t> parse_list(const std::string& v) {
  std::vector<int64_t> out;
  for (size_t p = 0; p < v.size();) {
    size_t q = v.find(',', p);
    out.push_back(std::stoll(v.substr(p, q - p)));
    p = q == std::string::npos ? v.size() : q + 1;
  }
  return out;
}

// max / mean tokens per expert over all layers (1 = even), from counts
// summed over layers.
double load_spread(const std::vector<int32_t>& load) {
  if (load.empty()) return 0.0;
  double sum = 0.0, mx = 0.0;
  for (int32_t n : load) {
    sum += n;
    mx = std::max(mx, static_cast<double>(n));
  }
  return sum > 0 ? mx / (sum / static_cast<double>(load.size())) : 0.0;
}

// The MoE blocks of all layers alone, replayed from a graph: per-layer time,
// the expert bytes an even routing must read (distinct experts + the shared
// one, plus the router), and the GEMM FLOPs.
void time_moe(Backend& be, SyntheticModel& m, const ModelConfig& cfg, const std::vector<int64_t>& tokens, int iters) {
  std::printf("\nMoE blocks alone (%lld layers from one graph; bytes: distinct experts of an even routing + shared + "
              "router):\n%-10s %12s %12s %10s %10s %10s\n",
              static_cast<long long>(cfg.num_hidden_layers), "tokens", "us/layer", "floor us", "TB/s", "TFLOP/s",
              "max/mean");
  const double E = static_cast<double>(cfg.num_experts), k = static_cast<double>(cfg.num_experts_per_tok);
  const double expert_bytes = static_cast<double>(m.expert_bytes_per_layer_expert());
  for (int64_t T : tokens) {
    if (T > m.max_tokens()) continue;
    m.count_expert_load(true);
    m.moe_layers(T);
    be.synchronize();
    const double spread = load_spread(m.take_expert_load());
    m.count_expert_load(false);
    const double per_layer =
        median_replay_s(be, [&] { m.moe_layers(T); }, iters) / static_cast<double>(cfg.num_hidden_layers);
    const double distinct = distinct_experts(E, k, T);
    const double bytes = (distinct + 1.0) * expert_bytes + (E + 1.0) * cfg.hidden_size * 2.0;
    const double flops = 2.0 * static_cast<double>(T) * (k + 1.0) * expert_bytes / 2.0;
    std::printf("%-10lld %12.2f %12.2f %10.2f %10.1f %10.2f\n", static_cast<long long>(T), per_layer * 1e6,
                bytes / kCopyBandwidth * 1e6, bytes / per_layer / 1e12, flops / per_layer / 1e12, spread);
  }
}

// The small regime over all layers' distinct expert weights, so that they
// stream from memory, not L2: per-layer time of route + up + down, and the
// bytes of the experts an even routing reads (distinct routed experts + the
// shared one) per second.
void time_moe_stream(Backend& be, SyntheticModel& m, const ModelConfig& cfg, const std::vector<int64_t>& tokens,
                     int iters) {
  std::printf("\nMoE small regime streaming its experts (route + up + down, %lld layers from one graph; expert "
              "bytes: distinct routed experts of an even routing + shared):\n%6s %10s %10s %12s %8s\n",
              static_cast<long long>(cfg.num_hidden_layers), "T", "us/layer", "expert MB", "GB/s", "% copy");
  const double E = static_cast<double>(cfg.num_experts), k = static_cast<double>(cfg.num_experts_per_tok);
  const double expert_bytes = static_cast<double>(m.expert_bytes_per_layer_expert());
  for (int64_t T : tokens) {
    if (T > 32 || T > m.max_tokens()) continue;
    m.moe_layers(T);  // warm-up: sizes the scratch before the capture
    be.synchronize();
    const double per_layer =
        median_replay_s(be, [&] { m.moe_layers(T); }, iters) / static_cast<double>(cfg.num_hidden_layers);
    const double bytes = (distinct_experts(E, k, T) + 1.0) * expert_bytes;
    std::printf("%6lld %10.2f %10.1f %12.0f %7.1f%%\n", static_cast<long long>(T), per_layer * 1e6, bytes / 1e6,
                bytes / per_layer / 1e9, 100.0 * bytes / per_layer / kCopyBandwidth);
  }
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_cuda_step CONFIG_DIR [--prefill N] [--context N] [--batches 1,8,32] [--iters N]\n");
    return 2;
  }
  const std::string dir = argv[1];
  int64_t prefill = 1024, context = 1024;
  int iters = 20;
  float router_skew = 0.0f;
  std::vector<int64_t> batches{1, 8, 32}, moe_tokens{1, 8, 32, 64, 256, 1024, 4096, 8192};
  bool moe_only = false, moe_stream = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--prefill") prefill = std::stoll(v);
    if (a == "--context") context = std::stoll(v);
    if (a == "--iters") iters = std::stoi(v);
    if (a == "--router-skew") router_skew = std::stof(v);
    if (a == "--batches") batches = parse_list(v);
    if (a == "--moe-tokens") moe_tokens = parse_list(v);
    if (a == "--moe-stream") moe_stream = v != "0";
    if (a == "--moe-only") moe_only = v != "0";
  }
  const ModelConfig cfg = load_model_config(dir);
  auto be = make_cuda_backend(0);
  const int64_t max_b = *std::max_element(batches.begin(), batches.end());
  int64_t max_tokens = std::max(prefill, max_b);
  if (cfg.is_moe && !moe_tokens.empty()) max_tokens = std::max(max_tokens, *std::max_element(moe_tokens.begin(), moe_tokens.end()));
  SyntheticModel m(*be, cfg, std::max<int64_t>(max_b, 1), max_tokens, std::max(prefill, context + 1), router_skew);
  auto sampler = make_cuda_sampler(*be);
  const double weights_gb = (m.linear_weight_bytes() + m.lm_head_bytes()) / 1e9;
  std::printf("# %s on %s: %lld layers, linear+lm_head weights %.2f GB (bf16)%s%s\n", dir.c_str(),
              be->name().c_str(), static_cast<long long>(cfg.num_hidden_layers), weights_gb,
              cfg.is_moe ? " + experts" : "",
              router_skew > 0 ? (", router skew " + std::to_string(router_skew)).c_str() : "");
  std::printf("fwd: one forward, launched op by op; step: fwd + GPU sampling + token readback; graph: the fwd\n"
              "replayed from a CUDA graph. tok/s and %%floor use step and graph time respectively.\n");
  std::printf("%-26s %9s %9s %9s %10s %10s %8s\n", "scenario", "fwd ms", "step ms", "graph ms", "tok/s", "floor ms",
              "%floor");

  // Prefill: one prompt, fresh sequence.
  if (!moe_only) {
    m.plan({{static_cast<int32_t>(prefill)}, {0}});
    const Timing t = time_steps(*be, m, *sampler, std::max(3, iters / 4));
    const double T = static_cast<double>(prefill);
    const double flops = 2.0 * m.linear_params_active_per_token() * T +
                         2.0 * T * T * cfg.num_attention_heads * cfg.head_dim * cfg.num_full_attention_layers() +
                         2.0 * cfg.hidden_size * cfg.vocab_size;
    double bytes = static_cast<double>(m.linear_weight_bytes() + m.lm_head_bytes());
    if (cfg.is_moe) bytes += static_cast<double>(cfg.num_hidden_layers) * cfg.num_experts * m.expert_bytes_per_layer_expert();
    const double floor_s = std::max(flops / kBf16Peak, bytes / kCopyBandwidth);
    std::printf("%-26s %9.2f %9.2f %9.2f %10.0f %10.2f %7.1f%%   (%.1f TFLOP/s, floor %s-bound)\n",
                ("prefill " + std::to_string(prefill)).c_str(), t.forward_s * 1e3, t.step_s * 1e3, t.graph_s * 1e3,
                T / t.step_s, floor_s * 1e3, 100.0 * floor_s / t.graph_s, flops / t.graph_s / 1e12,
                flops / kBf16Peak > bytes / kCopyBandwidth ? "compute" : "bandwidth");
    print_profile(m);
  }
  for (int64_t B : moe_only ? std::vector<int64_t>{} : batches) {
    StepShape s;
    s.new_tokens.assign(static_cast<size_t>(B), 1);
    s.context.assign(static_cast<size_t>(B), static_cast<int32_t>(context));
    m.plan(s);
    const Timing t = time_steps(*be, m, *sampler, iters);
    double bytes = static_cast<double>(m.linear_weight_bytes() + m.lm_head_bytes());
    if (cfg.is_moe) {
      const double E = static_cast<double>(cfg.num_experts), k = static_cast<double>(cfg.num_experts_per_tok);
      const double distinct = distinct_experts(E, k, B);
      bytes += cfg.num_hidden_layers * distinct * m.expert_bytes_per_layer_expert();
    }
    bytes += static_cast<double>(B) * (2.0 * m.gdn_state_bytes_per_seq() + m.kv_bytes_per_token() * (context + 1));
    const double floor_s = bytes / kCopyBandwidth;
    std::printf("%-26s %9.2f %9.2f %9.2f %10.0f %10.2f %7.1f%%   (%.2f TB/s effective)\n",
                ("decode b" + std::to_string(B) + " ctx " + std::to_string(context)).c_str(), t.forward_s * 1e3,
                t.step_s * 1e3, t.graph_s * 1e3, B / t.step_s, floor_s * 1e3, 100.0 * floor_s / t.graph_s,
                bytes / t.graph_s / 1e12);
    print_profile(m);
  }
  if (cfg.is_moe) time_moe(*be, m, cfg, moe_tokens, iters);
  if (cfg.is_moe && moe_stream) time_moe_stream(*be, m, cfg, moe_tokens, iters);
  return 0;
}

}  // namespace
}  // namespace hyllm::bench

// A crash prints where it happened (the bench runs unattended on the GPU machine).
void on_fatal_signal(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  std::fprintf(stderr, "bench_cuda_step: signal %d, backtrace:\n", sig);
  backtrace_symbols_fd(frames, n, 2);
  std::_Exit(128 + sig);
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::signal(SIGSEGV, on_fatal_signal);
  std::signal(SIGABRT, on_fatal_signal);
  try {
    return hyllm::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_step: %s\n", e.what());
    return 1;
  }
}
