#include "engine_setup.h"

#include <chrono>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_communicator.h"
#include "engine/runner/tensor_parallel_executor.h"
#include "engine/runner/model_runner.h"
#include "engine/speculative_config.h"
#include "model/model.h"
#include "util/env.h"
#include "util/log.h"
#include "util/status.h"
#ifdef HYLLM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#endif

namespace hyllm::app {

void add_engine_flags(CLI::App& sub, EngineFlags& f) {
  sub.add_option("--model", f.model, "Model directory (default: the embedded model)");
  sub.add_option("--device", f.device, "cpu or cuda (default: cuda when a GPU is present)");
  sub.add_option("--load-format", f.load_format, "auto, safetensors or dummy")->capture_default_str();
  sub.add_option("--kv-cache-dtype", f.kv_cache_dtype, "auto, bfloat16, fp8 or fp8_e4m3")->capture_default_str();
  sub.add_option("--quantization", f.quantization, "fp8: quantize a BF16 checkpoint's linears to FP8 on load");
  sub.add_option("--speculative-config", f.speculative_config,
                 "JSON {\"method\": \"mtp\", \"num_speculative_tokens\": 1-4}: draft with the MTP head");
  sub.add_option("--max-num-seqs", f.max_num_seqs)->capture_default_str();
  sub.add_option("--max-num-batched-tokens", f.max_num_batched_tokens)->capture_default_str();
  sub.add_option("--max-model-len", f.max_model_len, "Prompt + output cap (default: from the model config)");
  sub.add_option("--kv-cache-memory", f.kv_cache_memory, "Cache memory, e.g. 20G (overrides --gpu-memory-utilization)");
  sub.add_option("--gpu-memory-utilization", f.gpu_memory_utilization)->capture_default_str();
  sub.add_option("--seed", f.seed)->capture_default_str();
  sub.add_option("--dummy-router-skew", f.dummy_router_skew,
                 "With dummy weights: skew each MoE router towards a few experts (0 = uniform)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 4.0));
  sub.add_flag("--enforce-eager", f.enforce_eager, "Launch every step op by op (no CUDA graphs)");
  sub.add_option("--tensor-parallel-size", f.tensor_parallel_size, "Devices the model is split across (1-8)")
      ->capture_default_str();
}

std::filesystem::path default_model_dir() {
  if (env().default_model_dir) return *env().default_model_dir;
  return std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny";
}

std::string resolve_device(const std::string& requested) {
  if (!requested.empty()) return requested;
#ifdef HYLLM_HAVE_CUDA
  if (cuda_device_count() > 0) return "cuda";
#endif
  return "cpu";
}

std::unique_ptr<Backend> make_backend(const std::string& device, int device_index) {
  if (device == "cpu") return make_cpu_backend();
#ifdef HYLLM_HAVE_CUDA
  if (device == "cuda") {
    if (cuda_device_count() == 0) fail(ErrorCode::kUnavailable, "--device cuda: no CUDA device is visible");
    return make_cuda_backend(device_index);
  }
#endif
  (void)device_index;
  fail(ErrorCode::kInvalidArgument, "--device {}: not available in this build (cpu{})", device,
#ifdef HYLLM_HAVE_CUDA
       ", cuda"
#else
       ""
#endif
  );
}

std::vector<std::unique_ptr<Backend>> make_backends(const std::string& device, int size) {
  if (size < 1 || size > 8)
    fail(ErrorCode::kInvalidArgument, "--tensor-parallel-size {}: expected 1 to 8", size);
#ifdef HYLLM_HAVE_CUDA
  if (device == "cuda" && cuda_device_count() == 0)
    fail(ErrorCode::kUnsupported, "--device cuda: no CUDA device is visible");
  if (device == "cuda" && size > cuda_device_count())
    fail(ErrorCode::kInvalidArgument, "--tensor-parallel-size {}: only {} CUDA devices are visible", size,
         cuda_device_count());
#endif
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < size; ++r) backends.push_back(make_backend(device, r));
  if (size == 1) return backends;
  std::vector<std::shared_ptr<Communicator>> comms;
  if (device == "cpu") comms = make_cpu_communicators(size);
#ifdef HYLLM_HAVE_CUDA
  if (device == "cuda") {
    std::vector<Backend*> raw;
    for (auto& b : backends) raw.push_back(b.get());
    comms = make_nccl_communicators(raw);
  }
#endif
  HYLLM_CHECK(comms.size() == backends.size(), "no communicators for device {}", device);
  for (int r = 0; r < size; ++r) backends[static_cast<size_t>(r)]->set_communicator(comms[static_cast<size_t>(r)]);
  // Making a device backend selects its device on this thread: back to rank 0's.
  backends.front()->bind_to_current_thread();
  return backends;
}

ModelOptions model_options_for(const EngineConfig& config) {
  ModelOptions mo;
  mo.max_num_tokens = config.max_num_batched_tokens;
  mo.max_num_seqs = config.max_num_seqs;
  mo.seed = config.seed;
  mo.kv_cache_dtype = config.kv_cache_fp8() ? DType::kF8E4M3 : DType::kBF16;
  mo.num_speculative_tokens = config.num_speculative_tokens;
  return mo;
}

RunnerOptions runner_options_for(const EngineConfig& config) {
  RunnerOptions ro;
  ro.max_num_tokens = config.max_num_batched_tokens;
  ro.max_num_seqs = config.max_num_seqs;
  ro.max_model_len = config.max_model_len;
  // The runner profiles a step and gives the cache what --gpu-memory-utilization
  // leaves (vLLM's meaning: the share of all device memory that weights,
  // activations and the cache may use together); --kv-cache-memory wins.
  ro.gpu_memory_utilization = config.gpu_memory_utilization;
  if (config.kv_cache_memory_bytes) ro.cache_memory_bytes = *config.kv_cache_memory_bytes;
  if (config.max_cudagraph_capture_size) ro.max_graph_batch = *config.max_cudagraph_capture_size;
  return ro;
}

std::unique_ptr<ModelExecutor> load_executor(std::vector<std::unique_ptr<Backend>>& backends,
                                             const std::string& device, const std::filesystem::path& model_dir,
                                             const ModelOptions& model, const RunnerOptions& runner,
                                             bool enforce_eager) {
  HYLLM_CHECK(!backends.empty(), "load_executor without a backend");
  const auto start = std::chrono::steady_clock::now();
  const size_t ranks = backends.size();
  auto make_runner = [&](int rank, Backend& backend, TensorParallelExecutor::ShareSamples share) {
    auto m = load_model(model_dir, backend, model);
    backend.synchronize();  // weights made on the device are done: the time logged is the whole load
    if (rank == 0) {
      log::info("Model loading took {:.4f} GiB{} and {:.2f} seconds", m->weight_bytes() / double(1ull << 30),
                ranks > 1 ? " per rank" : "",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    RunnerOptions ro = runner;
    ro.samples = rank == 0;
    if (ranks > 1 && model.num_speculative_tokens > 0) ro.share_samples = std::move(share);
    ro.device_sampler = rank == 0 ? make_device_sampler(device, backend) : nullptr;
    ro.record_graph = make_graph_recorder(device, backend, enforce_eager);
    return std::make_unique<ModelRunner>(std::move(m), ro);
  };
  if (backends.size() == 1) return make_runner(0, *backends[0], nullptr);
  return std::make_unique<TensorParallelExecutor>(std::move(backends), make_runner);
}

std::shared_ptr<DeviceSampler> make_device_sampler(const std::string& device, Backend& backend) {
#ifdef HYLLM_HAVE_CUDA
  if (device == "cuda") return make_cuda_sampler(backend);
#endif
  (void)backend;
  return nullptr;
}

GraphRecorder make_graph_recorder(const std::string& device, Backend& backend, bool enforce_eager) {
#ifdef HYLLM_HAVE_CUDA
  if (device == "cuda" && !enforce_eager) {
    return [&backend](const std::function<void()>& body) { return cuda_capture_graph(backend, body); };
  }
#endif
  (void)device, (void)backend, (void)enforce_eager;
  return nullptr;
}

size_t parse_memory_size(const std::string& text) {
  if (text.empty()) fail(ErrorCode::kInvalidArgument, "empty memory size");
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    fail(ErrorCode::kInvalidArgument, "'{}' is not a memory size (e.g. 20G, 512M)", text);
  }
  std::string unit = text.substr(used);
  double mult = 1;
  if (unit == "" || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "MiB" || unit == "m") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB" || unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB" || unit == "t") mult = 1024.0 * 1024 * 1024 * 1024;
  else fail(ErrorCode::kInvalidArgument, "'{}': unknown unit '{}' (use K, M, G or T)", text, unit);
  if (!(v > 0) || !std::isfinite(v)) fail(ErrorCode::kInvalidArgument, "'{}' must be a positive size", text);
  return static_cast<size_t>(v * mult);
}

bool wants_online_fp8(const std::string& quantization, const ModelConfig& config) {
  if (quantization.empty()) return false;
  if (config.quant.is_fp8()) {
    if (quantization == "fp8" || quantization == "modelopt") return false;
  } else if (quantization == "fp8") {
    return true;
  }
  fail(ErrorCode::kUnsupported,
       "--quantization {}: hyllm runs FP8 checkpoints as declared (this one: {}) and quantizes BF16 checkpoints "
       "online only to fp8",
       quantization, quant_method_name(config.quant.method));
}

InProcessEngine::~InProcessEngine() {
  if (engine) engine->shutdown(std::chrono::milliseconds(0));
  engine.reset();
}

InProcessEngine build_engine(const EngineFlags& f) {
  InProcessEngine e;
  e.model_dir = f.model.empty() ? default_model_dir() : std::filesystem::path(f.model);
  e.model_config = load_model_config(e.model_dir);
  const std::string device = resolve_device(f.device);

  EngineConfig config;
  config.max_num_seqs = f.max_num_seqs;
  config.max_num_batched_tokens = f.max_num_batched_tokens;
  config.max_model_len = f.max_model_len ? *f.max_model_len : static_cast<int>(e.model_config.max_position_embeddings);
  if (f.kv_cache_memory) config.kv_cache_memory_bytes = parse_memory_size(*f.kv_cache_memory);
  config.gpu_memory_utilization = f.gpu_memory_utilization;
  config.kv_cache_dtype = f.kv_cache_dtype;
  config.seed = f.seed;
  if (!f.speculative_config.empty())
    config.num_speculative_tokens = parse_speculative_config(f.speculative_config).num_speculative_tokens;
  config.log_stats_interval_s = 0;
  for (int64_t id : e.model_config.eos_token_ids) config.eos_token_ids.push_back(static_cast<int32_t>(id));
  for (int64_t id : load_generation_config(e.model_dir).eos_token_ids) config.eos_token_ids.push_back(static_cast<int32_t>(id));
  config.validate();

  e.backends = make_backends(device, f.tensor_parallel_size);
  ModelOptions mo = model_options_for(config);
  mo.load_format = parse_load_format(f.load_format);
  mo.online_fp8 = wants_online_fp8(f.quantization, e.model_config);
  mo.dummy_router_skew = f.dummy_router_skew;
  const RunnerOptions ro = runner_options_for(config);
  std::unique_ptr<ModelExecutor> executor = load_executor(e.backends, device, e.model_dir, mo, ro, f.enforce_eager);
  e.executor = executor.get();
  e.engine = make_engine_client(std::move(executor), config);
  return e;
}

}  // namespace hyllm::app
