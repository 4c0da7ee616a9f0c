#pragma once
// `hyllm serve` flags (and `hyllm run-batch`'s, all but the server's own):
// vLLM's names, defaults and meanings. Flags for features hyllm does not have
// yet are accepted by name so that vLLM command lines parse, and refused at
// startup with a message saying what is missing.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hyllm::app {

struct ServeArgs {
  std::string model_positional;
  std::string model;
  std::string tokenizer;
  bool skip_tokenizer_init = false;    // token ids in and out; no tokenizer files needed
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> served_model_name;
  std::string max_model_len;           // "32k" = 32000, "32K" = 32768; empty: from config.json
  std::optional<int> max_num_seqs;     // default by device
  std::optional<int> max_num_batched_tokens;
  double gpu_memory_utilization = 0.9;
  std::string kv_cache_memory;         // bytes, with optional k/K/m/M/g/G suffix
  std::optional<int> num_gpu_blocks_override;  // exactly this many KV blocks; the GDN slots take the rest
  std::optional<int> max_cudagraph_capture_size;  // the largest decode batch replayed from a graph
  std::string kv_cache_dtype = "auto";
  std::string mamba_cache_dtype = "auto";      // GDN conv state: bfloat16 only
  std::string mamba_ssm_cache_dtype = "auto";  // GDN recurrent state: float32 only
  std::string speculative_config;      // JSON, e.g. {"method": "mtp", "num_speculative_tokens": 2}
  bool enable_prefix_caching = true;
  std::string load_format = "auto";
  std::string dtype = "auto";
  std::string quantization;
  bool enforce_eager = false;
  bool language_model_only = false;
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  int data_parallel_size = 1;
  uint64_t seed = 0;
  float dummy_router_skew = 0.0f;
  std::vector<std::string> api_key;
  std::string generation_config = "auto";
  std::string chat_template;
  std::string default_chat_template_kwargs;
  bool trust_request_chat_template = false;
  double shutdown_timeout = 0;
  std::string device;                  // cpu | cuda; empty: cuda when a GPU is present
  int block_size = 16;
  int max_logprobs = 20;
  bool disable_log_stats = false;
  bool enable_log_requests = false;
  bool disable_log_requests = false;
  bool trust_remote_code = false;
  bool enable_chunked_prefill = true;
  std::string reasoning_parser;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string uvicorn_log_level = "info";
  std::string config_file;             // --config: more flags, from a YAML file
  bool disable_uvicorn_access_log = false;
  std::vector<std::string> disable_access_log_for_endpoints;  // request paths, e.g. /health

  // The flags given on the command line, as "--name value", for the startup log.
  std::vector<std::pair<std::string, std::string>> non_default;
};

// The model, engine and request-handling flags, which `hyllm run-batch`
// shares with `hyllm serve`.
void add_model_flags(CLI::App& sub, ServeArgs& args);
// The HTTP server's own flags: --host, --port, --api-key, --shutdown-timeout,
// --uvicorn-log-level.
void add_server_flags(CLI::App& sub, ServeArgs& args);
// Both: every flag of `hyllm serve`.
void add_serve_flags(CLI::App& sub, ServeArgs& args);
// Collects the non-default flags after parsing.
void record_non_default(const CLI::App& sub, ServeArgs& args);
// Sets the flags of the --config file (`name: value` lines, vLLM's flat YAML)
// that the command line did not give; a key that is no flag of `sub`, or a
// bad value, is an error naming the file and the key.
void apply_config_file(CLI::App& sub, const std::string& path);

// "32k" = 32000, "32K" = 32768 (vLLM's human-readable integers); plain digits
// as they are. Throws Error(kInvalidArgument) naming the flag.
int64_t parse_human_int(const std::string& text, const char* flag);

}  // namespace hyllm::app
