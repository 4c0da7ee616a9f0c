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

// NCCL reads its settings from the environment: sets hyllm's defaults where
// the user did not set the variable. NCCL_NVLS_ENABLE=0: NVLink multicast
// (NVLS) is off, since on a host whose GPUs are shared it can put them out of
// service; a user who owns the host may set NCCL_NVLS_ENABLE=1.
// NCCL_RUNTIME_CONNECT=0: connections are made when the communicators are,
// so that no collective call blocks its thread waiting for a peer.
// Call before NCCL starts and while no other thread reads the environment
// (setenv is not thread-safe); later calls do nothing.
void set_nccl_defaults();

}  // namespace hyllm
