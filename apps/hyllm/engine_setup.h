#pragma once
// Builds an in-process engine (backend, model, runner, EngineClient) from a
// model directory and the engine flags that `hyllm serve` and the offline
// benchmarks share.

#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "backend/device_graph.h"
#include "backend/device_sampler.h"
#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "engine/executor.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "model/config/model_config.h"

namespace hyllm::app {

struct EngineFlags {
  std::string model;  // empty: the embedded default model
  std::string device;  // empty: cuda when a GPU is present, else cpu
  std::string load_format = "auto";
  std::string kv_cache_dtype = "auto";  // as `hyllm serve --kv-cache-dtype`
  std::string speculative_config;       // as `hyllm serve --speculative-config`
  std::string quantization;             // as `hyllm serve --quantization`
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  std::optional<int> max_model_len;
  std::optional<std::string> kv_cache_memory;  // "20G", "512M", bytes
  double gpu_memory_utilization = 0.9;
  uint64_t seed = 0;
  float dummy_router_skew = 0.0f;
  bool enforce_eager = false;
  int tensor_parallel_size = 1;
};

void add_engine_flags(CLI::App& sub, EngineFlags& f);

// The embedded default model's directory (HYLLM_MODEL_DIR overrides it).
std::filesystem::path default_model_dir();
// "cpu" or "cuda"; `requested` empty picks cuda when a GPU is present.
std::string resolve_device(const std::string& requested);
std::unique_ptr<Backend> make_backend(const std::string& device, int device_index = 0);
// One backend per tensor-parallel rank: `size` CPU backends sharing the host,
// or CUDA devices 0..size-1; each holds its rank's communicator when size > 1.
// kInvalidArgument for a size outside 1..8 or beyond the visible GPUs.
std::vector<std::unique_ptr<Backend>> make_backends(const std::string& device, int size);
// The sampler that runs where the logits are (only tokens and logprobs cross
// to the host); null for the CPU, whose runner samples on the host.
std::shared_ptr<DeviceSampler> make_device_sampler(const std::string& device, Backend& backend);
// The recorder of decode-step graphs for the runner (CUDA graphs); null for
// the CPU and with --enforce-eager.
GraphRecorder make_graph_recorder(const std::string& device, Backend& backend, bool enforce_eager);
// "20G" = 20 GiB, "512M", "1.5G", plain bytes; throws kInvalidArgument.
size_t parse_memory_size(const std::string& text);
// --quantization (vLLM's flag) against the checkpoint: empty runs what the
// checkpoint declares; "fp8" on a BF16 checkpoint asks for online FP8 (true);
// "fp8" or "modelopt" on an FP8 checkpoint runs it as declared; anything else
// is kUnsupported with a message.
bool wants_online_fp8(const std::string& quantization, const ModelConfig& config);

// The model and runner options that an engine configuration implies: step
// and sequence capacities, seed, KV cache dtype and size, speculative
// tokens. The load format, online FP8 and the router skew are the caller's.
ModelOptions model_options_for(const EngineConfig& config);
RunnerOptions runner_options_for(const EngineConfig& config);

// Loads the model from `model_dir` onto `backends` (from make_backends) and
// returns the executor the engine drives: a ModelRunner over the one backend
// (which stays the caller's, and must outlive the executor), or a
// TensorParallelExecutor that takes the backends over (the vector is left
// empty). `runner` holds the capacities and memory settings; the device
// sampler and graph recorder are made here for each rank. Logs the weight
// memory and the load time.
std::unique_ptr<ModelExecutor> load_executor(std::vector<std::unique_ptr<Backend>>& backends,
                                             const std::string& device, const std::filesystem::path& model_dir,
                                             const ModelOptions& model, const RunnerOptions& runner,
                                             bool enforce_eager);

struct InProcessEngine {
  std::filesystem::path model_dir;
  ModelConfig model_config;
  std::vector<std::unique_ptr<Backend>> backends;  // outlive the engine: declared first
  std::unique_ptr<EngineClient> engine;
  const ModelExecutor* executor = nullptr;  // the engine's, for its times()

  InProcessEngine() = default;
  InProcessEngine(InProcessEngine&&) = default;
  InProcessEngine& operator=(InProcessEngine&&) = default;
  ~InProcessEngine();  // stops the engine before the backend goes
};

InProcessEngine build_engine(const EngineFlags& f);

}  // namespace hyllm::app
