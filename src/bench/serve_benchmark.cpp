#include "bench/serve_benchmark.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <thread>

#include "util/status.h"

namespace hyllm::bench {

std::string first_served_model(const Endpoint& endpoint) {
  nlohmann::json models = get_json(endpoint, "/v1/models");
  if (!models.contains("data") || !models["data"].is_array() || models["data"].empty() ||
      !models["data"][0].contains("id"))
    fail(ErrorCode::kUnavailable, "no models found on the server at {}", endpoint.base_url);
  return models["data"][0]["id"].get<std::string>();
}

void align_prompts_to_server(const Endpoint& endpoint, const std::string& model,
                             std::vector<SampleRequest>& requests, std::ostream& log) {
  if (requests.empty()) return;
  auto tokenize = [&](const std::string& prompt) {
    nlohmann::json r = post_json(endpoint, "/tokenize",
                                 {{"model", model}, {"prompt", prompt}, {"add_special_tokens", false}});
    return r.at("tokens").get<std::vector<int32_t>>();
  };
  std::vector<int32_t> first;
  try {
    first = tokenize(requests[0].prompt);
  } catch (const std::exception&) {
    log << "WARNING: /tokenize unavailable, skipping alignment.\n";
    return;
  }
  if (static_cast<int>(first.size()) == requests[0].prompt_len) return;
  log << "WARNING: tokenizer mismatch (server=" << first.size() << ", expected=" << requests[0].prompt_len
      << "), re-aligning prompts.\n";
  for (auto& req : requests) {
    try {
      auto ids = tokenize(req.prompt);
      if (static_cast<int>(ids.size()) <= req.prompt_len) continue;
      ids.resize(static_cast<size_t>(req.prompt_len));
      req.prompt = post_json(endpoint, "/detokenize", {{"model", model}, {"tokens", ids}}).at("prompt").get<std::string>();
    } catch (const std::exception&) {
      // Keep the original prompt, as vLLM does.
    }
  }
}

namespace {

RequestInput to_input(const ServeBenchOptions& opt, const std::string& model, const SampleRequest& s) {
  RequestInput in;
  in.model = model;
  in.prompt = s.prompt;
  in.prompt_len = s.prompt_len;
  in.max_tokens = s.expected_output_len;
  in.ignore_eos = opt.ignore_eos;
  in.temperature = opt.temperature;
  return in;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::gmtime(&t));
  return buf;
}

}  // namespace

ServeBenchResult run_serve_benchmark(const ServeBenchOptions& opt, const PromptTokenizer& tokenizer,
                                     std::ostream& log) {
  std::string model = opt.model.empty() ? first_served_model(opt.endpoint) : opt.model;
  const bool multi_turn = opt.dataset_name == "multi_turn";
  std::vector<RequestInput> inputs;
  std::vector<Conversation> conversations;
  RequestInput base;
  base.model = model;
  base.ignore_eos = opt.ignore_eos;
  base.temperature = opt.temperature;
  if (multi_turn) {
    conversations = make_multi_turn_conversations(tokenizer, opt.multi_turn);
    inputs.push_back(multi_turn_request(base, opt.endpoint.kind, conversations[0], 0, {}));
  } else {
    std::vector<SampleRequest> samples;
    if (opt.dataset_name == "prefix_repetition") {
      samples = make_prefix_repetition_dataset(tokenizer, opt.prefix_repetition);
    } else if (opt.dataset_name == "random") {
      samples = make_random_dataset(tokenizer, opt.dataset);
    } else {
      fail(ErrorCode::kUnsupported, "--dataset-name {}: one of random, prefix_repetition, multi_turn",
           opt.dataset_name);
    }
    align_prompts_to_server(opt.endpoint, model, samples, log);
    inputs.reserve(samples.size());
    for (const auto& s : samples) inputs.push_back(to_input(opt, model, s));
  }
  auto send = [&](const RequestInput& in) { return send_streaming_request(opt.endpoint, in); };

  if (opt.ready_check_timeout_s > 0) {
    log << "Starting initial single prompt test run...\n";
    double deadline = now_s() + opt.ready_check_timeout_s;
    RequestResult r;
    while (true) {
      r = send(inputs[0]);
      if (r.success || now_s() > deadline) break;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (!r.success) fail(ErrorCode::kUnavailable, "initial test run failed: {}", r.error);
    log << "Initial test run completed.\n";
  }
  if (opt.num_warmups > 0) {
    log << "Warming up with " << opt.num_warmups << " requests...\n";
    std::vector<RequestInput> warm(static_cast<size_t>(opt.num_warmups), inputs[0]);
    LoadOptions wl;
    wl.max_concurrency = opt.load.max_concurrency;
    run_load(warm, wl, send);
    log << "Warmup run completed.\n";
  }

  log << "Starting main benchmark run...\n";
  log << "Traffic request rate: " << opt.load.request_rate << "\n";
  log << "Burstiness factor: " << opt.load.burstiness
      << (opt.load.burstiness == 1.0 ? " (Poisson process)\n" : " (Gamma distribution)\n");
  log << "Maximum request concurrency: "
      << (opt.load.max_concurrency ? std::to_string(*opt.load.max_concurrency) : "None") << "\n";
  if (multi_turn && !std::isinf(opt.load.request_rate))
    fail(ErrorCode::kInvalidArgument, "the multi_turn workload sends each turn after the last: use --request-rate inf");
  LoadRun run = multi_turn ? run_multi_turn(conversations, base, opt.endpoint.kind, opt.load.max_concurrency, send)
                           : run_load(inputs, opt.load, send);

  ReportContext ctx;
  ctx.max_concurrency = opt.load.max_concurrency;
  ctx.request_rate = opt.load.request_rate;
  ctx.duration_s = run.duration_s;
  ctx.goodput = !opt.goodput.empty();
  ctx.percentile_metrics = opt.percentile_metrics;

  ServeBenchResult out;
  out.metrics = calculate_metrics(run.results, run.duration_s, opt.percentiles, opt.goodput);
  int shown = 0;
  for (const auto& r : run.results) {
    if (!r.success && shown++ < 10) log << "Error " << shown - 1 << ": " << r.error << "\n";
  }
  log << format_report(out.metrics, ctx);

  out.json = result_json(out.metrics, ctx, run.results);
  out.json["date"] = utc_now();
  out.json["endpoint_type"] = opt.endpoint.kind == EndpointKind::kChat ? "openai-chat" : "openai";
  out.json["backend"] = out.json["endpoint_type"];
  out.json["label"] = opt.label;
  out.json["model_id"] = model;
  out.json["tokenizer_id"] = opt.tokenizer_id;
  out.json["dataset_name"] = opt.dataset_name;
  out.json["num_prompts"] = static_cast<int>(run.results.size());
  if (opt.dataset_name == "prefix_repetition") {
    out.json["prefix_repetition_prefix_len"] = opt.prefix_repetition.prefix_len;
    out.json["prefix_repetition_suffix_len"] = opt.prefix_repetition.suffix_len;
    out.json["prefix_repetition_num_prefixes"] = opt.prefix_repetition.num_prefixes;
    out.json["prefix_repetition_output_len"] = opt.prefix_repetition.output_len;
  } else if (multi_turn) {
    out.json["multi_turn_num_conversations"] = opt.multi_turn.num_conversations;
    out.json["multi_turn_num_turns"] = opt.multi_turn.num_turns;
    out.json["multi_turn_prefix_len"] = opt.multi_turn.prefix_len;
    out.json["multi_turn_input_len"] = opt.multi_turn.input_len;
    out.json["multi_turn_output_len"] = opt.multi_turn.output_len;
  }
  out.json["burstiness"] = opt.load.burstiness;
  out.json["random_input_len"] = opt.dataset.input_len;
  out.json["random_output_len"] = opt.dataset.output_len;
  out.json["random_range_ratio"] = opt.dataset.range_ratio;
  out.json["ignore_eos"] = opt.ignore_eos;
  out.json["temperature"] = opt.temperature ? nlohmann::json(*opt.temperature) : nlohmann::json(nullptr);
  return out;
}

}  // namespace hyllm::bench
