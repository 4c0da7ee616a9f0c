// hyllm bench serve | sweep | compare | pin: the serving benchmark client
// with `vllm bench serve`'s flags and result keys, and the A/B harness.

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "bench/compare.h"
#include "bench/roofline.h"
#include "bench/serve_benchmark.h"
#include "bench/svg_plot.h"
#include "bench/tokenizer_adapter.h"
#include "bench_offline.h"
#include "build_commit.h"
#include "command.h"
#include "util/status.h"
#include "util/text_file.h"

namespace hyllm::app {
namespace {

namespace fs = std::filesystem;
using namespace hyllm::bench;

struct ServeFlags {
  std::string base_url, host = "127.0.0.1", endpoint = "/v1/completions", backend = "openai";
  int port = 8000;
  std::string model, tokenizer, dataset_name = "random", api_key, label;
  int input_len = 1024, output_len = 128, prefix_len = 0, num_prompts = 1000, num_warmups = 0;
  PrefixRepetitionOptions prefix_repetition;
  MultiTurnOptions multi_turn;
  double range_ratio = 0.0, burstiness = 1.0, ready_timeout = 0.0;
  std::string request_rate = "inf";
  std::optional<int> max_concurrency;
  std::optional<double> temperature;
  bool ignore_eos = false, save_result = false;
  uint64_t seed = 0;
  std::string percentile_metrics = "ttft,tpot,itl", metric_percentiles = "99";
  std::vector<std::string> goodput;
  std::string result_dir, result_filename;
};

void add_serve_flags(CLI::App& sub, ServeFlags& f) {
  sub.add_option("--base-url", f.base_url, "Server base URL (default http://HOST:PORT)");
  sub.add_option("--host", f.host, "Server host")->capture_default_str();
  sub.add_option("--port", f.port, "Server port")->capture_default_str();
  sub.add_option("--endpoint", f.endpoint, "API endpoint")->capture_default_str();
  sub.add_option("--backend", f.backend, "openai (completions), openai-chat or vllm")->capture_default_str();
  sub.add_option("--model", f.model, "Model name; default: the first of /v1/models");
  sub.add_option("--tokenizer", f.tokenizer, "Model directory whose tokenizer builds the prompts (default: --model when it is a directory)");
  sub.add_option("--dataset-name", f.dataset_name, "random, prefix_repetition or multi_turn")->capture_default_str();
  sub.add_option("--random-input-len", f.input_len)->capture_default_str();
  sub.add_option("--random-output-len", f.output_len)->capture_default_str();
  sub.add_option("--random-range-ratio", f.range_ratio)->capture_default_str();
  sub.add_option("--random-prefix-len", f.prefix_len)->capture_default_str();
  sub.add_option("--prefix-repetition-prefix-len", f.prefix_repetition.prefix_len)->capture_default_str();
  sub.add_option("--prefix-repetition-suffix-len", f.prefix_repetition.suffix_len)->capture_default_str();
  sub.add_option("--prefix-repetition-num-prefixes", f.prefix_repetition.num_prefixes)->capture_default_str();
  sub.add_option("--prefix-repetition-output-len", f.prefix_repetition.output_len)->capture_default_str();
  sub.add_option("--multi-turn-num-turns", f.multi_turn.num_turns, "Turns per conversation (--num-prompts conversations)")
      ->capture_default_str();
  sub.add_option("--multi-turn-prefix-len", f.multi_turn.prefix_len, "A system prompt every conversation shares")
      ->capture_default_str();
  sub.add_option("--multi-turn-input-len", f.multi_turn.input_len, "Tokens of each new user message")
      ->capture_default_str();
  sub.add_option("--multi-turn-output-len", f.multi_turn.output_len)->capture_default_str();
  sub.add_option("--num-prompts", f.num_prompts)->capture_default_str();
  sub.add_option("--max-concurrency", f.max_concurrency, "Requests in flight at most (closed loop)");
  sub.add_option("--request-rate", f.request_rate, "Requests per second, or inf")->capture_default_str();
  sub.add_option("--burstiness", f.burstiness, "1 = Poisson; other values: gamma arrivals")->capture_default_str();
  sub.add_option("--num-warmups", f.num_warmups)->capture_default_str();
  sub.add_flag("--ignore-eos", f.ignore_eos);
  sub.add_option("--temperature", f.temperature, "Sampling temperature sent with each request");
  sub.add_option("--seed", f.seed)->capture_default_str();
  sub.add_option("--percentile-metrics", f.percentile_metrics)->capture_default_str();
  sub.add_option("--metric-percentiles", f.metric_percentiles)->capture_default_str();
  sub.add_option("--goodput", f.goodput, "SLOs as KEY:MS pairs (ttft, tpot, e2el)");
  sub.add_option("--ready-check-timeout-sec", f.ready_timeout, "Wait this long for a first successful request")->capture_default_str();
  sub.add_option("--api-key", f.api_key, "Bearer key for the server");
  sub.add_option("--label", f.label);
  sub.add_flag("--save-result", f.save_result, "Write the JSON result");
  sub.add_option("--result-dir", f.result_dir);
  sub.add_option("--result-filename", f.result_filename);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

double parse_rate(const std::string& s) {
  if (s == "inf") return std::numeric_limits<double>::infinity();
  try {
    return std::stod(s);
  } catch (...) {
    fail(ErrorCode::kInvalidArgument, "--request-rate must be a number or inf, not '{}'", s);
  }
}

ServeBenchOptions to_options(const ServeFlags& f) {
  if (f.dataset_name != "random" && f.dataset_name != "prefix_repetition" && f.dataset_name != "multi_turn")
    fail(ErrorCode::kUnsupported, "--dataset-name {}: one of random, prefix_repetition, multi_turn", f.dataset_name);
  ServeBenchOptions o;
  o.dataset_name = f.dataset_name;
  o.prefix_repetition = f.prefix_repetition;
  o.prefix_repetition.num_prompts = f.num_prompts;
  o.prefix_repetition.seed = f.seed;
  o.multi_turn = f.multi_turn;
  o.multi_turn.num_conversations = f.num_prompts;
  o.multi_turn.seed = f.seed;
  o.endpoint.base_url = f.base_url.empty() ? fmt::format("http://{}:{}", f.host, f.port) : f.base_url;
  o.endpoint.path = f.endpoint;
  if (f.backend == "openai-chat") {
    o.endpoint.kind = EndpointKind::kChat;
    if (f.endpoint == "/v1/completions") o.endpoint.path = "/v1/chat/completions";
  } else if (f.backend != "openai" && f.backend != "vllm") {
    fail(ErrorCode::kInvalidArgument, "--backend {}: one of openai, openai-chat, vllm", f.backend);
  }
  o.endpoint.api_key = f.api_key;
  o.model = f.model;
  o.tokenizer_id = f.tokenizer.empty() ? f.model : f.tokenizer;
  o.dataset = {f.num_prompts, f.input_len, f.output_len, f.range_ratio, f.prefix_len, f.seed};
  o.load.request_rate = parse_rate(f.request_rate);
  o.load.burstiness = f.burstiness;
  o.load.max_concurrency = f.max_concurrency;
  o.load.seed = f.seed;
  o.num_warmups = f.num_warmups;
  o.ignore_eos = f.ignore_eos;
  o.temperature = f.temperature;
  o.percentile_metrics = split(f.percentile_metrics, ',');
  o.percentiles.clear();
  for (const auto& p : split(f.metric_percentiles, ',')) o.percentiles.push_back(std::stod(p));
  o.goodput = parse_goodput(f.goodput);
  o.ready_check_timeout_s = f.ready_timeout;
  o.label = f.label;
  return o;
}

std::unique_ptr<PromptTokenizer> open_tokenizer(const ServeFlags& f) {
  std::string dir = !f.tokenizer.empty() ? f.tokenizer : f.model;
  if (dir.empty() || !fs::is_directory(dir))
    fail(ErrorCode::kInvalidArgument,
         "the datasets need the model's tokenizer: pass --tokenizer MODEL_DIR (or --model MODEL_DIR)");
  return std::make_unique<ModelDirTokenizer>(dir);
}

void save_json(const nlohmann::json& j, const fs::path& path) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  write_text_file(path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  std::cout << "Saved result to " << path.string() << "\n";
}

fs::path result_path(const ServeFlags& f, const ServeBenchOptions& o, const std::string& model) {
  if (!f.result_filename.empty()) return fs::path(f.result_dir) / f.result_filename;
  std::time_t t = std::time(nullptr);
  char dt[32];
  std::strftime(dt, sizeof dt, "%Y%m%d-%H%M%S", std::localtime(&t));
  std::string name = fmt::format("{}-{}qps{}-{}-{}.json", f.label.empty() ? f.backend : f.label, f.request_rate,
                                 o.load.max_concurrency ? fmt::format("-concurrency{}", *o.load.max_concurrency) : "",
                                 fs::path(model).filename().string(), dt);
  return fs::path(f.result_dir) / name;
}

void setup_bench(CLI::App& bench, int& exit_code) {
  bench.require_subcommand(1);

  static ServeFlags serve_flags;
  CLI::App* serve = bench.add_subcommand("serve", "Benchmark a running OpenAI-compatible server like `vllm bench serve`");
  add_serve_flags(*serve, serve_flags);
  serve->callback([&exit_code] {
    auto tok = open_tokenizer(serve_flags);
    ServeBenchOptions o = to_options(serve_flags);
    ServeBenchResult r = run_serve_benchmark(o, *tok, std::cout);
    if (serve_flags.save_result) save_json(r.json, result_path(serve_flags, o, r.json["model_id"]));
    exit_code = r.metrics.completed > 0 ? 0 : 1;
  });

  static ServeFlags sweep_flags;
  static std::string sweep_levels = "1,2,4,8,16,32", plot_path = "sweep.svg";
  CLI::App* sweep = bench.add_subcommand("sweep", "Run `bench serve` over a concurrency grid and plot throughput against latency");
  add_serve_flags(*sweep, sweep_flags);
  sweep->add_option("--concurrency", sweep_levels, "Comma-separated concurrency levels")->capture_default_str();
  sweep->add_option("--plot", plot_path, "SVG file for the throughput-latency plot")->capture_default_str();
  sweep->callback([&exit_code] {
    auto tok = open_tokenizer(sweep_flags);
    PlotSeries s{"output throughput", {}};
    nlohmann::json all = nlohmann::json::array();
    for (const auto& lv : split(sweep_levels, ',')) {
      ServeFlags f = sweep_flags;
      f.max_concurrency = std::stoi(lv);
      ServeBenchOptions o = to_options(f);
      ServeBenchResult r = run_serve_benchmark(o, *tok, std::cout);
      s.points.push_back({r.metrics.tpot.median_ms, r.metrics.output_throughput, "c=" + lv});
      all.push_back(r.json);
      if (f.save_result) save_json(r.json, result_path(f, o, r.json["model_id"]));
    }
    PlotSpec spec{"Output throughput vs latency", "median TPOT (ms)", "output tokens/s", {s}};
    write_text_file(plot_path, render_svg(spec));
    std::cout << "Wrote " << plot_path << "\n";
    exit_code = 0;
  });

  static std::string peer_path = "bench/peers/vllm.json", cmp_model, cmp_tokenizer, out_dir = "bench-results",
                     gpu_name = "unknown GPU", markdown;
  static std::vector<std::string> cmp_set;
  static double bandwidth_gbs = 4280;
  CLI::App* compare = bench.add_subcommand("compare", "Interleaved A/B comparison of hyllm and a peer server from a peer file");
  compare->add_option("--peer", peer_path, "Peer file")->capture_default_str();
  compare->add_option("--model", cmp_model, "Model directory given to both arms")->required();
  compare->add_option("--tokenizer", cmp_tokenizer, "Tokenizer directory (default: --model)");
  compare->add_option("--out-dir", out_dir)->capture_default_str();
  compare->add_option("--gpu-name", gpu_name)->capture_default_str();
  compare->add_option("--bandwidth-gbs", bandwidth_gbs, "Measured device bandwidth for the floors")->capture_default_str();
  compare->add_option("--append-markdown", markdown, "Append the summary to this file (e.g. docs/BENCHMARKS.md)");
  compare->add_option("--set", cmp_set,
                      "KEY=VALUE: a launch placeholder for both arms, e.g. gguf=/dev/shm/m.gguf "
                      "(overrides the peer file's \"matched\" value of KEY)");
  compare->callback([&exit_code] {
    CompareOptions o;
    o.peer_file = load_peer_file(peer_path);
    o.model = cmp_model;
    o.placeholders["tokenizer"] = cmp_tokenizer.empty() ? cmp_model : cmp_tokenizer;
    for (const auto& kv : cmp_set) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) fail(ErrorCode::kInvalidArgument, "--set {}: expected KEY=VALUE", kv);
      o.placeholders[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (fs::exists(fs::path(cmp_model) / "config.json")) o.model_config = load_model_config(cmp_model);
    o.out_dir = out_dir;
    o.gpu.bandwidth_bytes_per_s = bandwidth_gbs * 1e9;
    o.gpu_name = gpu_name;
    o.hyllm_binary = fs::canonical("/proc/self/exe").string();
    o.ours_commit = kBuildCommit;
    o.command_line = "hyllm bench compare --peer " + peer_path + " --model " + cmp_model;
    for (const auto& kv : cmp_set) o.command_line += " --set " + kv;
    if (!markdown.empty()) o.markdown_path = markdown;
    ModelDirTokenizer tok(cmp_tokenizer.empty() ? cmp_model : cmp_tokenizer);
    run_compare(o, tok, std::cout);
    exit_code = 0;
  });

  static std::string pin_file = "bench/peers/vllm.json", pin_field = "peer.version", pin_value, pin_reason;
  CLI::App* pin = bench.add_subcommand("pin", "Change a pinned value of a peer file, recording old and new values");
  pin->add_option("--peer", pin_file)->capture_default_str();
  pin->add_option("--field", pin_field, "Dotted path, e.g. peer.version")->capture_default_str();
  pin->add_option("--value", pin_value)->required();
  pin->add_option("--reason", pin_reason, "Why the pin changes (recorded)")->required();
  pin->callback([&exit_code] {
    pin_peer_file(pin_file, pin_field, pin_value, pin_reason);
    std::cout << "Pinned " << pin_field << " = " << pin_value << " in " << pin_file << "\n";
    exit_code = 0;
  });

  static std::string floors_model;
  static int floors_batch = 1, floors_input = 1024, floors_output = 128;
  static double floors_bandwidth_gbs = 4280, floors_bf16_tflops = 790;
  CLI::App* floors = bench.add_subcommand(
      "floors", "Physical floors of a model config on one GPU: prefill and decode-step milliseconds (roofline.h)");
  floors->add_option("--model", floors_model, "Model directory (its config.json)")->required();
  floors->add_option("--batch", floors_batch, "Sequences per decode step")->capture_default_str();
  floors->add_option("--random-input-len", floors_input, "Prompt tokens")->capture_default_str();
  floors->add_option("--random-output-len", floors_output, "Output tokens (the decode context is input + output / 2)")
      ->capture_default_str();
  floors->add_option("--bandwidth-gbs", floors_bandwidth_gbs, "Measured device bandwidth")->capture_default_str();
  floors->add_option("--bf16-tflops", floors_bf16_tflops, "Measured BF16 GEMM rate")->capture_default_str();
  floors->callback([&exit_code] {
    GpuCeilings gpu;
    gpu.bandwidth_bytes_per_s = floors_bandwidth_gbs * 1e9;
    gpu.bf16_flops = floors_bf16_tflops * 1e12;
    const Floors f = compute_floors(load_model_config(floors_model), gpu, floors_batch, floors_input, floors_output);
    std::cout << fmt::format("prefill_ms {:.3f}\ndecode_step_ms {:.3f}\noutput_tok_per_s {:.1f}\n", f.prefill_s * 1e3,
                             f.decode_step_s * 1e3, f.output_tok_per_s);
    exit_code = 0;
  });

  add_offline_bench_commands(bench, exit_code);
}

const CommandRegistration kBench{"bench", "Benchmarks: serve, sweep, compare, pin (servers); throughput, latency (in process); floors", setup_bench};

}  // namespace
}  // namespace hyllm::app
