#include "model/model.h"

#include "model/qwen3_5.h"
#include "util/log.h"

namespace hyllm {

TensorView Model::forward_draft(const StepContext&, const TensorView&, bool) {
  fail(ErrorCode::kUnsupported, "{} has no draft head for speculative decoding", config().architecture);
}

void Model::rollback_states(const TensorView&, const TensorView&) {
  fail(ErrorCode::kUnsupported, "{} keeps no speculative states", config().architecture);
}

std::unique_ptr<Model> load_model(const std::filesystem::path& model_dir, Backend& backend,
                                  const ModelOptions& options) {
  ModelConfig config = load_model_config(model_dir);
  auto weights = open_weights(model_dir, config, options.load_format, options.seed, options.dummy_router_skew);
  log::info("loading {} ({}) from {} on {}", config.architecture, config.is_moe ? "MoE" : "dense",
            weights->describe(), backend.name());
  return make_qwen3_5(config, *weights, backend, options);
}

}  // namespace hyllm
