#include "util/env.h"

#include <cstdlib>
#include <mutex>
#include <string>

namespace hyllm {
namespace {

std::optional<std::string> read(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int read_int(const char* name, int fallback) {
  auto v = read(name);
  if (!v) return fallback;
  try {
    return std::stoi(*v);
  } catch (...) {
    return fallback;
  }
}

EnvSettings load() {
  EnvSettings s;
  if (auto v = read("HYLLM_LOG_LEVEL")) s.log_level = *v;
  s.api_key = read("HYLLM_API_KEY");
  if (!s.api_key) s.api_key = read("VLLM_API_KEY");
  s.num_threads = read_int("HYLLM_NUM_THREADS", 0);
  s.default_model_dir = read("HYLLM_MODEL_DIR");
  return s;
}

}  // namespace

const EnvSettings& env() {
  static const EnvSettings settings = load();
  return settings;
}

void set_nccl_defaults() {
  static std::once_flag once;
  std::call_once(once, [] {
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  });
}

}  // namespace hyllm
