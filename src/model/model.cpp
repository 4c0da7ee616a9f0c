#include "model/model.h"

#include "model/layers/tensor_parallel.h"
#include "model/loader/tensor_parallel.h"
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
  const TensorParallelGroup group = TensorParallelGroup::of(backend);
  if (group.split()) {
    // One rank: the config with its share of the heads and intermediate
    // columns, and the matching cut of every tensor.
    const TensorParallel tp{group.rank, group.size};
    const ModelConfig local = tensor_parallel_config(config, tp);
    auto shard = shard_weights(*weights, config, tp);
    log::info("loading {} ({}) from {} on {}", config.architecture, config.is_moe ? "MoE" : "dense",
              shard->describe(), backend.name());
    return make_qwen3_5(local, *shard, backend, options);
  }
  log::info("loading {} ({}) from {} on {}", config.architecture, config.is_moe ? "MoE" : "dense",
            weights->describe(), backend.name());
  return make_qwen3_5(config, *weights, backend, options);
}

}  // namespace hyllm
