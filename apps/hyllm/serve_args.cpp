#include "serve_args.h"

#include <cmath>
#include <limits>

#include "util/status.h"

namespace hyllm::app {

int64_t parse_human_int(const std::string& text, const char* flag) {
  if (text.empty()) fail(ErrorCode::kInvalidArgument, "{}: empty value", flag);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(ErrorCode::kInvalidArgument, "{} {}: not a number", flag, text);
  }
  std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "k") scale = 1e3;
  else if (suffix == "K") scale = 1024.0;
  else if (suffix == "m") scale = 1e6;
  else if (suffix == "M") scale = 1024.0 * 1024;
  else if (suffix == "g") scale = 1e9;
  else if (suffix == "G") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "t") scale = 1e12;
  else if (suffix == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty()) fail(ErrorCode::kInvalidArgument, "{} {}: unknown suffix '{}'", flag, text, suffix);
  double result = value * scale;
  if (!std::isfinite(result) || result < 0 || result > 9e18 || std::floor(result) != result) {
    fail(ErrorCode::kInvalidArgument, "{} {}: not a whole non-negative number", flag, text);
  }
  return static_cast<int64_t>(result);
}

namespace {

// vLLM accepts --flag-name and --flag_name alike.
std::string names(const std::string& dashed, const std::string& extra = "") {
  std::string underscored = dashed;
  for (char& c : underscored) c = c == '-' ? '_' : c;
  std::string out = "--" + dashed;
  if (underscored != dashed) out += ",--" + underscored;
  if (!extra.empty()) out += "," + extra;
  return out;
}

// --x and --no-x (CLI11 spells the negation with a leading '!').
std::string negatable(const std::string& dashed) {
  std::string out = names(dashed);
  std::string no = names("no-" + dashed);
  size_t start = 0;
  while (start < no.size()) {
    size_t end = no.find(',', start);
    if (end == std::string::npos) end = no.size();
    out += ",!" + no.substr(start, end - start);
    start = end + 1;
  }
  return out;
}

}  // namespace

void add_model_flags(CLI::App& sub, ServeArgs& a) {
  sub.add_option("model_dir", a.model_positional, "Model directory (default: the embedded model)");
  sub.add_option(names("model"), a.model, "Model directory (same as the positional argument)");
  sub.add_option(names("tokenizer"), a.tokenizer, "Tokenizer directory (default: the model directory)");
  sub.add_flag(negatable("skip-tokenizer-init"), a.skip_tokenizer_init,
               "Load no tokenizer: prompts are token ids, outputs are token ids (no text, no chat, no stop strings)");
  sub.add_option(names("served-model-name"), a.served_model_name,
                 "Model names accepted in requests; the first is echoed in responses and metrics")
      ->expected(1, -1);
  sub.add_option(names("max-model-len"), a.max_model_len,
                 "Prompt + output token cap (32k = 32000, 32K = 32768; default: the model's)");
  sub.add_option(names("max-num-seqs"), a.max_num_seqs,
                 "Sequences running at once (default 1024 on GPUs with >= 70 GiB, else 256)");
  sub.add_option(names("max-num-batched-tokens"), a.max_num_batched_tokens,
                 "Token budget per engine step (default 8192 on GPUs with >= 70 GiB, else 2048)");
  sub.add_option(names("gpu-memory-utilization"), a.gpu_memory_utilization,
                 "Fraction of GPU memory for weights, activations and KV cache")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub.add_option(names("kv-cache-memory", "--kv-cache-memory-bytes"), a.kv_cache_memory,
                 "KV cache size (overrides --gpu-memory-utilization), e.g. 4G or 512M");
  sub.add_option(names("num-gpu-blocks-override"), a.num_gpu_blocks_override,
                 "Use exactly this many KV blocks (the GDN state slots get what the cache budget leaves, up to "
                 "what --max-num-seqs wants)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  sub.add_option(names("kv-cache-dtype"), a.kv_cache_dtype,
                 "auto or bfloat16 (the model's dtype), fp8 or fp8_e4m3 (e4m3 K/V with the checkpoint's k/v "
                 "scales, else 1.0)")
      ->capture_default_str();
  sub.add_option(names("mamba-cache-dtype"), a.mamba_cache_dtype,
                 "GDN conv state dtype: auto or bfloat16 (hyllm keeps it in bfloat16)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bfloat16", "float16", "float32"}));
  sub.add_option(names("mamba-ssm-cache-dtype"), a.mamba_ssm_cache_dtype,
                 "GDN recurrent state dtype: auto (Qwen3.5 asks float32) or float32")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bfloat16", "float16", "float32"}));
  sub.add_option(names("speculative-config"), a.speculative_config,
                 "Speculative decoding as JSON: '{\"method\": \"mtp\", \"num_speculative_tokens\": 2}' drafts up "
                 "to 1-4 tokens per step with the checkpoint's MTP head");
  sub.add_flag(negatable("enable-prefix-caching"),
               a.enable_prefix_caching,
               "Reuse the KV cache and GDN state of cached prompt prefixes (default on)");
  sub.add_option(names("load-format"), a.load_format, "auto, safetensors or dummy (random weights)")
      ->capture_default_str();
  sub.add_option(names("dummy-router-skew"), a.dummy_router_skew,
                 "With dummy weights: skew each MoE router towards a few experts (0 = uniform; 0.5 is strong)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 4.0));
  sub.add_option(names("dtype"), a.dtype, "auto, bfloat16, float16/half, float32")->capture_default_str();
  sub.add_option(names("quantization", "-q"), a.quantization,
                 "Unset: the checkpoint's quantization_config; fp8 on a BF16 checkpoint: quantize its linears to "
                 "FP8 on load");
  sub.add_flag(names("enforce-eager"), a.enforce_eager, "Run without CUDA graphs");
  sub.add_option(names("max-cudagraph-capture-size"), a.max_cudagraph_capture_size,
                 "Largest decode batch replayed from a CUDA graph (default and most: 512); larger steps run "
                 "kernel by kernel")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  sub.add_flag(names("language-model-only"), a.language_model_only,
               "Skip the vision tower (hyllm serves text only, so this is always the case)");
  sub.add_option(names("tensor-parallel-size"), a.tensor_parallel_size,
                 "GPUs the model is split across (1-8; the CPU backend runs ranks as threads)")
      ->capture_default_str();
  sub.add_option(names("pipeline-parallel-size"), a.pipeline_parallel_size, "Pipeline stages (only 1)")
      ->capture_default_str();
  sub.add_option(names("data-parallel-size"), a.data_parallel_size, "Engine replicas (only 1)")
      ->capture_default_str();
  sub.add_option(names("seed"), a.seed, "Seed for requests that give none")->capture_default_str();
  sub.add_option(names("generation-config"), a.generation_config,
                 "auto (the model's generation_config.json), vllm (ignore it), or a directory")
      ->capture_default_str();
  sub.add_option(names("chat-template"), a.chat_template, "Chat template file or inline Jinja");
  sub.add_option(names("default-chat-template-kwargs"), a.default_chat_template_kwargs,
                 "JSON object of template variables, e.g. '{\"enable_thinking\": false}'");
  sub.add_flag(names("trust-request-chat-template"), a.trust_request_chat_template,
               "Accept chat_template in requests");
  sub.add_option(names("device"), a.device, "cpu or cuda (default: cuda when a GPU is present)");
  sub.add_option(names("block-size"), a.block_size, "Tokens per KV cache block")->capture_default_str();
  sub.add_option(names("max-logprobs"), a.max_logprobs, "Most logprobs a request may ask for")
      ->capture_default_str();
  sub.add_flag(names("disable-log-stats"), a.disable_log_stats, "No periodic throughput line");
  sub.add_flag(names("enable-log-requests"), a.enable_log_requests, "Log each request's parameters");
  sub.add_flag(names("disable-log-requests"), a.disable_log_requests,
               "Accepted for compatibility (request logs are off by default)");
  sub.add_flag(names("trust-remote-code"), a.trust_remote_code,
               "Accepted for compatibility; hyllm never runs code from a model directory");
  sub.add_flag(negatable("enable-chunked-prefill"),
               a.enable_chunked_prefill, "Always on");
  sub.add_option(names("reasoning-parser"), a.reasoning_parser,
                 "Split <think>...</think> into the message's `reasoning`: qwen3 or deepseek_r1");
  sub.add_flag(names("enable-auto-tool-choice"), a.enable_auto_tool_choice,
               "Parse the model's tool calls when tool_choice is auto (needs --tool-call-parser)");
  sub.add_option(names("tool-call-parser"), a.tool_call_parser,
                 "Tool-call format: qwen3_coder (Qwen3.5/3.6, Qwen3-Coder) or hermes (Qwen3)");
}

void add_server_flags(CLI::App& sub, ServeArgs& a) {
  sub.add_option(names("host"), a.host, "Address to listen on")->capture_default_str();
  sub.add_option(names("port"), a.port, "Port to listen on")->capture_default_str()->check(CLI::Range(0, 65535));
  sub.add_option(names("api-key"), a.api_key,
                 "Bearer key(s) required on every route but /health, /version, /metrics and the chat page at / "
                 "(default: HYLLM_API_KEY or VLLM_API_KEY)")
      ->expected(1, -1);
  sub.add_option(names("shutdown-timeout"), a.shutdown_timeout,
                 "Seconds to let in-flight requests finish after SIGTERM (0: abort them)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  // uvicorn's levels; anything else would turn logging off without a word.
  sub.add_option(names("uvicorn-log-level"), a.uvicorn_log_level,
                 "Log level: critical, error, warning, info, debug, trace")
      ->capture_default_str()
      ->check(CLI::IsMember({"critical", "error", "warning", "info", "debug", "trace"}));
  sub.add_flag(names("disable-uvicorn-access-log"), a.disable_uvicorn_access_log,
               "Log no request lines (\"GET /v1/models HTTP/1.1\" 200)");
  // A path without its leading slash would never match a request: refused.
  sub.add_option(names("disable-access-log-for-endpoints"), a.disable_access_log_for_endpoints,
                 "Comma-separated request paths whose request lines are not logged, e.g. /health,/metrics")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](const std::string& path) {
            return !path.empty() && path[0] == '/' ? std::string() : "a request path starts with /: " + path;
          },
          "PATH"));
}

void add_serve_flags(CLI::App& sub, ServeArgs& a) {
  add_model_flags(sub, a);
  add_server_flags(sub, a);
  sub.add_option("--config", a.config_file,
                 "YAML file of serve flags, `name: value` a line (vLLM's --config); the command line wins")
      ->check(CLI::ExistingFile);
}

// CLI11 reads config files for the top-level command only, so the serve
// command applies its own after parsing, through CLI11's config reader:
// ':' separates a name from its value (vLLM's flat YAML), lists are [a, b],
// and each value goes through its option's own checks.
void apply_config_file(CLI::App& sub, const std::string& path) {
  if (path.empty()) return;
  CLI::ConfigBase format;
  format.valueSeparator(':');
  format.quoteCharacter('"', '\'');
  std::vector<CLI::ConfigItem> items;
  try {
    items = format.from_file(path);
  } catch (const CLI::Error& e) {
    fail(ErrorCode::kInvalidArgument, "--config {}: {}", path, e.what());
  }
  for (const CLI::ConfigItem& item : items) {
    if (!item.parents.empty() || item.name == "++" || item.name == "--") {
      fail(ErrorCode::kInvalidArgument, "--config {}: '{}' is nested; serve flags are `name: value` lines", path,
           item.fullname());
    }
    CLI::Option* opt = sub.get_option_no_throw("--" + item.name);
    if (opt == nullptr || opt->get_name() == "--config" || opt->get_name() == "--help") {
      fail(ErrorCode::kInvalidArgument, "--config {}: '{}' is not a serve flag", path, item.name);
    }
    if (opt->count() > 0) continue;  // given on the command line
    try {
      if (opt->get_expected_min() == 0) {
        opt->add_result(opt->get_flag_value(item.name, format.to_flag(item)));
      } else {
        opt->add_result(item.inputs);
      }
      opt->run_callback();
    } catch (const CLI::Error& e) {
      fail(ErrorCode::kInvalidArgument, "--config {}: {}: {}", path, item.name, e.what());
    }
  }
}

void record_non_default(const CLI::App& sub, ServeArgs& a) {
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->count() == 0 || opt->get_name() == "--help" || opt->get_name() == "-h") continue;
    std::string value;
    for (const auto& r : opt->results()) value += (value.empty() ? "" : " ") + r;
    a.non_default.emplace_back(opt->get_name(), value);
  }
}

}  // namespace hyllm::app
