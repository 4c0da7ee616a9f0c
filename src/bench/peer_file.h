#pragma once
// The one source of truth for a comparison with a peer server: both arms'
// launch commands, the peer's pinned version, the flags each arm must run
// with, the matched settings and the workload. Every bench entry point reads
// this file; nothing else restates it (a test checks). Changing a pin is an
// explicit `hyllm bench pin` that records the old and new values.
//
// Launch arguments may use placeholders filled per leg: {model} {port}
// {hyllm} (our binary) and every key of "matched" ({max_num_seqs}, ...).

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hyllm::bench {

struct ArmSpec {
  std::string name;                 // "hyllm", "vllm"
  std::vector<std::string> launch;  // argv template
  std::map<std::string, std::string> env;
  // The version the arm must report on GET /version; empty = record only.
  std::string version;
  // Settings that must appear in the arm's startup log line
  // "non-default args: {...}" with these values (Python repr), e.g.
  // {"language_model_only": "True", "enable_prefix_caching": "False"}.
  std::map<std::string, std::string> expected_args;
  // Where the arm reports its identity: GET version_path, the string at the
  // dotted path version_field ("/version" and "version" for vLLM and hyllm;
  // llama-server: "/props" and "build_info").
  std::string version_path = "/version";
  std::string version_field = "version";
  // Values the version_path document must hold, by dotted path, for servers
  // that print no "non-default args:" line (llama-server:
  // {"total_slots": "{max_num_seqs}"}). Values may use placeholders; strings
  // compare unquoted, other JSON values as compact JSON.
  std::map<std::string, std::string> expected_info;
};

struct CompareWorkload {
  int input_len = 1024;
  int output_len = 128;
  std::vector<int> concurrency{1, 2, 4, 8, 16, 32};
  int prompts_per_concurrency = 8;  // num_prompts = max(min_prompts, c * this)
  int min_prompts = 64;
  int reps = 5;
  double tie_band = 0.015;
  double temperature = 0.0;
  bool ignore_eos = true;
  double startup_timeout_s = 1800;
  // When > 0, each leg also sends this many prompts at once (no concurrency
  // limit: the server queues what it cannot batch), vLLM's published
  // throughput workload; reported as the row "<N> at once".
  int all_at_once_prompts = 0;
};

struct PeerFile {
  std::filesystem::path path;
  ArmSpec ours, peer;
  std::map<std::string, std::string> matched;
  CompareWorkload workload;
  nlohmann::ordered_json raw;  // key order kept so that pin updates rewrite only what changed
};

PeerFile load_peer_file(const std::filesystem::path& path);

// `text` with every placeholder replaced from leg_values, then "matched"; an
// unknown placeholder is an error naming it and `what`.
std::string expand_placeholders(const std::string& text, const PeerFile& pf,
                                const std::map<std::string, std::string>& leg_values, const std::string& what);

// argv for one leg with every placeholder replaced; an unknown placeholder
// is an error naming it.
std::vector<std::string> expand_launch(const ArmSpec& arm, const PeerFile& pf,
                                       const std::map<std::string, std::string>& leg_values);

// Sets peer.version (or another "arm.field" such as "peer.expected_args.X")
// to `value` and appends {date, field, old, new, reason} to "history".
void pin_peer_file(const std::filesystem::path& path, const std::string& field, const std::string& value,
                   const std::string& reason);

}  // namespace hyllm::bench
