#pragma once
// `hyllm bench serve`: the whole run against one server: pick the model,
// build the dataset, align prompts through the server's /tokenize, check the
// endpoint answers, warm up, run, compute metrics, print, return the result.
// The multi_turn workload (multi_turn.h) runs conversations instead of a
// request list; the other steps are the same.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/endpoint_client.h"
#include "bench/load_generator.h"
#include "bench/metrics.h"
#include "bench/multi_turn.h"
#include "bench/prefix_repetition_dataset.h"
#include "bench/random_dataset.h"
#include "bench/report.h"

namespace hyllm::bench {

struct ServeBenchOptions {
  Endpoint endpoint;
  std::string model;           // empty: the first model of /v1/models
  std::string tokenizer_id;    // recorded in the result
  std::string dataset_name = "random";  // random, prefix_repetition or multi_turn
  RandomDatasetOptions dataset;
  PrefixRepetitionOptions prefix_repetition;
  MultiTurnOptions multi_turn;
  LoadOptions load;
  int num_warmups = 0;
  bool ignore_eos = false;
  std::optional<double> temperature;
  std::vector<double> percentiles{99.0};
  std::vector<std::string> percentile_metrics{"ttft", "tpot", "itl"};
  GoodputSlo goodput;
  double ready_check_timeout_s = 0.0;  // 0: no readiness check
  std::string label;
};

struct ServeBenchResult {
  BenchmarkMetrics metrics;
  nlohmann::json json;  // vLLM's result keys plus our run description
};

ServeBenchResult run_serve_benchmark(const ServeBenchOptions& opt, const PromptTokenizer& tokenizer,
                                     std::ostream& log);

// The model id the server lists first in /v1/models.
std::string first_served_model(const Endpoint& endpoint);

// Re-tokenises prompts through the server's /tokenize and trims them to their
// drawn length with /detokenize when the server's tokenizer disagrees with
// ours; servers without /tokenize are left alone.
void align_prompts_to_server(const Endpoint& endpoint, const std::string& model,
                             std::vector<SampleRequest>& requests, std::ostream& log);

}  // namespace hyllm::bench
