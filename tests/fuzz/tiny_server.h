#pragma once
// The serving pieces the request and HTTP fuzz targets run against: the
// embedded model (models/hyllm-tiny) on the CPU backend with small
// capacities, its tokenizer, chat template and generation defaults, as
// `hyllm serve` sets them up.

#include <memory>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "engine/engine_client.h"
#include "engine/runner/model_runner.h"
#include "fuzz_util.h"
#include "model/config/model_config.h"
#include "model/model.h"
#include "serve/chat_prompt.h"
#include "serve/serving_context.h"

namespace hyllm::fuzz {

// Short enough that any request the server accepts finishes in milliseconds.
inline constexpr int kTinyMaxModelLen = 96;

inline EngineConfig tiny_engine_config() {
  EngineConfig c;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 256;
  c.max_model_len = kTinyMaxModelLen;
  c.kv_cache_memory_bytes = 32u << 20;
  c.log_stats_interval_s = 0;
  for (int64_t id : load_model_config(tiny_model_dir()).eos_token_ids) c.eos_token_ids.push_back(static_cast<int32_t>(id));
  return c;
}

inline std::unique_ptr<ModelRunner> tiny_runner(Backend& backend, const EngineConfig& config) {
  ModelOptions mo;
  mo.max_num_tokens = config.max_num_batched_tokens;
  mo.max_num_seqs = config.max_num_seqs;
  RunnerOptions ro;
  ro.max_num_tokens = config.max_num_batched_tokens;
  ro.max_num_seqs = config.max_num_seqs;
  ro.max_model_len = config.max_model_len;
  ro.cache_memory_bytes = *config.kv_cache_memory_bytes;
  return std::make_unique<ModelRunner>(load_model(tiny_model_dir(), backend, mo), ro);
}

// Everything but the engine, which the caller adds when it needs one.
inline std::unique_ptr<serve::ServingContext> tiny_serving_context() {
  auto ctx = std::make_unique<serve::ServingContext>();
  ctx->served_model_names = {"hyllm-tiny"};
  ctx->model_root = tiny_model_dir().string();
  ctx->max_model_len = kTinyMaxModelLen;
  ctx->model_vocab_size = static_cast<int32_t>(load_model_config(tiny_model_dir()).vocab_size);
  ctx->tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(tiny_model_dir()));
  ctx->chat_template.emplace(ChatTemplate::from_source(*ctx->tokenizer->chat_template_source()));
  GenerationConfig g = load_generation_config(tiny_model_dir());
  if (g.temperature) ctx->sampling_defaults.temperature = static_cast<float>(*g.temperature);
  if (g.top_p) ctx->sampling_defaults.top_p = static_cast<float>(*g.top_p);
  if (g.top_k) ctx->sampling_defaults.top_k = static_cast<int>(*g.top_k);
  if (g.repetition_penalty) ctx->sampling_defaults.repetition_penalty = static_cast<float>(*g.repetition_penalty);
  ctx->special_tokens = serve::special_token_texts(*ctx->tokenizer);
  return ctx;
}

}  // namespace hyllm::fuzz
