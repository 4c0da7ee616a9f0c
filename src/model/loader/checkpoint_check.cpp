#include "model/loader/checkpoint_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>
#include <unordered_map>
#include <unordered_set>

#include "util/log.h"

namespace hyllm {

namespace {

bool is_float(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

// One kind of problem and the tensors that have it.
struct Problem {
  std::string title;
  std::vector<std::string> items;

  void add(std::string s) { items.push_back(std::move(s)); }
  std::string render() const {
    constexpr size_t kShown = 8;
    std::string out = fmt::format("{} ({}): ", title, items.size());
    for (size_t i = 0; i < items.size() && i < kShown; ++i) out += (i ? ", " : "") + items[i];
    if (items.size() > kShown) out += fmt::format(", ... and {} more", items.size() - kShown);
    return out;
  }
};

bool ends_with_any(const std::string& s, std::initializer_list<std::string_view> suffixes) {
  for (std::string_view x : suffixes)
    if (s.ends_with(x)) return true;
  return false;
}

ExpertLayout detect_layout(const std::vector<TensorInfo>& tensors, const ModelConfig& c) {
  if (!c.is_moe) return default_expert_layout(c);
  for (const TensorInfo& t : tensors)
    if (t.name.ends_with(".mlp.experts.gate_up_proj") || t.name.ends_with(".mlp.experts.down_proj"))
      return ExpertLayout::kFused;
  for (const TensorInfo& t : tensors)
    if (t.name.find(".mlp.experts.") != std::string::npos) return ExpertLayout::kPerExpert;
  return default_expert_layout(c);
}

bool is_scalar(const TensorInfo& t) { return t.shape.numel() == 1 && t.shape.rank() <= 1; }

bool is_scale_name(std::string_view name) {
  return name.ends_with(".weight_scale_inv") || name.ends_with(".weight_scale") || name.ends_with(".input_scale") ||
         name.ends_with("self_attn.k_scale") || name.ends_with("self_attn.v_scale");
}

}  // namespace

CheckpointCheck check_checkpoint_tensors(const std::vector<TensorInfo>& tensors, const ModelConfig& config,
                                         const std::string& source_name) {
  CheckpointCheck result;
  result.expert_layout = detect_layout(tensors, config);
  const std::vector<TensorSpec> specs = qwen35_expected_tensors(config, result.expert_layout);

  std::unordered_map<std::string_view, const TensorInfo*> by_name;
  for (const TensorInfo& t : tensors) by_name.emplace(t.name, &t);
  std::unordered_set<std::string_view> claimed;

  Problem missing{"missing tensors", {}};
  Problem bad_shape{"tensors with the wrong shape", {}};
  Problem bad_dtype{"tensors with the wrong dtype", {}};
  Problem missing_scale{"FP8 weights without their scales", {}};
  Problem orphan_scale{"scales without an FP8 weight", {}};
  Problem unexpected{"unexpected tensors", {}};
  Problem disagreements{"linear weights stored otherwise than the quantization config says", {}};
  const char* exclude_list = config.quant.method == QuantMethod::kModelOptFp8 ? "exclude_modules/ignore"
                                                                               : "modules_to_not_convert";

  auto lookup = [&](const std::string& name) -> const TensorInfo* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  auto claim_scale = [&](const std::string& weight, const std::string& scale_name, const Shape& shape) {
    const TensorInfo* s = lookup(scale_name);
    if (!s) {
      missing_scale.add(fmt::format("{} (no {})", weight, scale_name));
      return;
    }
    claimed.insert(s->name);
    bool shape_ok = shape.rank() == 0 ? is_scalar(*s) : s->shape == shape;
    if (!shape_ok) bad_shape.add(fmt::format("{} {} (expected {})", s->name, s->shape.str(), shape.str()));
    if (!is_float(s->dtype)) bad_dtype.add(fmt::format("{} {} (expected a float type)", s->name, dtype_name(s->dtype)));
  };

  // The MTP head is all there or absent; a config without MTP layers makes
  // any mtp.* tensor irrelevant (dropped, like the vision tower).
  const bool has_mtp = std::any_of(tensors.begin(), tensors.end(),
                                   [](const TensorInfo& t) { return t.name.starts_with("mtp."); });
  size_t mtp_dropped = 0;
  for (const TensorSpec& spec : specs) {
    if (spec.mtp && !has_mtp) continue;
    if (spec.role == TensorRole::kBlockScale || spec.role == TensorRole::kWeightScale ||
        spec.role == TensorRole::kInputScale || spec.role == TensorRole::kKvScale) {
      continue;  // claimed through their weight, or below
    }
    const TensorInfo* t = lookup(spec.name);
    if (!t) {
      missing.add(spec.name);
      continue;
    }
    claimed.insert(t->name);
    if (t->shape != spec.shape) bad_shape.add(fmt::format("{} {} (expected {})", t->name, t->shape.str(), spec.shape.str()));
    if (spec.role != TensorRole::kLinearWeight || t->dtype != DType::kF8E4M3) {
      if (!is_float(t->dtype)) {
        bad_dtype.add(fmt::format("{} {} (expected bf16, fp16 or fp32)", t->name, dtype_name(t->dtype)));
      } else if (spec.quantized()) {
        disagreements.add(fmt::format("{} is {}, FP8 by the config (not in its {})", t->name, dtype_name(t->dtype),
                                      exclude_list));
      }
      continue;
    }
    // An FP8 linear weight.
    ++result.fp8_linears;
    if (!spec.quantized() && config.quant.is_fp8()) {
      disagreements.add(fmt::format("{} is float8_e4m3fn, {} by the config's {}", t->name, dtype_name(spec.dtype),
                                    exclude_list));
    }
    std::string module = spec.name.substr(0, spec.name.size() - std::string_view(".weight").size());
    switch (config.quant.method) {
      case QuantMethod::kNone:
        bad_dtype.add(fmt::format("{} float8_e4m3fn (config.json has no quantization_config)", t->name));
        break;
      case QuantMethod::kFp8Block: {
        const auto& b = config.quant.weight_block_size;
        Shape s{(spec.shape[0] + b[0] - 1) / b[0], (spec.shape[1] + b[1] - 1) / b[1]};
        claim_scale(t->name, module + ".weight_scale_inv", s);
        break;
      }
      case QuantMethod::kModelOptFp8:
        claim_scale(t->name, module + ".weight_scale", Shape{});
        claim_scale(t->name, module + ".input_scale", Shape{});
        break;
    }
  }

  static const std::regex kKvScale(R"(layers\.(\d+)\.self_attn\.[kv]_scale)");
  for (const TensorInfo& t : tensors) {
    if (claimed.contains(t.name)) continue;
    std::smatch m;
    if (std::regex_match(t.name, m, kKvScale)) {
      int64_t layer = std::stoll(m[1].str());
      if (layer < config.num_hidden_layers && config.layer_types[layer] == LayerType::kFullAttention && is_scalar(t) &&
          is_float(t.dtype)) {
        continue;
      }
      orphan_scale.add(t.name + " (not a scalar on a full-attention layer)");
      continue;
    }
    if (config.mtp_num_hidden_layers == 0 && t.name.starts_with("mtp.")) {
      result.ignored.push_back(t.name);
      ++mtp_dropped;
    } else if (ends_with_any(t.name, {".weight_scale_inv", ".weight_scale", ".input_scale", "_scale_inv"})) {
      orphan_scale.add(t.name);
    } else if ((t.name == "lm_head.weight" && config.tie_word_embeddings) || t.name.ends_with("rotary_emb.inv_freq")) {
      result.ignored.push_back(t.name);
    } else {
      unexpected.add(t.name);
    }
  }

  std::string message;
  for (const Problem* p :
       {&missing, &bad_shape, &bad_dtype, &disagreements, &missing_scale, &orphan_scale, &unexpected}) {
    if (!p->items.empty()) message += "\n  " + p->render();
  }
  if (!message.empty()) {
    fail(ErrorCode::kCorruptData, "{}: the checkpoint does not match {} ({} experts):{}", source_name,
         config.architecture, expert_layout_name(result.expert_layout), message);
  }
  for (const std::string& name : result.ignored) {
    if (!name.starts_with("mtp.")) log::info("{}: ignoring {}", source_name, name);
  }
  if (mtp_dropped > 0)
    log::info("{}: ignoring {} MTP tensors (mtp.*): config.json has no mtp_num_hidden_layers", source_name, mtp_dropped);
  return result;
}

void check_scale_values(const TensorInfo& t, const void* bytes) {
  if (!is_scale_name(t.name) || !is_float(t.dtype)) return;
  const auto* b = static_cast<const std::byte*>(bytes);
  const int64_t n = t.shape.numel();
  int64_t bad_count = 0, first = -1;
  float first_value = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float v = 0.0f;
    if (t.dtype == DType::kF32) {
      std::memcpy(&v, b + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      v = t.dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    if (std::isfinite(v) && v > 0.0f) continue;
    if (bad_count++ == 0) {
      first = i;
      first_value = v;
    }
  }
  if (bad_count == 0) return;
  const std::string where = t.shape.rank() == 0 ? "" : fmt::format("[{}]", first);
  const std::string more = bad_count > 1 ? fmt::format(" and {} more values", bad_count - 1) : "";
  fail(ErrorCode::kCorruptData, "{}: FP8 scale {}{} = {}{}: scales must be finite and positive", t.origin, t.name,
       where, first_value, more);
}

}  // namespace hyllm
