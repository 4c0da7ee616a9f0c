#pragma once
// What `hyllm serve` and `hyllm run-batch` share: turning the model and engine
// flags into an engine configuration, and loading the model into the
// ServingContext that the endpoint handlers read.
//
// It comes in two steps so that the server can bind its port in between: the
// plan only reads small files and checks flags (a mistake fails in
// milliseconds); loading makes the backends and the engine.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/engine_config.h"
#include "model/config/model_config.h"
#include "model/loader/weight_source.h"
#include "serve/serving_context.h"
#include "serve_args.h"

namespace hyllm::app {

struct ServingPlan {
  std::string model_arg;             // the model as given; empty: the embedded model
  std::filesystem::path model_dir;
  std::string device;                // "cpu" or "cuda"
  LoadFormat load_format = LoadFormat::kAuto;
  ModelConfig model_config;
  bool online_fp8 = false;           // --quantization fp8 on a BF16 checkpoint
  EngineConfig config;
};

// Refuses flags for missing features, finds the model directory, reads its
// config.json and derives the engine configuration. Throws Error with a
// message that names the flag at fault.
ServingPlan plan_serving(const ServeArgs& args);

// Logs the flags given on the command line ("non-default args: {...}").
void log_non_default_args(const ServeArgs& args);

// Makes the backends into `backends`, loads the tokenizer, chat template,
// generation config and model, and starts the engine. The backends must
// outlive the returned context: its engine frees device memory through them.
// On a GPU of 70 GiB or more, unset --max-num-seqs and
// --max-num-batched-tokens take vLLM's larger defaults (plan.config changes).
std::unique_ptr<serve::ServingContext> load_serving_context(const ServeArgs& args, ServingPlan& plan,
                                                           std::vector<std::unique_ptr<Backend>>& backends);

}  // namespace hyllm::app
