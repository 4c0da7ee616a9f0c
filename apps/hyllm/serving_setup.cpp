#include "serving_setup.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/ranges.h>

#include "engine/engine_client.h"
#include "engine/runner/model_runner.h"
#include "engine/speculative_config.h"
#include "engine_setup.h"
#include "model/model.h"
#include "serve/chat_prompt.h"
#include "serve/openai_json.h"
#include "serve/reasoning_parser.h"
#include "serve/tool_parser.h"
#include "structured/grammar_compiler.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm::app {
namespace {

namespace fs = std::filesystem;

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kNotFound, "cannot read {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Flags that name features hyllm does not have yet: refused before anything loads.
void refuse_missing_features(const ServeArgs& a) {
  if (a.pipeline_parallel_size != 1) {
    fail(ErrorCode::kUnsupported, "--pipeline-parallel-size {}: pipeline parallelism is not available (use 1)",
         a.pipeline_parallel_size);
  }
  if (a.data_parallel_size != 1) {
    fail(ErrorCode::kUnsupported, "--data-parallel-size {}: data parallelism is not available (use 1)",
         a.data_parallel_size);
  }
  if (!a.reasoning_parser.empty() && !serve::reasoning_syntax(a.reasoning_parser)) {
    fail(ErrorCode::kInvalidArgument, "--reasoning-parser {}: unknown; hyllm has qwen3 and deepseek_r1",
         a.reasoning_parser);
  }
  if (!a.tool_call_parser.empty() && !serve::is_tool_call_parser(a.tool_call_parser)) {
    fail(ErrorCode::kInvalidArgument, "--tool-call-parser {}: unknown; hyllm has qwen3_coder and hermes",
         a.tool_call_parser);
  }
  if (a.enable_auto_tool_choice && a.tool_call_parser.empty()) {
    fail(ErrorCode::kInvalidArgument, "--enable-auto-tool-choice needs --tool-call-parser");
  }
  if (!a.enable_chunked_prefill) {
    fail(ErrorCode::kUnsupported, "--no-enable-chunked-prefill: hyllm always uses chunked prefill");
  }
  // vLLM's GDN state dtypes, accepted where they name what hyllm stores: the
  // conv state in bfloat16 and the recurrent state in float32, the dtypes
  // Qwen3.5's config asks for.
  if (a.mamba_cache_dtype != "auto" && a.mamba_cache_dtype != "bfloat16") {
    fail(ErrorCode::kUnsupported,
         "--mamba-cache-dtype {}: hyllm keeps the GDN conv state in bfloat16 (use auto or bfloat16)",
         a.mamba_cache_dtype);
  }
  if (a.mamba_ssm_cache_dtype != "auto" && a.mamba_ssm_cache_dtype != "float32") {
    fail(ErrorCode::kUnsupported,
         "--mamba-ssm-cache-dtype {}: hyllm keeps the GDN recurrent state in float32 (use auto or float32)",
         a.mamba_ssm_cache_dtype);
  }
}

serve::SamplingDefaults sampling_defaults(const GenerationConfig& g) {
  serve::SamplingDefaults d;
  if (g.temperature) d.temperature = static_cast<float>(*g.temperature);
  if (g.top_p) d.top_p = static_cast<float>(*g.top_p);
  if (g.top_k) d.top_k = static_cast<int>(*g.top_k);
  if (g.repetition_penalty) d.repetition_penalty = static_cast<float>(*g.repetition_penalty);
  if (g.max_new_tokens) d.max_new_tokens = *g.max_new_tokens;
  return d;
}

std::string describe_defaults(const serve::SamplingDefaults& d) {
  std::string out;
  auto add = [&](const char* k, std::string v) { out += fmt::format("{}'{}': {}", out.empty() ? "" : ", ", k, v); };
  if (d.temperature) add("temperature", fmt::format("{}", *d.temperature));
  if (d.top_p) add("top_p", fmt::format("{}", *d.top_p));
  if (d.top_k) add("top_k", fmt::format("{}", *d.top_k));
  if (d.repetition_penalty) add("repetition_penalty", fmt::format("{}", *d.repetition_penalty));
  if (d.max_new_tokens) add("max_new_tokens", fmt::format("{}", *d.max_new_tokens));
  return "{" + out + "}";
}

// --skip-tokenizer-init reads no tokenizer files: requests carry token ids
// and responses return them (chat, which needs the template, is refused).
std::unique_ptr<Tokenizer> load_tokenizer(const ServeArgs& a, const fs::path& model_dir) {
  if (a.skip_tokenizer_init) {
    log::info("Skipping tokenizer initialization: prompts and outputs are token ids");
    return nullptr;
  }
  const fs::path tokenizer_dir = a.tokenizer.empty() ? model_dir : fs::path(a.tokenizer);
  if (fs::is_directory(tokenizer_dir) && !fs::exists(tokenizer_dir / "tokenizer.json")) {
    fail(ErrorCode::kNotFound,
         "{} has no tokenizer.json: pass --tokenizer DIR, or --skip-tokenizer-init to serve token ids only",
         tokenizer_dir.string());
  }
  return std::make_unique<Tokenizer>(Tokenizer::from_model_dir(tokenizer_dir));
}

void set_chat_template(const ServeArgs& a, const Tokenizer* tokenizer, serve::ServingContext& ctx) {
  if (!tokenizer) {
    // Chat requests get 400 before a template would be needed.
  } else if (!a.chat_template.empty()) {
    // A path, or the template itself, as vLLM reads the flag: text with no
    // brace and no newline can only have meant a file.
    const bool is_file = fs::is_regular_file(a.chat_template);
    if (!is_file && a.chat_template.find_first_of("{}\n") == std::string::npos) {
      fail(ErrorCode::kInvalidArgument, "--chat-template {}: looks like a file path, but there is no such file",
           a.chat_template);
    }
    std::string source = is_file ? read_text_file(a.chat_template) : a.chat_template;
    ctx.chat_template.emplace(ChatTemplate::from_source(std::move(source)));
  } else if (const std::string* source = tokenizer->chat_template_source()) {
    ctx.chat_template.emplace(ChatTemplate::from_source(*source));
  } else {
    log::warn("The model has no chat template: /v1/chat/completions answers 400 unless --chat-template is given");
  }
  if (!a.default_chat_template_kwargs.empty()) {
    try {
      ctx.default_chat_template_kwargs = serve::Json::parse(a.default_chat_template_kwargs);
    } catch (const std::exception& e) {
      fail(ErrorCode::kInvalidArgument, "--default-chat-template-kwargs: not JSON: {}", e.what());
    }
    if (!ctx.default_chat_template_kwargs.is_object()) {
      fail(ErrorCode::kInvalidArgument, "--default-chat-template-kwargs must be a JSON object");
    }
  }
}

// As in vLLM, the tokenizer's eos_token ends a sequence as well as the
// configs' ids. Grammars end with these ids (the ones the tokenizer has),
// so a tokenizer borrowed from another model still gives them one.
std::vector<int32_t> end_of_sequence_ids(const GenerationConfig& generation, const ModelConfig& model_config,
                                         const Tokenizer* tokenizer) {
  std::vector<int64_t> candidates = generation.eos_token_ids;
  candidates.insert(candidates.end(), model_config.eos_token_ids.begin(), model_config.eos_token_ids.end());
  if (tokenizer) {
    if (std::optional<int32_t> id = tokenizer->eos_token_id()) candidates.push_back(*id);
  }
  std::vector<int32_t> ids;
  for (int64_t id : candidates) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace

ServingPlan plan_serving(const ServeArgs& a) {
  refuse_missing_features(a);
  if (!a.model_positional.empty() && !a.model.empty() && a.model_positional != a.model) {
    fail(ErrorCode::kInvalidArgument, "the model is given twice ({} and --model {})", a.model_positional, a.model);
  }
  ServingPlan plan;
  plan.model_arg = !a.model_positional.empty() ? a.model_positional : a.model;
  plan.model_dir = plan.model_arg.empty() ? default_model_dir() : fs::path(plan.model_arg);
  if (!fs::is_directory(plan.model_dir)) {
    fail(ErrorCode::kNotFound, "model directory {} {}", plan.model_dir.string(),
         fs::exists(plan.model_dir) ? "is not a directory (give the directory that holds config.json)"
                                    : "does not exist");
  }
  plan.device = resolve_device(a.device);
  plan.load_format = parse_load_format(a.load_format);

  plan.model_config = load_model_config(plan.model_dir);
  const ModelConfig& model_config = plan.model_config;
  if (a.dtype != "auto") {
    auto wanted = dtype_from_torch_name(a.dtype);
    if (!wanted) fail(ErrorCode::kInvalidArgument, "--dtype {}: expected auto, bfloat16, float16, half or float32", a.dtype);
    if (*wanted != model_config.dtype) {
      fail(ErrorCode::kUnsupported, "--dtype {}: hyllm runs a checkpoint in its own dtype ({}) only", a.dtype,
           dtype_name(model_config.dtype));
    }
  }
  plan.online_fp8 = wants_online_fp8(a.quantization, model_config);

  EngineConfig& config = plan.config;
  // Compared before the cast: the config bounds max_position_embeddings to
  // 32 bits, and a flag past it must not wrap into range.
  const int64_t max_model_len = a.max_model_len.empty() ? model_config.max_position_embeddings
                                                        : parse_human_int(a.max_model_len, "--max-model-len");
  if (max_model_len > model_config.max_position_embeddings) {
    fail(ErrorCode::kInvalidArgument,
         "User-specified max_model_len ({}) is greater than the derived max_model_len (max_position_embeddings={} "
         "in the model's config.json)",
         max_model_len, model_config.max_position_embeddings);
  }
  config.max_model_len = static_cast<int>(max_model_len);
  config.block_size = a.block_size;
  config.gpu_memory_utilization = a.gpu_memory_utilization;
  if (!a.kv_cache_memory.empty()) {
    config.kv_cache_memory_bytes = parse_memory_size(a.kv_cache_memory);
  }
  config.num_gpu_blocks_override = a.num_gpu_blocks_override;
  config.max_cudagraph_capture_size = a.max_cudagraph_capture_size;
  config.kv_cache_dtype = a.kv_cache_dtype;
  if (!a.speculative_config.empty())
    config.num_speculative_tokens = parse_speculative_config(a.speculative_config).num_speculative_tokens;
  config.enable_prefix_caching = a.enable_prefix_caching;
  config.seed = a.seed;
  config.max_logprobs = a.max_logprobs;
  config.log_stats_interval_s = a.disable_log_stats ? 0.0 : 10.0;
  config.max_num_seqs = a.max_num_seqs.value_or(256);
  config.max_num_batched_tokens = a.max_num_batched_tokens.value_or(2048);
  config.validate();
  return plan;
}

void log_non_default_args(const ServeArgs& a) {
  if (a.non_default.empty()) return;
  std::string args;
  for (const auto& [k, v] : a.non_default) args += fmt::format("{}'{}': {}", args.empty() ? "" : ", ", k, v);
  log::info("non-default args: {{{}}}", args);
}

std::unique_ptr<serve::ServingContext> load_serving_context(const ServeArgs& a, ServingPlan& plan,
                                                           std::vector<std::unique_ptr<Backend>>& backends) {
  EngineConfig& config = plan.config;
  const fs::path& model_dir = plan.model_dir;
  backends = make_backends(plan.device, a.tensor_parallel_size);
  const std::string backend_name = backends.front()->name();
  if (plan.device == "cuda" && backends.front()->memory_info().total_bytes >= (70ull << 30)) {
    // vLLM's defaults on GPUs with >= 70 GiB (H100/H200 class).
    if (!a.max_num_seqs) config.max_num_seqs = 1024;
    if (!a.max_num_batched_tokens) config.max_num_batched_tokens = 8192;
    config.validate();
  }

  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(a, model_dir);
  auto ctx = std::make_unique<serve::ServingContext>();
  set_chat_template(a, tokenizer.get(), *ctx);

  GenerationConfig generation;
  if (a.generation_config == "auto") {
    generation = load_generation_config(model_dir);
  } else if (a.generation_config != "vllm") {
    generation = load_generation_config(a.generation_config);
  }
  ctx->sampling_defaults = sampling_defaults(generation);
  if (a.generation_config != "vllm" && describe_defaults(ctx->sampling_defaults) != "{}") {
    log::warn("Default sampling parameters have been overridden by the model's generation config: {}. Pass "
              "--generation-config vllm to use vLLM's defaults instead.",
              describe_defaults(ctx->sampling_defaults));
  }
  config.eos_token_ids = end_of_sequence_ids(generation, plan.model_config, tokenizer.get());

  log::info("Loading model from {} on {}{}", model_dir.string(), backend_name,
            backends.size() > 1 ? fmt::format(" and {} more devices (tensor parallel)", backends.size() - 1) : "");
  ModelOptions model_options = model_options_for(config);
  model_options.load_format = plan.load_format;
  model_options.online_fp8 = plan.online_fp8;
  model_options.dummy_router_skew = a.dummy_router_skew;
  const RunnerOptions runner_options = runner_options_for(config);
  // Samples on the GPU (only tokens and logprobs cross to the host) and
  // replays decode steps from CUDA graphs unless --enforce-eager.
  auto runner = load_executor(backends, plan.device, model_dir, model_options, runner_options, a.enforce_eager);
  const int32_t vocab = static_cast<int32_t>(runner->vocab_size());
  if (tokenizer && tokenizer->vocab_size() > vocab) {
    fail(ErrorCode::kCorruptData, "the tokenizer has {} ids but the model only {}", tokenizer->vocab_size(), vocab);
  }
  auto engine = make_engine_client(std::move(runner), config);

  ctx->served_model_names = a.served_model_name;
  if (ctx->served_model_names.empty()) {
    ctx->served_model_names.push_back(plan.model_arg.empty() ? model_dir.filename().string() : plan.model_arg);
  }
  ctx->model_root = model_dir.string();
  ctx->created = serve::unix_time_seconds();
  ctx->max_model_len = config.max_model_len;
  ctx->model_vocab_size = vocab;
  ctx->reasoning_parser = a.reasoning_parser;
  ctx->tool_call_parser = a.tool_call_parser;
  ctx->enable_auto_tool_choice = a.enable_auto_tool_choice;
  if (tokenizer) {
    ctx->special_tokens = serve::special_token_texts(*tokenizer);
    // Grammars are compiled over the tokenizer's vocabulary; without one,
    // structured output is refused with chat as a whole.
    ctx->grammar_compiler = std::make_unique<structured::GrammarCompiler>(*tokenizer, vocab, config.eos_token_ids);
    const int tokenizer_vocab = tokenizer->vocab_size();
    if (std::none_of(config.eos_token_ids.begin(), config.eos_token_ids.end(),
                     [&](int32_t id) { return id >= 0 && id < tokenizer_vocab; })) {
      log::warn("None of the end-of-sequence ids {} is in the tokenizer: a structured-output request fails "
                "when its grammar is complete (no token may follow)",
                fmt::join(config.eos_token_ids, ", "));
    }
  }
  ctx->tokenizer = std::move(tokenizer);
  ctx->engine = std::move(engine);
  ctx->trust_request_chat_template = a.trust_request_chat_template;
  ctx->log_requests = a.enable_log_requests;
  return ctx;
}

}  // namespace hyllm::app
