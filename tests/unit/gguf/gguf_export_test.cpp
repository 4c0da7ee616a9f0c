// What `hyllm export-gguf` writes, read back with an independent reader of
// the GGUF v3 layout: the header, the metadata llama.cpp's qwen35 loader
// requires, every tensor's name, ggml shape and type against the shapes
// llama.cpp's model code creates (src/models/qwen35*.cpp of the pinned
// snapshot), and values that the export transforms (norms + 1, ssm_a =
// -exp(A_log), the value-head reorder, the split of fused experts).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <variant>

#include "gguf/ggml_quants.h"
#include "gguf/gguf_vocab.h"
#include "gguf/gguf_writer.h"
#include "gguf/qwen35_gguf.h"
#include "model/config/model_config.h"
#include "model/loader/dummy_weights.h"
#include "tensor/float_conversions.h"
#include "util/status.h"

namespace hyllm::gguf {
namespace {

namespace fs = std::filesystem;

struct ReadTensor {
  std::vector<int64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
};

// A GGUF v3 reader written from the format description, not from the writer.
struct ReadFile {
  uint32_t version = 0;
  std::map<std::string, std::string> strings;
  std::map<std::string, uint64_t> ints;
  std::map<std::string, float> floats;
  std::map<std::string, std::vector<std::string>> string_arrays;
  std::map<std::string, std::vector<int64_t>> int_arrays;
  std::map<std::string, ReadTensor> tensors;
  std::vector<std::string> tensor_order;
  std::string bytes;
  size_t data_start = 0;

  explicit ReadFile(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
    size_t pos = 0;
    auto take = [&](size_t n) {
      if (pos + n > bytes.size()) throw std::runtime_error("truncated GGUF");
      const char* s = bytes.data() + pos;
      pos += n;
      return s;
    };
    auto u32 = [&] { uint32_t v; std::memcpy(&v, take(4), 4); return v; };
    auto u64 = [&] { uint64_t v; std::memcpy(&v, take(8), 8); return v; };
    auto str = [&] { uint64_t n = u64(); return std::string(take(n), n); };
    if (std::string(take(4), 4) != "GGUF") throw std::runtime_error("bad magic");
    version = u32();
    const uint64_t n_tensors = u64(), n_kv = u64();
    for (uint64_t k = 0; k < n_kv; ++k) {
      const std::string key = str();
      const uint32_t type = u32();
      auto scalar = [&](uint32_t t) -> std::variant<uint64_t, int64_t, float, std::string> {
        switch (t) {
          case 0: case 7: return static_cast<uint64_t>(static_cast<uint8_t>(*take(1)));
          case 4: return static_cast<uint64_t>(u32());
          case 5: { int32_t v; std::memcpy(&v, take(4), 4); return static_cast<int64_t>(v); }
          case 6: { float f; std::memcpy(&f, take(4), 4); return f; }
          case 8: return str();
          case 10: return u64();
          default: throw std::runtime_error("unexpected value type " + std::to_string(t));
        }
      };
      if (type == 9) {
        const uint32_t et = u32();
        const uint64_t n = u64();
        for (uint64_t i = 0; i < n; ++i) {
          auto v = scalar(et);
          if (auto* s = std::get_if<std::string>(&v)) string_arrays[key].push_back(*s);
          else if (auto* x = std::get_if<int64_t>(&v)) int_arrays[key].push_back(*x);
          else if (auto* u = std::get_if<uint64_t>(&v)) int_arrays[key].push_back(static_cast<int64_t>(*u));
        }
      } else {
        auto v = scalar(type);
        if (auto* s = std::get_if<std::string>(&v)) strings[key] = *s;
        else if (auto* f = std::get_if<float>(&v)) floats[key] = *f;
        else if (auto* u = std::get_if<uint64_t>(&v)) ints[key] = *u;
        else ints[key] = static_cast<uint64_t>(std::get<int64_t>(v));
      }
    }
    for (uint64_t t = 0; t < n_tensors; ++t) {
      const std::string name = str();
      ReadTensor rt;
      const uint32_t dims = u32();
      for (uint32_t d = 0; d < dims; ++d) rt.ne.push_back(static_cast<int64_t>(u64()));
      rt.type = u32();
      rt.offset = u64();
      tensors[name] = rt;
      tensor_order.push_back(name);
    }
    data_start = (pos + 31) / 32 * 32;
  }

  const char* data(const std::string& name) const { return bytes.data() + data_start + tensors.at(name).offset; }
  float f32(const std::string& name, int64_t i) const {
    float f;
    std::memcpy(&f, data(name) + i * 4, 4);
    return f;
  }
  uint16_t bf16(const std::string& name, int64_t i) const {
    uint16_t h;
    std::memcpy(&h, data(name) + i * 2, 2);
    return h;
  }
};

ModelConfig tiny_config(bool moe) {
  // Two key heads, four value heads (r = 2: the reorder is exercised), one
  // full-attention layer in four, Dk == Dv.
  const std::string text = std::string(R"({"architectures": [")") +
                           (moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM") + R"("], "model_type": ")" +
                           (moe ? "qwen3_5_moe_text" : "qwen3_5_text") + R"(",
    "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 300, "head_dim": 32,
    "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 96,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "max_position_embeddings": 512,
    "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [2, 1, 1], "mrope_interleaved": true},
    "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "dtype": "bfloat16"})";
  fs::path dir = fs::temp_directory_path() / ("hyllm-gguf-cfg-" + std::to_string(::getpid()) + (moe ? "m" : "d"));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  ModelConfig c = load_model_config(dir);
  fs::remove_all(dir);
  return c;
}

fs::path export_tiny(const ModelConfig& c, const DummyWeights& w, const std::string& tag,
                     GgufOutType outtype = GgufOutType::kBf16) {
  GgufWriter out;
  add_qwen35_model(c, w, "tiny", out, outtype);
  write_vocab(byte_level_vocab(c.vocab_size), out);
  fs::path p = fs::temp_directory_path() / ("hyllm-gguf-" + tag + "-" + std::to_string(::getpid()) + ".gguf");
  out.write(p);
  return p;
}

float source_f32(const DummyWeights& w, const std::string& name, int64_t i) {
  std::vector<std::byte> raw(w.info(name).nbytes);
  w.read(name, raw.data());
  if (w.info(name).dtype == DType::kF32) {
    float f;
    std::memcpy(&f, raw.data() + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, raw.data() + i * 2, 2);
  return bf16_to_f32(h);
}

uint16_t source_bf16(const DummyWeights& w, const std::string& name, int64_t i) {
  std::vector<std::byte> raw(w.info(name).nbytes);
  w.read(name, raw.data());
  uint16_t h;
  std::memcpy(&h, raw.data() + i * 2, 2);
  return h;
}

constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30;

TEST(GgufExport, DenseHeaderMetadataAndTensorTable) {
  const ModelConfig c = tiny_config(false);
  DummyWeights w(c, 7);
  const fs::path p = export_tiny(c, w, "dense");
  ReadFile f(p);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.strings.at("general.architecture"), "qwen35");
  EXPECT_EQ(f.ints.at("qwen35.block_count"), 4u);
  EXPECT_EQ(f.ints.at("qwen35.embedding_length"), 64u);
  EXPECT_EQ(f.ints.at("qwen35.feed_forward_length"), 96u);
  EXPECT_EQ(f.ints.at("qwen35.attention.head_count"), 2u);
  EXPECT_EQ(f.ints.at("qwen35.attention.head_count_kv"), 1u);
  EXPECT_EQ(f.ints.at("qwen35.attention.key_length"), 32u);
  EXPECT_EQ(f.ints.at("qwen35.rope.dimension_count"), 8u);
  EXPECT_EQ(f.int_arrays.at("qwen35.rope.dimension_sections"), (std::vector<int64_t>{2, 1, 1, 0}));
  EXPECT_FLOAT_EQ(f.floats.at("qwen35.rope.freq_base"), 1e6f);
  EXPECT_EQ(f.ints.at("qwen35.ssm.state_size"), 16u);
  EXPECT_EQ(f.ints.at("qwen35.ssm.group_count"), 2u);
  EXPECT_EQ(f.ints.at("qwen35.ssm.time_step_rank"), 4u);
  EXPECT_EQ(f.ints.at("qwen35.ssm.inner_size"), 64u);
  EXPECT_EQ(f.ints.at("qwen35.ssm.conv_kernel"), 4u);
  EXPECT_EQ(f.ints.at("qwen35.full_attention_interval"), 4u);
  EXPECT_EQ(f.strings.at("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.string_arrays.at("tokenizer.ggml.tokens").size(), 300u);
  EXPECT_EQ(f.int_arrays.at("tokenizer.ggml.token_type").size(), 300u);

  // Shapes as llama.cpp's qwen35 load_arch_tensors creates them (ggml order).
  const int64_t H = 64, V = 300, F = 96, conv = 2 * 32 + 64;
  const std::map<std::string, std::pair<std::vector<int64_t>, uint32_t>> expected = {
      {"token_embd.weight", {{H, V}, kBF16}},         {"output.weight", {{H, V}, kBF16}},
      {"output_norm.weight", {{H}, kF32}},            {"blk.0.attn_norm.weight", {{H}, kF32}},
      {"blk.0.post_attention_norm.weight", {{H}, kF32}},
      {"blk.0.attn_qkv.weight", {{H, conv}, kBF16}},  {"blk.0.attn_gate.weight", {{H, 64}, kBF16}},
      {"blk.0.ssm_conv1d.weight", {{4, conv}, kF32}}, {"blk.0.ssm_dt.bias", {{4}, kF32}},
      {"blk.0.ssm_a", {{4}, kF32}},                   {"blk.0.ssm_beta.weight", {{H, 4}, kBF16}},
      {"blk.0.ssm_alpha.weight", {{H, 4}, kBF16}},    {"blk.0.ssm_norm.weight", {{16}, kF32}},
      {"blk.0.ssm_out.weight", {{64, H}, kBF16}},     {"blk.0.ffn_gate.weight", {{H, F}, kBF16}},
      {"blk.0.ffn_up.weight", {{H, F}, kBF16}},       {"blk.0.ffn_down.weight", {{F, H}, kBF16}},
      {"blk.3.attn_q.weight", {{H, 32 * 2 * 2}, kBF16}}, {"blk.3.attn_k.weight", {{H, 32}, kBF16}},
      {"blk.3.attn_v.weight", {{H, 32}, kBF16}},      {"blk.3.attn_output.weight", {{64, H}, kBF16}},
      {"blk.3.attn_q_norm.weight", {{32}, kF32}},     {"blk.3.attn_k_norm.weight", {{32}, kF32}},
  };
  for (const auto& [name, want] : expected) {
    ASSERT_TRUE(f.tensors.count(name)) << name;
    EXPECT_EQ(f.tensors.at(name).ne, want.first) << name;
    EXPECT_EQ(f.tensors.at(name).type, want.second) << name;
  }
  // 3 GDN layers x 14 tensors + 1 attention layer x 11 + embd, output, output_norm.
  EXPECT_EQ(f.tensors.size(), 3u * 14 + 11 + 3);
  for (const auto& [name, t] : f.tensors) EXPECT_EQ(t.offset % 32, 0u) << name;

  // Values: bit-exact BF16 copies, +1 norms, -exp(A_log), the value-head reorder.
  EXPECT_EQ(f.bf16("token_embd.weight", 5 * H + 3), source_bf16(w, "embed_tokens.weight", 5 * H + 3));
  EXPECT_FLOAT_EQ(f.f32("output_norm.weight", 9), 1.0f + source_f32(w, "norm.weight", 9));
  EXPECT_FLOAT_EQ(f.f32("blk.0.ssm_norm.weight", 2), source_f32(w, "layers.0.linear_attn.norm.weight", 2));
  // Grouped value head g * r + j goes to tiled position j * Hk + g (Hk = 2, r = 2):
  // 0 -> 0, 1 -> 2, 2 -> 1, 3 -> 3.
  const int64_t tiled_of[4] = {0, 2, 1, 3};
  for (int64_t h = 0; h < 4; ++h) {
    EXPECT_FLOAT_EQ(f.f32("blk.0.ssm_a", tiled_of[h]), -std::exp(source_f32(w, "layers.0.linear_attn.A_log", h)));
    EXPECT_FLOAT_EQ(f.f32("blk.0.ssm_dt.bias", tiled_of[h]), source_f32(w, "layers.0.linear_attn.dt_bias", h));
    EXPECT_EQ(f.bf16("blk.0.ssm_beta.weight", tiled_of[h] * H + 7),
              source_bf16(w, "layers.0.linear_attn.in_proj_b.weight", h * H + 7));
    // V rows of qkv start after the 2 * 32 query/key rows; 16 rows per head.
    const int64_t row_in = 64 + h * 16 + 5, row_out = 64 + tiled_of[h] * 16 + 5;
    EXPECT_EQ(f.bf16("blk.0.attn_qkv.weight", row_out * H + 1),
              source_bf16(w, "layers.0.linear_attn.in_proj_qkv.weight", row_in * H + 1));
    EXPECT_FLOAT_EQ(f.f32("blk.0.ssm_conv1d.weight", row_out * 4 + 2),
                    source_f32(w, "layers.0.linear_attn.conv1d.weight", row_in * 4 + 2));
    // out_proj columns: row 3, column 4 of value head h.
    EXPECT_EQ(f.bf16("blk.0.ssm_out.weight", 3 * 64 + tiled_of[h] * 16 + 4),
              source_bf16(w, "layers.0.linear_attn.out_proj.weight", 3 * 64 + h * 16 + 4));
  }
  // Query/key rows are not reordered.
  EXPECT_EQ(f.bf16("blk.0.attn_qkv.weight", 40 * H), source_bf16(w, "layers.0.linear_attn.in_proj_qkv.weight", 40 * H));
  fs::remove(p);
}

TEST(GgufExport, MoeSplitsFusedExperts) {
  const ModelConfig c = tiny_config(true);
  DummyWeights w(c, 3);
  const fs::path p = export_tiny(c, w, "moe");
  ReadFile f(p);
  EXPECT_EQ(f.strings.at("general.architecture"), "qwen35moe");
  EXPECT_EQ(f.ints.at("qwen35moe.expert_count"), 4u);
  EXPECT_EQ(f.ints.at("qwen35moe.expert_used_count"), 2u);
  EXPECT_EQ(f.ints.at("qwen35moe.expert_feed_forward_length"), 32u);
  EXPECT_EQ(f.ints.at("qwen35moe.expert_shared_feed_forward_length"), 48u);
  EXPECT_FALSE(f.ints.count("qwen35moe.feed_forward_length"));
  const int64_t H = 64, I = 32, E = 4;
  EXPECT_EQ(f.tensors.at("blk.1.ffn_gate_inp.weight").ne, (std::vector<int64_t>{H, E}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_gate_inp.weight").type, kF32);
  EXPECT_EQ(f.tensors.at("blk.1.ffn_gate_exps.weight").ne, (std::vector<int64_t>{H, I, E}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_up_exps.weight").ne, (std::vector<int64_t>{H, I, E}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_down_exps.weight").ne, (std::vector<int64_t>{I, H, E}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_gate_inp_shexp.weight").ne, (std::vector<int64_t>{H}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_gate_shexp.weight").ne, (std::vector<int64_t>{H, 48}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_down_shexp.weight").ne, (std::vector<int64_t>{48, H}));
  // gate_up_proj [E, 2I, H]: expert e's gate rows then its up rows.
  const std::string fused = "layers.1.mlp.experts.gate_up_proj";
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(f.bf16("blk.1.ffn_gate_exps.weight", (e * I + 3) * H + 2), source_bf16(w, fused, (e * 2 * I + 3) * H + 2));
    EXPECT_EQ(f.bf16("blk.1.ffn_up_exps.weight", (e * I + 3) * H + 2),
              source_bf16(w, fused, (e * 2 * I + I + 3) * H + 2));
  }
  fs::remove(p);
}

// ggml's Q8_0 arithmetic on hand-made blocks: d = max|x| / 127 as f16,
// codes rounded half away from zero, a zero block all zeros.
TEST(GgufQ8_0, QuantisesAsGgml) {
  std::vector<float> x(3 * kQ8Block, 0.0f);
  x[0] = 127.0f;  // block 0: d = 1, so the codes are the values rounded
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.49f;
  x[5] = 126.5f;
  for (int64_t j = 0; j < kQ8Block; ++j) x[kQ8Block + j] = 0.25f * static_cast<float>(j - 16);  // block 1: max 4
  std::vector<std::byte> q(3 * (2 + kQ8Block));
  quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), q.data());
  auto code = [&](int64_t i) { return static_cast<int8_t>(q[(i / kQ8Block) * 34 + 2 + i % kQ8Block]); };
  auto scale = [&](int64_t b) {
    uint16_t h;
    std::memcpy(&h, q.data() + b * 34, 2);
    return f16_to_f32(h);
  };
  EXPECT_EQ(scale(0), 1.0f);
  EXPECT_EQ(code(0), 127);
  EXPECT_EQ(code(1), 3);
  EXPECT_EQ(code(2), -3);
  EXPECT_EQ(code(3), 1);
  EXPECT_EQ(code(4), 0);
  EXPECT_EQ(code(5), 127);
  EXPECT_EQ(scale(1), f16_to_f32(f32_to_f16(4.0f / 127.0f)));
  EXPECT_EQ(code(kQ8Block), -127);  // -4
  EXPECT_EQ(code(kQ8Block + 16), 0);
  EXPECT_EQ(code(kQ8Block + 17), static_cast<int8_t>(std::round(0.25f * (1.0f / (4.0f / 127.0f)))));
  EXPECT_EQ(scale(2), 0.0f);
  for (int64_t j = 0; j < kQ8Block; ++j) EXPECT_EQ(code(2 * kQ8Block + j), 0);
  // Dequantised values lie within half a step (plus d's f16 rounding) of the input.
  for (int64_t i = 0; i < 2 * kQ8Block; ++i) {
    const float d = scale(i / kQ8Block);
    EXPECT_LE(std::fabs(dequantize_q8_0(q.data(), i) - x[static_cast<size_t>(i)]), 0.5f * d + 127.0f * d / 1024.0f)
        << i;
  }
  x[7] = std::nanf("");
  EXPECT_THROW(quantize_q8_0(x.data(), kQ8Block, q.data()), Error);
  EXPECT_THROW(quantize_q8_0(x.data(), 33, q.data()), Error);
}

// --outtype q8_0: every matrix the BF16 export writes as BF16 is written as
// ggml's Q8_0 of exactly those values (after the export's transforms: the
// value-head reorders, the split of fused experts), the F32 tensors are the
// same bytes, and the file type says Q8_0.
TEST(GgufExport, Q8_0OfTheBf16ExportsMatrices) {
  for (bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "moe" : "dense");
    const ModelConfig c = tiny_config(moe);
    DummyWeights w(c, 11);
    const fs::path pb = export_tiny(c, w, moe ? "q8m-bf16" : "q8d-bf16");
    const fs::path pq = export_tiny(c, w, moe ? "q8m-q8" : "q8d-q8", GgufOutType::kQ8_0);
    ReadFile fb(pb), fq(pq);
    EXPECT_EQ(fb.ints.at("general.file_type"), 32u);
    EXPECT_EQ(fq.ints.at("general.file_type"), 7u);
    ASSERT_EQ(fq.tensor_order, fb.tensor_order);
    int quantised = 0, fallbacks = 0;
    for (const std::string& name : fb.tensor_order) {
      const ReadTensor& tb = fb.tensors.at(name);
      const ReadTensor& tq = fq.tensors.at(name);
      EXPECT_EQ(tq.ne, tb.ne) << name;
      int64_t n = 1;
      for (int64_t d : tb.ne) n *= d;
      if (tb.type == kF32) {
        EXPECT_EQ(tq.type, kF32) << name;
        EXPECT_EQ(std::memcmp(fq.data(name), fb.data(name), static_cast<size_t>(n) * 4), 0) << name;
        continue;
      }
      ASSERT_EQ(tb.type, kBF16) << name;
      std::vector<float> values(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = bf16_to_f32(fb.bf16(name, i));
      if (tb.ne[0] % kQ8Block != 0) {  // the converter's fallback: F16
        EXPECT_EQ(tq.type, kF16) << name;
        for (int64_t i = 0; i < n; i += 7) {
          uint16_t h;
          std::memcpy(&h, fq.data(name) + i * 2, 2);
          EXPECT_EQ(h, f32_to_f16(values[static_cast<size_t>(i)])) << name << " " << i;
        }
        ++fallbacks;
        continue;
      }
      EXPECT_EQ(tq.type, kQ8_0) << name;
      std::vector<std::byte> want(static_cast<size_t>(n / kQ8Block * 34));
      quantize_q8_0(values.data(), n, want.data());
      EXPECT_EQ(std::memcmp(fq.data(name), want.data(), want.size()), 0) << name;
      ++quantised;
    }
    EXPECT_GT(quantised, moe ? 20 : 15);
    if (moe) {
      EXPECT_EQ(fq.tensors.at("blk.1.ffn_gate_exps.weight").type, kQ8_0);
      EXPECT_EQ(fallbacks, 4);  // the shared experts' down projections: rows of 48
    } else {
      EXPECT_EQ(fallbacks, 0);
    }
    fs::remove(pb);
    fs::remove(pq);
  }
  EXPECT_EQ(parse_gguf_outtype("q8_0"), GgufOutType::kQ8_0);
  EXPECT_THROW(parse_gguf_outtype("q4_0"), Error);
}

TEST(GgufExport, RefusesWhatLlamaCppCannotLoad) {
  ModelConfig c = tiny_config(false);
  c.linear_value_head_dim = 32;
  EXPECT_THROW(qwen35_gguf_arch(c), Error);
  c = tiny_config(false);
  c.layer_types[2] = LayerType::kFullAttention;  // full layers at 2 and 3: no interval fits
  EXPECT_THROW(qwen35_gguf_arch(c), Error);
  EXPECT_THROW(byte_level_vocab(100), Error);
}

// The embedded model's tokenizer: Qwen3.5's split regex, every id placed.
TEST(GgufExport, EmbeddedModelTokenizer) {
  const fs::path dir = fs::path(HYLLM_SOURCE_DIR) / "models/hyllm-tiny";
  const ModelConfig c = load_model_config(dir);
  const GgufVocab v = read_hf_vocab(dir, c.vocab_size);
  EXPECT_EQ(v.pre, "qwen35");
  EXPECT_EQ(static_cast<int64_t>(v.tokens.size()), c.vocab_size);
  EXPECT_EQ(v.tokens[8168], "<|im_end|>");
  EXPECT_EQ(v.types[8168], static_cast<int32_t>(TokenType::kControl));
  EXPECT_GT(v.merges.size(), 1000u);
  EXPECT_FALSE(v.add_bos);
  ASSERT_TRUE(v.chat_template.has_value());
  EXPECT_THROW(read_hf_vocab(dir, 100), Error);  // ids beyond the vocab size
}

}  // namespace
}  // namespace hyllm::gguf
