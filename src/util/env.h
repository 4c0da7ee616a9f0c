#pragma once
// The one place that reads environment variables. Every setting that may come
// from the environment is a typed field here, read once at first use.

#include <optional>
#include <string>

namespace hyllm {

struct EnvSettings {
  // HYLLM_LOG_LEVEL: trace, debug, info (default), warn, error, off.
  std::string log_level = "info";
  // HYLLM_API_KEY, else VLLM_API_KEY: the server's API key when --api-key is absent.
  std::optional<std::string> api_key;
  // HYLLM_NUM_THREADS: CPU backend worker threads; 0 means one per core.
  int num_threads = 0;
  // HYLLM_MODEL_DIR: overrides the embedded default model's directory.
  std::optional<std::string> default_model_dir;
};

// Parsed on first call; later changes to the environment are not seen.
const EnvSettings& env();

}  // namespace hyllm
