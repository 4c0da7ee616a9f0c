#include "model/loader/weight_source.h"

#include <algorithm>

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
                                           uint64_t seed, float router_skew) {
  if (format == LoadFormat::kDummy) {
    auto dummy = std::make_unique<DummyWeights>(config, seed, router_skew);
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

LoadProgress::LoadProgress(const WeightSource& source)
    : source_(source), start_(std::chrono::steady_clock::now()), last_report_(start_) {
  for (const TensorInfo& t : source.tensors()) total_bytes_ += t.nbytes;
}

void LoadProgress::add(const TensorInfo& t) {
  constexpr std::chrono::seconds kReportEvery{2};
  ++stats_.tensors;
  stats_.parameters += t.shape.numel();
  stats_.bytes += t.nbytes;
  auto now = std::chrono::steady_clock::now();
  if (now - last_report_ < kReportEvery) return;
  last_report_ = now;
  log::info("loading weights: {}/{} tensors, {:.2f}/{:.2f} GiB ({:.0f}%), {:.1f} s", stats_.tensors,
            source_.tensors().size(), static_cast<double>(stats_.bytes) / 1073741824.0,
            static_cast<double>(total_bytes_) / 1073741824.0,
            total_bytes_ ? 100.0 * static_cast<double>(stats_.bytes) / static_cast<double>(total_bytes_) : 100.0,
            std::chrono::duration<double>(now - start_).count());
}

LoadStats LoadProgress::finish() {
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double gib = static_cast<double>(stats_.bytes) / 1073741824.0;
  log::info("loaded {} tensors ({:.3f} B parameters, {:.2f} GiB) from {} in {:.2f} s ({:.2f} GiB/s)", stats_.tensors,
            static_cast<double>(stats_.parameters) / 1e9, gib, source_.describe(), stats_.seconds,
            stats_.seconds > 0 ? gib / stats_.seconds : 0.0);
  return stats_;
}

LoadStats visit_tensors(const WeightSource& source,
                        const std::function<void(const TensorInfo&, const void* host_bytes)>& fn) {
  const std::vector<TensorInfo>& all = source.tensors();
  LoadProgress progress(source);
  HostBuffer scratch;
  for (size_t i = 0; i < all.size(); ++i) {
    const TensorInfo& t = all[i];
    if (i + 1 < all.size()) source.prefetch(all[i + 1].name);
    const void* bytes = nullptr;
    if (auto m = source.mapped(t.name)) {
      bytes = m->data();
    } else {
      if (scratch.size() < t.nbytes) scratch = HostBuffer(t.nbytes);
      source.read(t.name, scratch.data());
      bytes = scratch.data();
    }
    fn(t, bytes);
    progress.add(t);
  }
  return progress.finish();
}

}  // namespace hyllm
