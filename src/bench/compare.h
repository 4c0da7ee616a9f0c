#pragma once
// `hyllm bench compare`: interleaved A/B legs of two servers over a
// concurrency grid, as a sceptical peer would accept it (BENCHMARKING.md 2.7,
// LESSONS.md 6-11): both arms from one peer file; a fresh server per leg; the
// arms alternate order every repetition; each leg records the server's
// identity (GET /version and its "non-default args" startup line) and stops
// the run on drift from the pin; results are absolute numbers, percent of the
// physical floor, paired ratios with min and max, and a verdict inside a tie
// band.

#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/peer_file.h"
#include "bench/random_dataset.h"
#include "bench/roofline.h"

namespace hyllm::bench {

struct CompareOptions {
  PeerFile peer_file;
  std::string model;                 // passed to both arms as {model}
  std::optional<ModelConfig> model_config;  // for the floors; none = no floors
  std::filesystem::path out_dir;     // logs and per-leg results
  GpuCeilings gpu;
  std::string gpu_name = "unknown GPU";
  std::string hyllm_binary;          // {hyllm}
  // Further launch placeholders for both arms, e.g. {tokenizer}, or
  // {gguf} and {llama_server} for the llama.cpp peer; they win over "matched".
  std::map<std::string, std::string> placeholders;
  std::string ours_commit = "unknown";
  std::string command_line;
  std::optional<std::filesystem::path> markdown_path;  // appended when set
};

// The identity a leg reports; throws hyllm::Error(kInvalidArgument) naming the
// difference when it drifts from `arm`'s pins.
struct ArmIdentity {
  std::string version;
  std::string non_default_args;  // the startup line, verbatim
};
ArmIdentity check_identity(const ArmSpec& arm, const std::string& reported_version, const std::string& startup_log);

// The version at arm.version_field of the arm's info document (GET
// arm.version_path; empty when absent), after checking every
// arm.expected_info value in it; throws hyllm::Error(kInvalidArgument)
// naming the first difference.
std::string check_server_info(const ArmSpec& arm, const PeerFile& pf, const nlohmann::json& info);

// Paired-ratio summary of one metric at one concurrency.
struct RatioSummary {
  double median = 0, min = 0, max = 0;
  std::string verdict;  // "hyllm", "peer" or "tie"
};
// ratios are oriented so that > 1 means ours is better.
RatioSummary summarize_ratios(const std::vector<double>& ratios, double tie_band);

struct CompareReport {
  nlohmann::json json;
  std::string markdown;
};

CompareReport run_compare(const CompareOptions& opt, const PromptTokenizer& tokenizer, std::ostream& log);

}  // namespace hyllm::bench
