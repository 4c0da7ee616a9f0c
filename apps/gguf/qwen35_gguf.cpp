#include "gguf/qwen35_gguf.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gguf/ggml_quants.h"
#include "tensor/float_conversions.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace hyllm::gguf {

namespace {

constexpr uint32_t kFileTypeMostlyBf16 = 32;  // llama_ftype LLAMA_FTYPE_MOSTLY_BF16
constexpr uint32_t kFileTypeMostlyQ8_0 = 7;   // llama_ftype LLAMA_FTYPE_MOSTLY_Q8_0
constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

// fn(begin, end) over [0, n) on the process's thread pool, in chunks of at
// least `grain` items, when there are two chunks or more: a layer's matrix
// takes seconds per pass on one core, and the export makes one pass to
// convert and one to quantise every matrix.
void for_chunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n < 2 * grain) return fn(0, n);
  ThreadPool::global().parallel_for(0, n, fn, grain);
}

// A buffer that grows and is never zero-filled or given back: the export
// passes every matrix through such buffers, and a fresh allocation of a
// layer's size per tensor costs more in page faults and zeroing than the
// conversion itself. Producers run one at a time on the writer's thread.
class Scratch {
 public:
  std::byte* get(size_t bytes) {
    if (bytes > capacity_) {
      data_.reset();  // the old buffer goes before the new one comes
      data_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
      capacity_ = bytes;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t capacity_ = 0;
};
thread_local Scratch raw_scratch, staged_scratch, fused_scratch;

const std::byte* read_raw(const WeightSource& w, const std::string& name) {
  std::byte* raw = raw_scratch.get(w.info(name).nbytes);
  w.read(name, raw);
  return raw;
}

float element(const std::byte* p, DType t, int64_t i) {
  uint16_t h;
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case DType::kBF16: std::memcpy(&h, p + i * 2, 2); return bf16_to_f32(h);
    case DType::kF16: std::memcpy(&h, p + i * 2, 2); return f16_to_f32(h);
    default: fail(ErrorCode::kUnsupported, "GGUF export reads bf16, f16 and f32 tensors, not {}", dtype_name(t));
  }
}

// The tensor's elements as `type` (BF16 tensors of a BF16 checkpoint are copied bit for bit).
void convert_into(const WeightSource& w, const std::string& name, GgmlType type, std::byte* out) {
  const TensorInfo& t = w.info(name);
  const int64_t n = t.shape.numel();
  if (type == GgmlType::kBF16 && t.dtype == DType::kBF16) {
    w.read(name, out);
    return;
  }
  const std::byte* raw = read_raw(w, name);
  for_chunks(n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = element(raw, t.dtype, i);
      if (type == GgmlType::kF32) {
        std::memcpy(out + i * 4, &v, 4);
      } else {
        const uint16_t h = type == GgmlType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(out + i * 2, &h, 2);
      }
    }
  });
}

// Fills a tensor's bytes `out` of `type`: fill(dst, t) writes the values as
// t, which is `type` itself for the float types and F32 staged here for a
// block type, quantised afterwards (so transforms see values, not blocks).
void produce_as(GgmlType type, std::span<std::byte> out, const std::function<void(std::byte*, GgmlType)>& fill) {
  if (type != GgmlType::kQ8_0) return fill(out.data(), type);
  const int64_t n = static_cast<int64_t>(out.size() / ggml_type_size(type)) * ggml_block_size(type);
  auto* staged = reinterpret_cast<float*>(staged_scratch.get(static_cast<size_t>(n) * sizeof(float)));
  fill(reinterpret_cast<std::byte*>(staged), GgmlType::kF32);
  // Whole blocks per chunk: a chunk's blocks start at its first value / 32.
  const int64_t block_bytes = static_cast<int64_t>(ggml_type_size(type));
  for_chunks(n / kQ8Block, int64_t{1} << 12, [&](int64_t b0, int64_t b1) {
    quantize_q8_0(staged + b0 * kQ8Block, (b1 - b0) * kQ8Block, out.data() + b0 * block_bytes);
  });
}

// Value heads of one GDN layer: hk key heads, r value heads per key head.
struct VHeads {
  int64_t hk = 1, r = 1;
  bool reorder() const { return r > 1; }
  // Grouped head g * r + j moves to tiled position j * hk + g.
  int64_t tiled(int64_t grouped) const { return (grouped % r) * hk + grouped / r; }
};

// Reorders `count` consecutive blocks of `block` bytes starting at `base`
// (block = one value head's rows, or one value head's columns in a row).
void tile_blocks(std::byte* base, size_t block, const VHeads& v) {
  const int64_t heads = v.hk * v.r;
  std::vector<std::byte> tmp(base, base + heads * block);
  for (int64_t h = 0; h < heads; ++h) std::memcpy(base + v.tiled(h) * block, tmp.data() + h * block, block);
}

// Declares the tensors; the producers it registers hold only the weight
// source, which outlives the write, never the Mapper.
struct Mapper {
  const ModelConfig& c;
  const WeightSource& w;
  GgufWriter& out;
  GgmlType matrices;  // BF16 or Q8_0

  // Rows whose length is not whole Q8_0 blocks fall back to F16, as the converter's do.
  GgmlType type_of(const std::string& gguf_name, const std::vector<int64_t>& ne) const {
    const bool f32 = ne.size() <= 1 || gguf_name.ends_with("_norm.weight") || !gguf_name.ends_with(".weight") ||
                     gguf_name.ends_with("ffn_gate_inp.weight") || gguf_name.ends_with("ffn_gate_inp_shexp.weight") ||
                     gguf_name.ends_with("ssm_conv1d.weight");
    if (f32) return GgmlType::kF32;
    return ne[0] % ggml_block_size(matrices) == 0 ? matrices : GgmlType::kF16;
  }

  // A tensor copied as is (2-D: ne = {cols, rows}), optionally transformed
  // in place after conversion.
  void copy(const std::string& src, const std::string& dst, std::vector<int64_t> ne,
            std::function<void(std::byte*, GgmlType)> transform = {}) {
    const TensorInfo& t = w.info(src);
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    if (n != t.shape.numel())
      fail(ErrorCode::kInternal, "GGUF {}: {} elements for {} of shape {}", dst, n, src, t.shape.str());
    const GgmlType type = type_of(dst, ne);
    out.add_tensor(dst, type, std::move(ne), [ws = &w, src, type, transform](std::span<std::byte> buf) {
      produce_as(type, buf, [&](std::byte* d, GgmlType t) {
        convert_into(*ws, src, t, d);
        if (transform) transform(d, t);
      });
    });
  }

  void matrix(const std::string& src, const std::string& dst) {
    const Shape& s = w.info(src).shape;
    copy(src, dst, {s[1], s[0]});
  }

  void norm_plus_one(const std::string& src, const std::string& dst) {
    copy(src, dst, {w.info(src).shape.numel()}, [n = w.info(src).shape.numel()](std::byte* p, GgmlType) {
      auto* f = reinterpret_cast<float*>(p);
      for (int64_t i = 0; i < n; ++i) f[i] += 1.0f;
    });
  }

  void attention(const std::string& p, const std::string& b) {
    matrix(p + "self_attn.q_proj.weight", b + "attn_q.weight");
    matrix(p + "self_attn.k_proj.weight", b + "attn_k.weight");
    matrix(p + "self_attn.v_proj.weight", b + "attn_v.weight");
    matrix(p + "self_attn.o_proj.weight", b + "attn_output.weight");
    norm_plus_one(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight");
    norm_plus_one(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight");
  }

  void linear_attention(const std::string& p, const std::string& b) {
    const int64_t H = c.hidden_size, Dv = c.linear_value_head_dim, K = c.linear_conv_kernel_dim;
    const VHeads v{c.linear_num_key_heads, c.linear_num_value_heads / c.linear_num_key_heads};
    const int64_t qk_rows = 2 * c.linear_key_dim();
    auto rows = [v](int64_t first_row, int64_t head_rows, int64_t cols) {
      return [=](std::byte* d, GgmlType t) {
        if (!v.reorder()) return;
        const size_t row_bytes = static_cast<size_t>(cols) * ggml_type_size(t);
        tile_blocks(d + first_row * row_bytes, head_rows * row_bytes, v);
      };
    };
    copy(p + "linear_attn.in_proj_qkv.weight", b + "attn_qkv.weight", {H, c.linear_conv_dim()}, rows(qk_rows, Dv, H));
    copy(p + "linear_attn.in_proj_z.weight", b + "attn_gate.weight", {H, c.linear_value_dim()}, rows(0, Dv, H));
    copy(p + "linear_attn.in_proj_b.weight", b + "ssm_beta.weight", {H, c.linear_num_value_heads}, rows(0, 1, H));
    copy(p + "linear_attn.in_proj_a.weight", b + "ssm_alpha.weight", {H, c.linear_num_value_heads}, rows(0, 1, H));
    copy(p + "linear_attn.conv1d.weight", b + "ssm_conv1d.weight", {K, c.linear_conv_dim()}, rows(qk_rows, Dv, K));
    const int64_t hv = c.linear_num_value_heads;
    copy(p + "linear_attn.A_log", b + "ssm_a", {hv}, [hv, r = rows(0, 1, 1)](std::byte* d, GgmlType t) {
      auto* f = reinterpret_cast<float*>(d);
      for (int64_t i = 0; i < hv; ++i) f[i] = -std::exp(f[i]);
      r(d, t);
    });
    copy(p + "linear_attn.dt_bias", b + "ssm_dt.bias", {hv}, rows(0, 1, 1));
    copy(p + "linear_attn.norm.weight", b + "ssm_norm.weight", {Dv});
    copy(p + "linear_attn.out_proj.weight", b + "ssm_out.weight", {c.linear_value_dim(), H},
         [v, H, Dv, cols = c.linear_value_dim()](std::byte* d, GgmlType t) {
           if (!v.reorder()) return;
           const size_t es = ggml_type_size(t);
           for (int64_t row = 0; row < H; ++row) tile_blocks(d + row * cols * es, Dv * es, v);
         });
  }

  // Experts as ggml 3-D tensors: gate/up ne = {H, I, E}, down ne = {I, H, E}.
  void experts(const std::string& p, const std::string& b) {
    const int64_t E = c.num_experts, I = c.moe_intermediate_size, H = c.hidden_size;
    const std::string fused = p + "mlp.experts.gate_up_proj";
    const GgmlType type = type_of("ffn_gate_exps.weight", {H, I, E});
    if (w.contains(fused)) {
      for (int part = 0; part < 2; ++part) {
        out.add_tensor(b + (part == 0 ? "ffn_gate_exps.weight" : "ffn_up_exps.weight"), type, {H, I, E},
                       [ws = &w, fused, part, E, I, H, type](std::span<std::byte> buf) {
                         produce_as(type, buf, [&](std::byte* d, GgmlType t) {
                           const size_t half = static_cast<size_t>(I * H) * ggml_type_size(t);
                           std::byte* all = fused_scratch.get(2 * static_cast<size_t>(E) * half);
                           convert_into(*ws, fused, t, all);
                           for (int64_t e = 0; e < E; ++e)
                             std::memcpy(d + e * half, all + (2 * e + part) * half, half);
                         });
                       });
      }
      copy(p + "mlp.experts.down_proj", b + "ffn_down_exps.weight", {I, H, E});
      return;
    }
    for (const char* proj : {"gate", "up", "down"}) {
      const std::string name = fmt::format("ffn_{}_exps.weight", proj);
      std::vector<int64_t> ne = std::string(proj) == "down" ? std::vector<int64_t>{I, H, E} : std::vector<int64_t>{H, I, E};
      const GgmlType type = type_of(name, ne);
      out.add_tensor(b + name, type, ne, [ws = &w, p, proj, E, each_n = I * H, type](std::span<std::byte> buf) {
        produce_as(type, buf, [&](std::byte* d, GgmlType t) {
          const size_t each = static_cast<size_t>(each_n) * ggml_type_size(t);
          for (int64_t e = 0; e < E; ++e)
            convert_into(*ws, fmt::format("{}mlp.experts.{}.{}_proj.weight", p, e, proj), t, d + e * each);
        });
      });
    }
  }

  void mlp(const std::string& p, const std::string& b) {
    if (!c.is_moe) {
      for (const char* proj : {"gate", "up", "down"})
        matrix(fmt::format("{}mlp.{}_proj.weight", p, proj), fmt::format("{}ffn_{}.weight", b, proj));
      return;
    }
    matrix(p + "mlp.gate.weight", b + "ffn_gate_inp.weight");
    experts(p, b);
    for (const char* proj : {"gate", "up", "down"})
      matrix(fmt::format("{}mlp.shared_expert.{}_proj.weight", p, proj), fmt::format("{}ffn_{}_shexp.weight", b, proj));
    copy(p + "mlp.shared_expert_gate.weight", b + "ffn_gate_inp_shexp.weight", {c.hidden_size});
  }

  void tensors() {
    matrix("embed_tokens.weight", "token_embd.weight");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const std::string p = fmt::format("layers.{}.", i), b = fmt::format("blk.{}.", i);
      norm_plus_one(p + "input_layernorm.weight", b + "attn_norm.weight");
      if (c.layer_types[static_cast<size_t>(i)] == LayerType::kFullAttention) attention(p, b);
      else linear_attention(p, b);
      norm_plus_one(p + "post_attention_layernorm.weight", b + "post_attention_norm.weight");
      mlp(p, b);
    }
    norm_plus_one("norm.weight", "output_norm.weight");
    if (!c.tie_word_embeddings) matrix("lm_head.weight", "output.weight");
  }
};

int64_t full_attention_interval(const ModelConfig& c) {
  int64_t interval = 0;
  for (size_t i = 0; i < c.layer_types.size(); ++i)
    if (c.layer_types[i] == LayerType::kFullAttention) {
      interval = static_cast<int64_t>(i) + 1;
      break;
    }
  if (interval == 0) fail(ErrorCode::kUnsupported, "GGUF export: the model has no full-attention layer");
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    const bool full = (static_cast<int64_t>(i) + 1) % interval == 0;
    if (full != (c.layer_types[i] == LayerType::kFullAttention))
      fail(ErrorCode::kUnsupported,
           "GGUF export: layer {} is {}, off llama.cpp's pattern of one full-attention layer every {}", i,
           layer_type_name(c.layer_types[i]), interval);
  }
  return interval;
}

}  // namespace

GgufOutType parse_gguf_outtype(const std::string& name) {
  if (name == "bf16") return GgufOutType::kBf16;
  if (name == "q8_0") return GgufOutType::kQ8_0;
  fail(ErrorCode::kInvalidArgument, "--outtype {}: expected bf16 or q8_0", name);
}

std::string qwen35_gguf_arch(const ModelConfig& c) {
  auto unsupported = [](const char* why) { fail(ErrorCode::kUnsupported, "GGUF export: {}", why); };
  if (c.quant.is_fp8()) unsupported("FP8 checkpoints are not exported (export the BF16 checkpoint)");
  if (c.linear_key_head_dim != c.linear_value_head_dim)
    unsupported("llama.cpp's qwen35 loader assumes linear_key_head_dim == linear_value_head_dim");
  if (c.linear_num_key_heads <= 0 || c.linear_num_value_heads % c.linear_num_key_heads != 0)
    unsupported("linear_num_value_heads must be a multiple of linear_num_key_heads");
  if (!c.attn_output_gate) unsupported("llama.cpp's qwen35 attention always has the output gate");
  if (c.rope_scaling_factor) unsupported("rope scaling is not exported");
  if (c.is_moe && !c.norm_topk_prob) unsupported("llama.cpp's qwen35moe always normalises the top-k weights");
  full_attention_interval(c);
  return c.is_moe ? "qwen35moe" : "qwen35";
}

void add_qwen35_model(const ModelConfig& c, const WeightSource& weights, const std::string& name, GgufWriter& out,
                      GgufOutType outtype) {
  const std::string arch = qwen35_gguf_arch(c);
  const bool q8 = outtype == GgufOutType::kQ8_0;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  out.add_string("general.architecture", arch);
  out.add_string("general.name", name);
  out.add_u32("general.file_type", q8 ? kFileTypeMostlyQ8_0 : kFileTypeMostlyBf16);
  out.add_u32("general.quantization_version", kQuantizationVersion);
  const std::string a = arch + ".";
  out.add_u32(a + "block_count", u32(c.num_hidden_layers));
  out.add_u32(a + "context_length", u32(c.max_position_embeddings));
  out.add_u32(a + "embedding_length", u32(c.hidden_size));
  if (!c.is_moe) out.add_u32(a + "feed_forward_length", u32(c.intermediate_size));
  out.add_u32(a + "attention.head_count", u32(c.num_attention_heads));
  out.add_u32(a + "attention.head_count_kv", u32(c.num_key_value_heads));
  out.add_f32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  out.add_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  out.add_u32(a + "attention.key_length", u32(c.head_dim));
  out.add_u32(a + "attention.value_length", u32(c.head_dim));
  out.add_u32(a + "rope.dimension_count", u32(c.rotary_dim));
  // Qwen3.5's interleaved multimodal rope; the converter's default sections
  // when the config has none. Text positions are equal on every axis, so the
  // sections do not change a text-only forward pass.
  std::vector<int32_t> sections{11, 11, 10, 0};
  if (!c.mrope_section.empty()) {
    sections.assign(4, 0);
    for (size_t i = 0; i < c.mrope_section.size() && i < 4; ++i) sections[i] = static_cast<int32_t>(c.mrope_section[i]);
  }
  out.add_i32_array(a + "rope.dimension_sections", sections);
  out.add_u32(a + "ssm.conv_kernel", u32(c.linear_conv_kernel_dim));
  out.add_u32(a + "ssm.state_size", u32(c.linear_key_head_dim));
  out.add_u32(a + "ssm.group_count", u32(c.linear_num_key_heads));
  out.add_u32(a + "ssm.time_step_rank", u32(c.linear_num_value_heads));
  out.add_u32(a + "ssm.inner_size", u32(c.linear_value_dim()));
  out.add_u32(a + "full_attention_interval", u32(full_attention_interval(c)));
  if (c.is_moe) {
    out.add_u32(a + "expert_count", u32(c.num_experts));
    out.add_u32(a + "expert_used_count", u32(c.num_experts_per_tok));
    out.add_u32(a + "expert_feed_forward_length", u32(c.moe_intermediate_size));
    out.add_u32(a + "expert_shared_feed_forward_length", u32(c.shared_expert_intermediate_size));
  }
  Mapper{c, weights, out, q8 ? GgmlType::kQ8_0 : GgmlType::kBF16}.tensors();
}

}  // namespace hyllm::gguf
