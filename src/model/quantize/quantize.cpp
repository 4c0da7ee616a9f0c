#include "model/quantize/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/layers/weights.h"
#include "model/loader/weight_source.h"
#include "model/quantize/safetensors_writer.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm {

namespace {

constexpr int64_t kBlock = 128;
constexpr float kE4M3Max = 448.0f;

bool is_quantizable(const std::string& canonical_weight) {
  static const std::set<std::string> kLast = {"q_proj",    "k_proj",     "v_proj",   "o_proj",  "in_proj_qkv",
                                              "in_proj_z", "out_proj",   "gate_proj", "up_proj", "down_proj"};
  const std::string suffix = ".weight";
  if (canonical_weight.size() <= suffix.size() || !canonical_weight.ends_with(suffix)) return false;
  std::string module = canonical_weight.substr(0, canonical_weight.size() - suffix.size());
  return kLast.count(module.substr(module.rfind('.') + 1)) > 0;
}

std::vector<float> to_floats(const std::vector<std::byte>& bytes, DType dtype, int64_t numel) {
  auto f = convert_float_bytes(bytes.data(), dtype, DType::kF32, numel);
  std::vector<float> out(static_cast<size_t>(numel));
  std::memcpy(out.data(), f.data(), f.size());
  return out;
}

std::vector<std::byte> floats_to_bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<std::byte> to_bf16_bytes(const std::vector<float>& v) {
  return convert_float_bytes(v.data(), DType::kF32, DType::kBF16, static_cast<int64_t>(v.size()));
}

struct Quantized {
  std::vector<std::byte> codes;   // e4m3 [N, K]
  std::vector<float> scale;       // block grid or one value
  std::vector<float> dequantized;  // codes * scale
};

Quantized quantize_block(const float* w, int64_t n, int64_t k) {
  Quantized q;
  const int64_t br = (n + kBlock - 1) / kBlock, bc = (k + kBlock - 1) / kBlock;
  q.codes.resize(static_cast<size_t>(n * k));
  q.scale.resize(static_cast<size_t>(br * bc));
  q.dequantized.resize(static_cast<size_t>(n * k));
  for (int64_t bi = 0; bi < br; ++bi)
    for (int64_t bj = 0; bj < bc; ++bj) {
      const int64_t r1 = std::min(n, (bi + 1) * kBlock), c1 = std::min(k, (bj + 1) * kBlock);
      float amax = 0;
      for (int64_t r = bi * kBlock; r < r1; ++r)
        for (int64_t c = bj * kBlock; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * k + c]));
      const float s = amax > 0 ? amax / kE4M3Max : 1.0f;
      q.scale[bi * bc + bj] = s;
      for (int64_t r = bi * kBlock; r < r1; ++r)
        for (int64_t c = bj * kBlock; c < c1; ++c) {
          uint8_t code = f32_to_f8e4m3(w[r * k + c] / s);
          q.codes[r * k + c] = static_cast<std::byte>(code);
          q.dequantized[r * k + c] = f8e4m3_to_f32(code) * s;
        }
    }
  return q;
}

Quantized quantize_tensor(const float* w, int64_t numel) {
  Quantized q;
  float amax = 0;
  for (int64_t i = 0; i < numel; ++i) amax = std::max(amax, std::fabs(w[i]));
  const float s = amax > 0 ? amax / kE4M3Max : 1.0f;
  q.scale = {s};
  q.codes.resize(static_cast<size_t>(numel));
  q.dequantized.resize(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) {
    uint8_t code = f32_to_f8e4m3(w[i] / s);
    q.codes[i] = static_cast<std::byte>(code);
    q.dequantized[i] = f8e4m3_to_f32(code) * s;
  }
  return q;
}

}  // namespace

// calibrate.cpp
std::map<std::string, float> calibrate_linear_inputs(const ModelConfig& cfg, const WeightSource& weights,
                                                     Backend& be, std::vector<int32_t> tokens);

Fp8Target parse_fp8_target(const std::string& name) {
  if (name == "fp8-block") return Fp8Target::kFp8Block;
  if (name == "modelopt-fp8") return Fp8Target::kModelOptFp8;
  fail(ErrorCode::kInvalidArgument, "unknown FP8 format '{}' (fp8-block, modelopt-fp8)", name);
}

QuantizeReport quantize_checkpoint(const std::filesystem::path& in_dir, const std::filesystem::path& out_dir,
                                   const QuantizeOptions& opts, Backend& calibration_backend) {
  // Writing into the checkpoint being read would replace its weights and
  // config before the copy is done: refuse it before reading anything.
  for (const auto& [dir, flag] : {std::pair{out_dir, "--out"}, std::pair{opts.dequantized_dir, "--dequantized-out"}}) {
    std::error_code ec;
    if (!dir.empty() && std::filesystem::equivalent(dir, in_dir, ec)) {
      fail(ErrorCode::kInvalidArgument, "{} {} is the checkpoint being quantized; write to another directory", flag,
           dir.string());
    }
  }
  const nlohmann::json config_json = read_json_file(in_dir / "config.json");
  const ModelConfig cfg = load_model_config(in_dir);
  if (cfg.quant.is_fp8()) fail(ErrorCode::kInvalidArgument, "{} is already quantized ({})", in_dir.string(),
                               quant_method_name(cfg.quant.method));
  auto weights = open_weights(in_dir, cfg, LoadFormat::kSafetensors);
  const bool nested = config_json.contains("text_config");
  const std::string prefix = nested ? "model.language_model." : "model.";
  auto out_name = [&](const std::string& canonical) {
    return canonical.starts_with("lm_head.") || canonical.starts_with("mtp.") ? canonical : prefix + canonical;
  };
  const bool modelopt = opts.target == Fp8Target::kModelOptFp8;
  std::map<std::string, float> amax;
  if (modelopt) amax = calibrate_linear_inputs(cfg, *weights, calibration_backend, opts.calibration_tokens);
  auto input_scale_for = [&](const std::string& module) {
    auto it = amax.find(module);
    if (it == amax.end()) {
      // Routed experts run inside one op: their gate/up read the MoE block's
      // input (the router's), their down_proj a SwiGLU output like the shared
      // expert's down_proj.
      std::string layer = module.substr(0, module.find(".mlp.") + 4);
      std::string stand_in = module.ends_with("down_proj") ? layer + ".shared_expert.down_proj" : layer + ".gate";
      it = amax.find(stand_in);
      if (it == amax.end()) fail(ErrorCode::kInternal, "no calibration data for {} ({})", module, stand_in);
    }
    return std::max(it->second, 1e-6f) / kE4M3Max;
  };

  QuantizeReport report;
  std::vector<OwnedTensor> out, deq;
  auto emit_quantized = [&](const std::string& module, const float* w, int64_t n, int64_t k) {
    Quantized q = modelopt ? quantize_tensor(w, n * k) : quantize_block(w, n, k);
    const std::string name = out_name(module);
    out.push_back({name + ".weight", DType::kF8E4M3, Shape{n, k}, q.codes});
    if (modelopt) {
      out.push_back({name + ".weight_scale", DType::kF32, Shape{}, floats_to_bytes(q.scale)});
      out.push_back({name + ".input_scale", DType::kF32, Shape{}, floats_to_bytes({input_scale_for(module)})});
    } else {
      Shape s{(n + kBlock - 1) / kBlock, (k + kBlock - 1) / kBlock};
      out.push_back({name + ".weight_scale_inv", DType::kF32, s, floats_to_bytes(q.scale)});
    }
    deq.push_back({name + ".weight", DType::kBF16, Shape{n, k}, to_bf16_bytes(q.dequantized)});
    report.quantized_linears++;
  };

  for (const TensorInfo& ti : weights->tensors()) {
    std::vector<std::byte> bytes(ti.nbytes);
    weights->read(ti.name, bytes.data());
    report.bytes_in += ti.nbytes;
    const bool fused_gate_up = ti.name.ends_with(".mlp.experts.gate_up_proj");
    const bool fused_down = ti.name.ends_with(".mlp.experts.down_proj");
    if (fused_gate_up || fused_down) {
      auto w = to_floats(bytes, ti.dtype, ti.shape.numel());
      const int64_t E = ti.shape[0], rows = ti.shape[1], cols = ti.shape[2];
      const std::string base = ti.name.substr(0, ti.name.rfind('.') + 1);
      for (int64_t e = 0; e < E; ++e) {
        const float* we = w.data() + e * rows * cols;
        const std::string ep = base + std::to_string(e) + ".";
        if (fused_down) {
          emit_quantized(ep + "down_proj", we, rows, cols);
        } else {
          emit_quantized(ep + "gate_proj", we, rows / 2, cols);
          emit_quantized(ep + "up_proj", we + (rows / 2) * cols, rows / 2, cols);
        }
      }
    } else if (is_quantizable(ti.name) && !(modelopt && ti.name.starts_with("mtp."))) {
      auto w = to_floats(bytes, ti.dtype, ti.shape.numel());
      emit_quantized(ti.name.substr(0, ti.name.size() - 7), w.data(), ti.shape[0], ti.shape[1]);
    } else {
      out.push_back({out_name(ti.name), ti.dtype, ti.shape, bytes});
      deq.push_back({out_name(ti.name), ti.dtype, ti.shape, std::move(bytes)});
      report.copied_tensors++;
    }
  }

  std::filesystem::create_directories(out_dir);
  write_safetensors(out_dir / "model.safetensors", out);
  for (const auto& t : out) report.bytes_out += t.bytes.size();
  nlohmann::json qcfg;
  // The MTP head: block FP8 quantises its layer's linears but keeps its fc
  // (joining the embedding and the hidden state) bf16; ModelOpt keeps the
  // whole head bf16, since calibration runs only the main model and so has
  // no input scales for it.
  const std::vector<std::string> kept = {"lm_head",  "embed_tokens", "linear_attn.in_proj_a", "linear_attn.in_proj_b",
                                         "mlp.gate", "mlp.shared_expert_gate", modelopt ? "mtp" : "mtp.fc"};
  if (modelopt) {
    qcfg = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"ignore", kept}, {"producer", {{"name", "hyllm quantize"}}}};
  } else {
    qcfg = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
            {"weight_block_size", {kBlock, kBlock}}, {"modules_to_not_convert", kept}};
  }
  auto write_dir = [&](const std::filesystem::path& dir, const nlohmann::json* quant) {
    nlohmann::json c = config_json;
    if (quant) c["quantization_config"] = *quant;
    std::ofstream(dir / "config.json") << c.dump(2) << "\n";
    for (const char* f : {"generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
      if (std::filesystem::exists(in_dir / f))
        std::filesystem::copy_file(in_dir / f, dir / f, std::filesystem::copy_options::overwrite_existing);
  };
  write_dir(out_dir, &qcfg);
  if (!opts.dequantized_dir.empty()) {
    std::filesystem::create_directories(opts.dequantized_dir);
    write_safetensors(opts.dequantized_dir / "model.safetensors", deq);
    write_dir(opts.dequantized_dir, nullptr);
  }
  log::info("quantized {} linears to {} ({} MB -> {} MB)", report.quantized_linears,
            modelopt ? "ModelOpt FP8" : "block FP8", report.bytes_in >> 20, report.bytes_out >> 20);
  return report;
}

}  // namespace hyllm
