#include "bench/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <fstream>

#include "bench/serve_benchmark.h"
#include "bench/server_process.h"
#include "bench/stats.h"
#include "util/status.h"
#include "util/text_file.h"

namespace hyllm::bench {

ArmIdentity check_identity(const ArmSpec& arm, const std::string& reported_version, const std::string& startup_log) {
  ArmIdentity id;
  id.version = reported_version;
  if (!arm.version.empty() && reported_version != arm.version)
    fail(ErrorCode::kInvalidArgument,
         "{} reports version '{}' but the peer file pins '{}': refusing to run on drift "
         "(change the pin deliberately with `hyllm bench pin`)",
         arm.name, reported_version, arm.version);
  auto pos = startup_log.find("non-default args:");
  if (pos != std::string::npos) {
    auto end = startup_log.find('\n', pos);
    id.non_default_args = startup_log.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  }
  for (const auto& [key, value] : arm.expected_args) {
    if (id.non_default_args.empty())
      fail(ErrorCode::kInvalidArgument, "{} printed no 'non-default args:' line, so its configuration cannot be verified",
           arm.name);
    std::string want = fmt::format("'{}': {}", key, value);
    if (id.non_default_args.find(want) == std::string::npos)
      fail(ErrorCode::kInvalidArgument, "{} did not run with {} (pinned in the peer file); its startup line: {}",
           arm.name, want, id.non_default_args);
  }
  return id;
}

namespace {

const nlohmann::json* at_dotted(const nlohmann::json& doc, const std::string& path) {
  const nlohmann::json* cur = &doc;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(key)) return nullptr;
    cur = &(*cur)[key];
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string unquoted(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

std::string check_server_info(const ArmSpec& arm, const PeerFile& pf, const nlohmann::json& info) {
  for (const auto& [path, want_template] : arm.expected_info) {
    const std::string want = expand_placeholders(want_template, pf, {}, arm.name + " expected_info");
    const nlohmann::json* got = at_dotted(info, path);
    if (!got)
      fail(ErrorCode::kInvalidArgument, "{} reports no \"{}\" on GET {}, so its configuration cannot be verified",
           arm.name, path, arm.version_path);
    if (unquoted(*got) != want)
      fail(ErrorCode::kInvalidArgument, "{} runs with {} = {} but the peer file pins {}", arm.name, path,
           unquoted(*got), want);
  }
  const nlohmann::json* v = at_dotted(info, arm.version_field);
  return v && v->is_string() ? v->get<std::string>() : "";
}

RatioSummary summarize_ratios(const std::vector<double>& ratios, double tie_band) {
  RatioSummary s;
  if (ratios.empty()) {
    s.verdict = "n/a";
    return s;
  }
  s.median = median(ratios);
  s.min = *std::min_element(ratios.begin(), ratios.end());
  s.max = *std::max_element(ratios.begin(), ratios.end());
  s.verdict = s.median > 1.0 + tie_band ? "hyllm" : s.median < 1.0 - tie_band ? "peer" : "tie";
  return s;
}

namespace {

struct MetricSpec {
  const char* key;
  bool higher_is_better;
};
constexpr MetricSpec kCompared[] = {
    {"output_throughput", true}, {"total_token_throughput", true}, {"median_ttft_ms", false},
    {"p99_ttft_ms", false},      {"median_tpot_ms", false},        {"p99_tpot_ms", false},
    {"median_itl_ms", false},    {"median_e2el_ms", false},
};

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// One benchmark run inside a leg: a concurrency of the grid, or the
// all-at-once workload (keyed "<N>_at_once").
struct LegRun {
  std::string key;
  int concurrency;
  int num_prompts;
  int warmups;
};

std::vector<LegRun> leg_runs(const CompareWorkload& w) {
  std::vector<LegRun> runs;
  for (int c : w.concurrency)
    runs.push_back({std::to_string(c), c, std::max(w.min_prompts, c * w.prompts_per_concurrency), c});
  if (w.all_at_once_prompts > 0) {
    const int n = w.all_at_once_prompts;
    const int widest = w.concurrency.empty() ? 1 : *std::max_element(w.concurrency.begin(), w.concurrency.end());
    runs.push_back({std::to_string(n) + "_at_once", n, n, widest});
  }
  return runs;
}

// One leg: a fresh server of one arm, every run of the workload.
nlohmann::json run_leg(const CompareOptions& opt, const ArmSpec& arm, int rep, const PromptTokenizer& tok,
                       std::ostream& log) {
  const auto& w = opt.peer_file.workload;
  const int port = find_free_port();
  const std::string base = fmt::format("http://127.0.0.1:{}", port);
  std::map<std::string, std::string> values = opt.placeholders;
  values["model"] = opt.model;
  values["port"] = std::to_string(port);
  values["hyllm"] = opt.hyllm_binary;
  auto argv = expand_launch(arm, opt.peer_file, values);
  auto log_path = opt.out_dir / fmt::format("{}-rep{}.log", arm.name, rep);
  log << fmt::format("[rep {}] {}: {}\n", rep, arm.name, fmt::join(argv, " "));
  ServerProcess server(argv, arm.env, log_path);
  server.wait_until_healthy(base, w.startup_timeout_s);

  Endpoint ep{base};
  const nlohmann::json info = get_json(ep, arm.version_path);
  ArmIdentity id = check_identity(arm, check_server_info(arm, opt.peer_file, info), server.log_text());

  nlohmann::json leg = {{"arm", arm.name}, {"rep", rep}, {"version", id.version},
                        {"non_default_args", id.non_default_args}, {"argv", argv}};
  for (const auto& entry : arm.expected_info)
    if (const nlohmann::json* got = at_dotted(info, entry.first)) leg["server_info"][entry.first] = *got;
  bool first = true;
  for (const LegRun& run : leg_runs(w)) {
    const int c = run.concurrency;
    ServeBenchOptions sb;
    sb.endpoint = ep;
    sb.dataset.num_prompts = run.num_prompts;
    sb.dataset.input_len = w.input_len;
    sb.dataset.output_len = w.output_len;
    sb.dataset.seed = static_cast<uint64_t>(c);  // same prompts for both arms
    sb.load.max_concurrency = c;
    sb.num_warmups = run.warmups;
    sb.ignore_eos = w.ignore_eos;
    sb.temperature = w.temperature;
    sb.percentiles = {50, 90, 99};
    sb.percentile_metrics = {"ttft", "tpot", "itl", "e2el"};
    sb.ready_check_timeout_s = first ? 600.0 : 0.0;
    std::ostringstream sink;
    ServeBenchResult r = run_serve_benchmark(sb, tok, sink);
    if (first) {
      leg["startup_to_first_completion_s"] = now_s() - server.launch_time();
      first = false;
    }
    nlohmann::json summary;
    for (const auto& m : kCompared) summary[m.key] = r.json.value(m.key, 0.0);
    summary["completed"] = r.metrics.completed;
    summary["failed"] = r.metrics.failed;
    leg["by_concurrency"][run.key] = summary;
    write_text_file(opt.out_dir / fmt::format("{}-rep{}-c{}.json", arm.name, rep, run.key),
                    r.json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    log << fmt::format("[rep {}] {} c={}: {:.1f} output tok/s, median TPOT {:.2f} ms, failed {}\n", rep, arm.name, run.key,
                       r.metrics.output_throughput, r.metrics.tpot.median_ms, r.metrics.failed);
  }
  server.stop();
  return leg;
}

}  // namespace

CompareReport run_compare(const CompareOptions& opt, const PromptTokenizer& tok, std::ostream& log) {
  const PeerFile& pf = opt.peer_file;
  const auto& w = pf.workload;
  std::filesystem::create_directories(opt.out_dir);
  nlohmann::json legs = nlohmann::json::array();
  for (int rep = 0; rep < w.reps; ++rep) {
    // ABBA order: each arm goes first in half the repetitions.
    const ArmSpec* order[2] = {&pf.ours, &pf.peer};
    if (rep % 2 == 1) std::swap(order[0], order[1]);
    for (const ArmSpec* arm : order) legs.push_back(run_leg(opt, *arm, rep, tok, log));
  }

  CompareReport report;
  report.json = {{"date", today()}, {"gpu", opt.gpu_name}, {"model", opt.model}, {"ours_commit", opt.ours_commit},
                 {"peer", pf.peer.name}, {"peer_version", pf.peer.version}, {"command", opt.command_line},
                 {"tie_band", w.tie_band}, {"legs", legs}};
  std::string md = fmt::format("\n### {} vs {} {}: {} ({})\n\n", pf.ours.name, pf.peer.name, pf.peer.version, opt.model,
                               today());
  md += fmt::format("GPU: {}. {} commit: {}. Command: `{}`. Workload: {} in / {} out, {} reps, tie band ±{:.1f}%.\n\n",
                    opt.gpu_name, pf.ours.name, opt.ours_commit, opt.command_line, w.input_len, w.output_len, w.reps,
                    w.tie_band * 100);
  md += fmt::format("| c | metric | {} median [min, max] | {} median [min, max] | ratio (>1: {} better) | "
                    "% of floor ({}) | % of floor ({}) | verdict |\n|---|---|---|---|---|---|---|---|\n",
                    pf.ours.name, pf.peer.name, pf.ours.name, pf.ours.name, pf.peer.name);
  for (const LegRun& run : leg_runs(w)) {
    const std::string& ck = run.key;
    const int c = run.concurrency;
    std::optional<Floors> floors;
    // The all-at-once run batches at most the server's slots: no single floor.
    if (opt.model_config && run.key == std::to_string(c))
      floors = compute_floors(*opt.model_config, opt.gpu, c, w.input_len, w.output_len);
    for (const auto& m : kCompared) {
      std::vector<double> ours, peer, ratios;
      for (int rep = 0; rep < w.reps; ++rep) {
        double a = 0, b = 0;
        for (const auto& leg : legs) {
          if (leg["rep"] != rep) continue;
          double v = leg["by_concurrency"][ck][m.key].get<double>();
          (leg["arm"] == pf.ours.name ? a : b) = v;
        }
        ours.push_back(a);
        peer.push_back(b);
        if (a > 0 && b > 0) ratios.push_back(m.higher_is_better ? a / b : b / a);
      }
      RatioSummary s = summarize_ratios(ratios, w.tie_band);
      auto cell = [](const std::vector<double>& v) {
        return fmt::format("{:.2f} [{:.2f}, {:.2f}]", median(v), *std::min_element(v.begin(), v.end()),
                           *std::max_element(v.begin(), v.end()));
      };
      std::string fo = "-", fp = "-";
      if (floors && std::string(m.key) == "output_throughput") {
        fo = fmt::format("{:.1f}%", 100.0 * median(ours) / floors->output_tok_per_s);
        fp = fmt::format("{:.1f}%", 100.0 * median(peer) / floors->output_tok_per_s);
      } else if (floors && std::string(m.key) == "median_tpot_ms") {
        fo = fmt::format("{:.1f}%", 100.0 * floors->decode_step_s * 1e3 / median(ours));
        fp = fmt::format("{:.1f}%", 100.0 * floors->decode_step_s * 1e3 / median(peer));
      }
      md += fmt::format("| {} | {} | {} | {} | {:.3f} [{:.3f}, {:.3f}] | {} | {} | {} |\n",
                        run.key == std::to_string(c) ? ck : fmt::format("{} at once", c), m.key, cell(ours),
                        cell(peer), s.median, s.min, s.max, fo, fp, s.verdict);
      report.json["summary"][ck][m.key] = {{"ours_median", median(ours)}, {"peer_median", median(peer)},
                                           {"ratio_median", s.median}, {"ratio_min", s.min},
                                           {"ratio_max", s.max}, {"verdict", s.verdict}};
    }
  }
  report.markdown = md;
  write_text_file(opt.out_dir / "compare.json",
                  report.json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  if (opt.markdown_path) {
    std::ofstream out(*opt.markdown_path, std::ios::app);
    out << md;
    if (!out) fail(ErrorCode::kIo, "cannot append to {}", opt.markdown_path->string());
  }
  log << md;
  return report;
}

}  // namespace hyllm::bench
