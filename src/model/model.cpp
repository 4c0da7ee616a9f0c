#include "model/model.h"

#include "model/qwen3_5.h"
#include "util/log.h"

namespace hyllm {

std::unique_ptr<Model> load_model(const std::filesystem::path& model_dir, Backend& backend,
                                  const ModelOptions& options) {
  ModelConfig config = load_model_config(model_dir);
  auto weights = open_weights(model_dir, config, options.load_format, options.seed, options.dummy_router_skew);
  log::info("loading {} ({}) from {} on {}", config.architecture, config.is_moe ? "MoE" : "dense",
            weights->describe(), backend.name());
  return make_qwen3_5(config, *weights, backend, options);
}

}  // namespace hyllm
