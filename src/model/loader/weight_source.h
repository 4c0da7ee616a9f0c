#pragma once
// Where model weights come from. The model code consumes exactly this API:
//
//   ModelConfig cfg = load_model_config(dir);
//   std::unique_ptr<WeightSource> w = open_weights(dir, cfg, LoadFormat::kAuto, /*seed=*/0);
//   // Every tensor the model needs is in w->tensors(), already checked against
//   // qwen35_expected_tensors(cfg): names, shapes, FP8 scales.
//   visit_tensors(*w, [&](const TensorInfo& t, const void* host_bytes) {
//     backend.copy_to_device(device_ptr_for(t.name), host_bytes, t.nbytes);
//   });  // logs progress every ~2 s and a summary at the end
//
// or, tensor by tensor: w->info(name) for dtype/shape, w->read(name, dst) to
// copy its bytes into host memory, w->mapped(name) for a zero-copy pointer when
// the bytes are already in host memory (mmap'd checkpoints).
//
// Names are canonical (see canonical_tensor_name in tensor_names.h): the HF
// prefixes "model.language_model." / "model." are gone, e.g.
//   embed_tokens.weight, norm.weight, lm_head.weight (absent when tied),
//   layers.{i}.input_layernorm.weight, layers.{i}.self_attn.q_proj.weight,
//   layers.{i}.linear_attn.A_log, layers.{i}.mlp.experts.gate_up_proj (fused
//   [E, 2I, H]) or layers.{i}.mlp.experts.{e}.gate_proj.weight (per expert),
//   FP8 scales next to their weight: ...q_proj.weight_scale_inv (block FP8),
//   ...q_proj.weight_scale and ...q_proj.input_scale (ModelOpt per-tensor),
//   layers.{i}.self_attn.k_scale / v_scale (KV cache, optional).
// A quantizable linear is FP8 iff its weight's dtype is kF8E4M3; the dtype of
// every other tensor is whatever the checkpoint stores (bf16/fp16/fp32): the
// model converts. Tensor bytes are row-major, little-endian.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/config/model_config.h"
#include "tensor/shape.h"

namespace hyllm {

enum class LoadFormat : uint8_t {
  kAuto,         // safetensors when the directory has them (vLLM's "auto")
  kSafetensors,  // safetensors files, an error when there are none
  kDummy,        // random weights from a seed; no weight files are read
};
// "auto", "safetensors", "dummy"; anything else is kInvalidArgument.
LoadFormat parse_load_format(std::string_view name);
const char* load_format_name(LoadFormat f);

// How a generated (dummy) tensor's elements are made, so that the loader can
// make them where they live (ops.h fill_random) instead of on the host:
//   element i = dtype( offset + scale * base(rng::mix(stream + i)) ),
// base = rng::normal or rng::uniform01 (util/counter_rng.h). WeightSource::read
// gives the same bytes on the host.
struct GeneratedFill {
  uint64_t stream = 0;
  bool normal = true;  // else uniform in [0, 1)
  float offset = 0.0f;
  float scale = 1.0f;
};

struct TensorInfo {
  std::string name;  // canonical
  DType dtype = DType::kBF16;
  Shape shape;
  size_t nbytes = 0;
  // Where the bytes come from, for messages: "path/file.safetensors: model.layers.0..."
  // (the checkpoint's own name) or "dummy".
  std::string origin;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // All tensors, each name once. Checkpoints list them in file and offset
  // order (sequential reads); dummy sources in model order.
  virtual const std::vector<TensorInfo>& tensors() const = 0;

  // Copies the tensor's nbytes into host memory. Thread-safe: distinct tensors
  // may be read concurrently. Throws kNotFound for an unknown name.
  virtual void read(const std::string& name, void* host_dst) const = 0;

  // The tensor's bytes in host memory without a copy, when the source has
  // them there (an mmap'd file: read-only pages, valid while the source
  // lives, not necessarily aligned beyond 1 byte); nullopt otherwise.
  virtual std::optional<std::span<const std::byte>> mapped(const std::string& name) const {
    return std::nullopt;
  }

  // The recipe of a tensor the source generates rather than stores, when it
  // is one fill_random can make; nullopt for stored tensors.
  virtual std::optional<GeneratedFill> generated(const std::string& name) const { return std::nullopt; }

  // "safetensors (3 shards in /models/x)" or "dummy weights (seed 0)".
  virtual std::string describe() const = 0;

  // A hint that `name` will be read soon (mmap'd sources start reading its
  // pages from disk in the background); a no-op where it means nothing.
  virtual void prefetch(const std::string& name) const {}

  // Lookup by canonical name: nullptr / kNotFound naming the tensor and the source.
  const TensorInfo* find(std::string_view name) const;
  const TensorInfo& info(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }

 protected:
  // Builds the name index; implementations call it once tensors() is final.
  void index_tensors();

 private:
  std::vector<std::pair<std::string_view, size_t>> index_;  // sorted by name
};

// Opens the weights of a model directory (`model_dir` is unused for kDummy)
// and checks them against qwen35_expected_tensors(config): missing tensors,
// wrong shapes, FP8 weights without their scales or scales without their
// weight, and unexpected tensors are kCorruptData naming them.
// router_skew: see DummyWeights (kDummy only).
std::unique_ptr<WeightSource> open_weights(const std::filesystem::path& model_dir, const ModelConfig& config,
                                           LoadFormat format, uint64_t seed = 0, float router_skew = 0.0f);

struct LoadStats {
  int64_t tensors = 0;
  int64_t parameters = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// Progress lines (every ~2 s, once a load has run that long) and the closing
// summary for a load that copies tensors one by one in any order:
//   LoadProgress progress(source);
//   for (...) { copy t; progress.add(t); }
//   progress.finish();
class LoadProgress {
 public:
  explicit LoadProgress(const WeightSource& source);
  void add(const TensorInfo& t);
  // Logs "loaded N tensors (P B parameters, X GiB) from SOURCE in S s" and returns the totals.
  LoadStats finish();

 private:
  const WeightSource& source_;
  std::chrono::steady_clock::time_point start_, last_report_;
  uint64_t total_bytes_ = 0;
  LoadStats stats_;
};

// Calls fn(info, host_bytes) for every tensor in tensors() order. host_bytes
// is the mapped memory when available, else a reused scratch buffer filled by
// read(): it is valid only during the call, so copy from it before returning.
// Prefetches the next tensor while fn runs; reports through LoadProgress.
LoadStats visit_tensors(const WeightSource& source,
                        const std::function<void(const TensorInfo&, const void* host_bytes)>& fn);

}  // namespace hyllm
