// hyllm generate: one prompt, one continuation, straight through the model
// runner (no scheduler): the prompt in chunks of the step capacity, then one
// token per step.
//
//   hyllm generate [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) --max-tokens N
//                  [--temperature 0] [--device cpu|cuda] [--load-format auto|dummy]
//                  [--kv-cache-dtype auto|fp8] [--quantization fp8] [--json]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "engine_setup.h"
#include "engine/engine_config.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "util/log.h"
#include "util/status.h"
#ifdef HYLLM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace hyllm::app {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  int max_tokens = 16;
  double temperature = 0.0;
  std::string device = "cpu";
  std::string load_format = "auto";
  std::string kv_cache_dtype = "auto";
  std::string quantization;
  bool json = false;
  bool ignore_eos = false;
  uint64_t seed = 0;
  int max_num_batched_tokens = 512;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail(ErrorCode::kInvalidArgument, "--prompt-ids: '{}' is not a token id", item);
    }
  }
  return ids;
}

int run_generate(const GenerateOptions& o) {
  const std::filesystem::path dir = o.model.empty() ? default_model_dir() : std::filesystem::path(o.model);
  if (o.max_tokens < 1) fail(ErrorCode::kInvalidArgument, "--max-tokens must be at least 1");
  if (!(o.temperature >= 0.0) || !std::isfinite(o.temperature)) {
    fail(ErrorCode::kInvalidArgument, "--temperature must be a finite non-negative number, got {}", o.temperature);
  }
  if (o.prompt.empty() == o.prompt_ids.empty())
    fail(ErrorCode::kInvalidArgument, "give exactly one of --prompt and --prompt-ids");

  std::optional<Tokenizer> tokenizer;
  if (std::filesystem::exists(dir / "tokenizer.json")) tokenizer = Tokenizer::from_model_dir(dir);
  std::vector<int32_t> prompt;
  if (!o.prompt.empty()) {
    if (!tokenizer) fail(ErrorCode::kNotFound, "--prompt needs {}; use --prompt-ids", (dir / "tokenizer.json").string());
    prompt = tokenizer->encode(o.prompt, true);
  } else {
    prompt = parse_ids(o.prompt_ids);
  }
  if (prompt.empty()) fail(ErrorCode::kInvalidArgument, "the prompt is empty");

  auto backend = make_backend(o.device);
  const int64_t chunk = o.max_num_batched_tokens;
  ModelOptions mo;
  mo.max_num_tokens = chunk;
  mo.max_num_seqs = 1;
  mo.load_format = parse_load_format(o.load_format);
  EngineConfig cache_flags;
  cache_flags.kv_cache_dtype = o.kv_cache_dtype;
  cache_flags.validate();
  mo.kv_cache_dtype = cache_flags.kv_cache_fp8() ? DType::kF8E4M3 : DType::kBF16;
  mo.online_fp8 = wants_online_fp8(o.quantization, load_model_config(dir));
  auto t_load = std::chrono::steady_clock::now();
  auto model = load_model(dir, *backend, mo);
  std::vector<int64_t> eos = model->config().eos_token_ids;
  for (int64_t id : load_generation_config(dir).eos_token_ids) eos.push_back(id);

  RunnerOptions ro;
  ro.max_num_tokens = chunk;
  ro.max_num_seqs = 1;
  ro.max_model_len = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  ro.device_sampler = make_device_sampler(o.device, *backend);
  ro.record_graph = make_graph_recorder(o.device, *backend, false);
  ModelRunner runner(std::move(model), ro);
  const int block_size = 16;
  const int blocks = static_cast<int>((ro.max_model_len + block_size - 1) / block_size);
  runner.allocate_cache({block_size, blocks, 1});
  std::vector<int32_t> table(blocks);
  for (int i = 0; i < blocks; ++i) table[i] = i;
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  SamplingParams sp;
  sp.temperature = static_cast<float>(o.temperature);
  std::vector<int32_t> output;
  std::string finish = "length";
  auto t0 = std::chrono::steady_clock::now();
  double prefill_s = 0;
  int64_t pos = 0;
  std::vector<int32_t> all = prompt;
  while (static_cast<int>(output.size()) < o.max_tokens) {
    const bool prefill = pos < static_cast<int64_t>(prompt.size());
    const int64_t n = prefill ? std::min<int64_t>(chunk, prompt.size() - pos) : 1;
    SeqWork w;
    w.seq_id = 0;
    w.token_ids = std::span<const int32_t>(all.data() + pos, n);
    w.start_pos = static_cast<int32_t>(pos);
    w.block_table = table;
    w.state_slot = 0;
    w.sample = pos + n == static_cast<int64_t>(all.size());
    w.sampling = &sp;
    w.prompt_ids = prompt;
    w.output_ids = output;
    w.seed = o.seed;
    w.sample_index = output.size();
    StepInput in;
    in.seqs.push_back(w);
    StepOutput out = runner.execute(in);
    pos += n;
    if (!w.sample) continue;
    if (output.empty()) prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int32_t tok = out.sampled.at(0).token;
    output.push_back(tok);
    all.push_back(tok);
    if (!o.ignore_eos && std::find(eos.begin(), eos.end(), tok) != eos.end()) {
      finish = "stop";
      break;
    }
  }
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double decode_s = total_s - prefill_s;
  double prefill_tps = prompt.size() / std::max(prefill_s, 1e-9);
  double decode_tps = output.size() > 1 ? (output.size() - 1) / std::max(decode_s, 1e-9) : 0.0;

  std::optional<std::string> text;
  if (tokenizer) text = tokenizer->decode(output, true);
  if (o.json) {
    nlohmann::json j;
    j["token_ids"] = output;
    if (text) j["text"] = *text;
    j["prompt_tokens"] = prompt.size();
    j["finish_reason"] = finish;
    j["prefill_tokens_per_s"] = prefill_tps;
    j["decode_tokens_per_s"] = decode_tps;
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (text) {
      std::printf("%s\n", text->c_str());
    } else {
      for (size_t i = 0; i < output.size(); ++i) std::printf("%s%d", i ? "," : "", output[i]);
      std::printf("\n");
    }
    std::fprintf(stderr, "load %.2fs; prompt %zu tokens at %.1f tok/s; %zu generated at %.1f tok/s (%s)\n", load_s,
                 prompt.size(), prefill_tps, output.size(), decode_tps, finish.c_str());
  }
  return 0;
}

void setup_generate(CLI::App& sub, int& exit_code) {
  auto o = std::make_shared<GenerateOptions>();
  sub.add_option("--model", o->model, "Model directory (default: the embedded model, or HYLLM_MODEL_DIR)");
  sub.add_option("--prompt", o->prompt, "Prompt text (needs the model's tokenizer.json)");
  sub.add_option("--prompt-ids", o->prompt_ids, "Prompt token ids, comma separated");
  sub.add_option("--max-tokens", o->max_tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  sub.add_option("--temperature", o->temperature, "Sampling temperature (0: greedy)");
  sub.add_option("--seed", o->seed, "Sampling seed");
  sub.add_option("--device", o->device, "cpu or cuda");
  sub.add_option("--load-format", o->load_format, "auto, safetensors or dummy (random weights)");
  sub.add_option("--kv-cache-dtype", o->kv_cache_dtype, "auto, bfloat16, fp8 or fp8_e4m3");
  sub.add_option("--quantization", o->quantization, "fp8: quantize a BF16 checkpoint's linears to FP8 on load");
  sub.add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Prompt tokens per step")
      ->check(CLI::PositiveNumber);
  sub.add_flag("--ignore-eos", o->ignore_eos, "Do not stop at an end-of-sequence token");
  sub.add_flag("--json", o->json, "Print one JSON object: token_ids, text, timings");
  sub.callback([o, &exit_code] {
    try {
      exit_code = run_generate(*o);
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = 1;
    }
  });
}

const CommandRegistration reg{"generate", "Generate a continuation of one prompt", setup_generate};

}  // namespace
}  // namespace hyllm::app
