#include "model/loader/weight_source.h"

#include <algorithm>
#include <chrono>

#include "model/loader/checkpoint_check.h"
#include "model/loader/dummy_weights.h"
#include "model/loader/safetensors_checkpoint.h"
#include "tensor/host_buffer.h"
#include "util/log.h"

namespace hyllm {

namespace fs = std::filesystem;

LoadFormat parse_load_format(std::string_view name) {
  if (name == "auto") return LoadFormat::kAuto;
  if (name == "safetensors") return LoadFormat::kSafetensors;
  if (name == "dummy") return LoadFormat::kDummy;
  fail(ErrorCode::kInvalidArgument, "unknown load format \"{}\" (expected auto, safetensors or dummy)", name);
}

const char* load_format_name(LoadFormat f) {
  switch (f) {
    case LoadFormat::kAuto: return "auto";
    case LoadFormat::kSafetensors: return "safetensors";
    case LoadFormat::kDummy: return "dummy";
  }
  return "?";
}

void WeightSource::index_tensors() {
  const std::vector<TensorInfo>& all = tensors();
  index_.clear();
  index_.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i) index_.emplace_back(all[i].name, i);
  std::sort(index_.begin(), index_.end());
  auto dup = std::adjacent_find(index_.begin(), index_.end(),
                                [](const auto& a, const auto& b) { return a.first == b.first; });
  HYLLM_CHECK(dup == index_.end(), "tensor {} listed twice", dup->first);
}

const TensorInfo* WeightSource::find(std::string_view name) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  if (it == index_.end() || it->first != name) return nullptr;
  return &tensors()[it->second];
}

const TensorInfo& WeightSource::info(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) fail(ErrorCode::kNotFound, "{}: no tensor \"{}\"", describe(), name);
  return *t;
}

std::unique_ptr<WeightSource> open_weights(const fs::path& model_dir, const ModelConfig& config, LoadFormat format,
                                           uint64_t seed) {
  if (format == LoadFormat::kDummy) {
    auto dummy = std::make_unique<DummyWeights>(config, seed);
    log::info("using {} for {}: {} tensors", dummy->describe(), config.architecture, dummy->tensors().size());
    return dummy;
  }
  if (format == LoadFormat::kAuto && !SafetensorsCheckpoint::has_safetensors(model_dir)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
      if (entry.path().extension() == ".bin" || entry.path().extension() == ".pt") {
        fail(ErrorCode::kUnsupported, "{}: only safetensors checkpoints are supported, found {}", model_dir.string(),
             entry.path().filename().string());
      }
    }
  }
  std::unique_ptr<SafetensorsCheckpoint> ckpt = SafetensorsCheckpoint::open(model_dir);
  CheckpointCheck check = check_checkpoint_tensors(ckpt->tensors(), config, ckpt->describe());
  if (!check.ignored.empty()) ckpt->drop(check.ignored);
  log::info("opened {}: {} tensors{}, {} FP8 linears", ckpt->describe(), ckpt->tensors().size(),
            config.is_moe ? fmt::format(", {} experts", expert_layout_name(check.expert_layout)) : "", check.fp8_linears);
  return ckpt;
}

LoadStats visit_tensors(const WeightSource& source,
                        const std::function<void(const TensorInfo&, const void* host_bytes)>& fn) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last_report = start;
  constexpr std::chrono::seconds kReportEvery{2};

  const std::vector<TensorInfo>& all = source.tensors();
  uint64_t total_bytes = 0;
  for (const TensorInfo& t : all) total_bytes += t.nbytes;

  HostBuffer scratch;
  LoadStats stats;
  for (const TensorInfo& t : all) {
    const void* bytes = nullptr;
    if (auto m = source.mapped(t.name)) {
      bytes = m->data();
    } else {
      if (scratch.size() < t.nbytes) scratch = HostBuffer(t.nbytes);
      source.read(t.name, scratch.data());
      bytes = scratch.data();
    }
    fn(t, bytes);
    ++stats.tensors;
    stats.parameters += t.shape.numel();
    stats.bytes += t.nbytes;
    auto now = Clock::now();
    if (now - last_report >= kReportEvery) {
      last_report = now;
      log::info("loading weights: {}/{} tensors, {:.2f}/{:.2f} GiB ({:.0f}%), {:.1f} s", stats.tensors, all.size(),
                stats.bytes / 1073741824.0, total_bytes / 1073741824.0,
                total_bytes ? 100.0 * static_cast<double>(stats.bytes) / static_cast<double>(total_bytes) : 100.0,
                std::chrono::duration<double>(now - start).count());
    }
  }
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  log::info("loaded {} tensors ({:.3f} B parameters, {:.2f} GiB) from {} in {:.2f} s ({:.2f} GiB/s)", stats.tensors,
            static_cast<double>(stats.parameters) / 1e9, stats.bytes / 1073741824.0, source.describe(), stats.seconds,
            stats.seconds > 0 ? stats.bytes / 1073741824.0 / stats.seconds : 0.0);
  return stats;
}

}  // namespace hyllm
