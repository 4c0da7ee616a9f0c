#include "model/loader/tensor_parallel.h"

#include <algorithm>
#include <cstring>

#include "util/counter_rng.h"
#include "util/status.h"

namespace hyllm {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

ShardRule replicated() { return ShardRule{}; }

// Every segment cut into tp.size pieces, the rank's own.
ShardRule split(int dim, const std::vector<int64_t>& extents, TensorParallel tp) {
  ShardRule r{dim, {}, 0};
  for (int64_t e : extents) r.segments.push_back({e, tp.size, tp.rank});
  return r;
}

// A segment of `heads` heads: split when there are at least as many heads as
// ranks, else each head held by size / heads consecutive ranks (the ones
// whose query or value heads read it).
ShardRule::Segment heads_segment(int64_t extent, int64_t heads, TensorParallel tp) {
  const int64_t parts = std::min<int64_t>(heads, tp.size);
  return {extent, parts, tp.rank * parts / tp.size};
}

// The rule of a weight (not a scale) by its name.
ShardRule weight_rule(const std::string& name, const Shape& shape, const ModelConfig& c, TensorParallel tp) {
  if (name == "embed_tokens.weight" || name == "lm_head.weight") {
    const int64_t v = shape[0];
    if (v % tp.size == 0) return split(0, {v}, tp);
    return ShardRule{0, {{v, tp.size, tp.rank}}, vocab_shard(v, tp).rows};
  }
  if (ends_with(name, ".self_attn.q_proj.weight")) return split(0, {shape[0]}, tp);
  if (ends_with(name, ".self_attn.k_proj.weight") || ends_with(name, ".self_attn.v_proj.weight"))
    return ShardRule{0, {heads_segment(shape[0], c.num_key_value_heads, tp)}, 0};
  if (ends_with(name, ".linear_attn.in_proj_qkv.weight") || ends_with(name, ".linear_attn.conv1d.weight")) {
    const int64_t kd = c.linear_key_dim(), vd = c.linear_value_dim();
    const ShardRule::Segment k = heads_segment(kd, c.linear_num_key_heads, tp);
    return ShardRule{0, {k, k, {vd, tp.size, tp.rank}}, 0};
  }
  if (ends_with(name, ".linear_attn.in_proj_z.weight") || ends_with(name, ".linear_attn.in_proj_b.weight") ||
      ends_with(name, ".linear_attn.in_proj_a.weight") || ends_with(name, ".linear_attn.A_log") ||
      ends_with(name, ".linear_attn.dt_bias") || ends_with(name, ".gate_proj.weight") ||
      ends_with(name, ".up_proj.weight"))
    return split(0, {shape[0]}, tp);
  if (ends_with(name, ".mlp.experts.gate_up_proj")) return split(1, {shape[1] / 2, shape[1] / 2}, tp);
  if (ends_with(name, ".self_attn.o_proj.weight") || ends_with(name, ".linear_attn.out_proj.weight") ||
      ends_with(name, ".down_proj.weight"))
    return split(1, {shape[1]}, tp);
  if (ends_with(name, ".mlp.experts.down_proj")) return split(2, {shape[2]}, tp);
  return replicated();
}

void check_divides(const std::string& name, const ShardRule& rule, TensorParallel tp) {
  for (const ShardRule::Segment& seg : rule.segments) {
    if (seg.extent % seg.parts != 0)
      fail(ErrorCode::kInvalidArgument, "tensor parallel size {}: {} has {} entries along dimension {}, which do "
           "not split into {} equal parts", tp.size, name, seg.extent, rule.dim, seg.parts);
  }
}

// A block-FP8 scale is cut with its weight, in whole blocks.
ShardRule scale_rule(const std::string& scale_name, const std::string& weight_name, const ShardRule& w,
                     const ModelConfig& c, TensorParallel tp) {
  if (w.replicated()) return w;
  if (w.padded_rows > 0)
    fail(ErrorCode::kInvalidArgument, "tensor parallel size {}: {} is block-FP8 and its vocabulary does not split "
         "evenly", tp.size, weight_name);
  const int64_t block = w.dim == 0 ? c.quant.weight_block_size[0] : c.quant.weight_block_size[1];
  ShardRule s = w;
  for (ShardRule::Segment& seg : s.segments) {
    const int64_t piece = seg.extent / seg.parts;
    if (piece % block != 0)
      fail(ErrorCode::kInvalidArgument, "tensor parallel size {}: {} would be cut into pieces of {} along dimension "
           "{}, not a multiple of its FP8 scale blocks of {} ({} cannot be split with it)", tp.size, weight_name,
           piece, w.dim, block, scale_name);
    seg.extent /= block;
  }
  return s;
}

// Copies the rank's part of a tensor of shape `shape` (bytes `src`) to dst.
void copy_shard(const ShardRule& rule, const Shape& shape, size_t elem, const std::byte* src, std::byte* dst) {
  int64_t outer = 1, inner = static_cast<int64_t>(elem);
  for (int d = 0; d < rule.dim; ++d) outer *= shape[d];
  for (int d = rule.dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  const int64_t extent = shape[rule.dim];
  for (int64_t o = 0; o < outer; ++o) {
    const std::byte* in = src + o * extent * inner;
    if (rule.padded_rows > 0) {
      const int64_t first = rule.segments[0].piece * rule.padded_rows;
      const int64_t have = std::clamp<int64_t>(extent - first, 0, rule.padded_rows);
      if (have > 0) std::memcpy(dst, in + first * inner, static_cast<size_t>(have * inner));
      std::memset(dst + have * inner, 0, static_cast<size_t>((rule.padded_rows - have) * inner));
      dst += rule.padded_rows * inner;
      continue;
    }
    int64_t seg_start = 0;
    for (const ShardRule::Segment& seg : rule.segments) {
      const int64_t piece = seg.extent / seg.parts;
      std::memcpy(dst, in + (seg_start + seg.piece * piece) * inner, static_cast<size_t>(piece * inner));
      dst += piece * inner;
      seg_start += seg.extent;
    }
  }
}

class ShardedWeights final : public WeightSource {
 public:
  ShardedWeights(const WeightSource& full, const ModelConfig& config, TensorParallel tp) : full_(full), tp_(tp) {
    for (const TensorInfo& t : full.tensors()) {
      ShardRule rule = tensor_parallel_rule(full, config, t.name, tp);
      TensorInfo local = t;
      if (!rule.replicated()) {
        local.shape[rule.dim] = rule.local_extent();
        local.nbytes = static_cast<size_t>(local.shape.numel()) * dtype_size(t.dtype);
        local.origin = fmt::format("{} (rank {} of {})", t.origin, tp.rank, tp.size);
      }
      infos_.push_back(std::move(local));
      rules_.push_back(std::move(rule));
    }
    index_tensors();
  }

  const std::vector<TensorInfo>& tensors() const override { return infos_; }

  void read(const std::string& name, void* host_dst) const override {
    const size_t i = position(name);
    const ShardRule& rule = rules_[i];
    const TensorInfo& whole = full_.info(name);
    if (rule.replicated()) return full_.read(name, host_dst);
    std::vector<std::byte> buffer;
    const std::byte* src = nullptr;
    if (auto m = full_.mapped(name)) {
      src = m->data();
    } else {
      buffer.resize(whole.nbytes);
      full_.read(name, buffer.data());
      src = buffer.data();
    }
    copy_shard(rule, whole.shape, dtype_size(whole.dtype), src, static_cast<std::byte*>(host_dst));
  }

  std::optional<std::span<const std::byte>> mapped(const std::string& name) const override {
    const size_t i = position(name);
    const ShardRule& rule = rules_[i];
    auto m = full_.mapped(name);
    if (!m || rule.replicated()) return m;
    if (rule.dim != 0 || rule.segments.size() != 1 || rule.padded_rows > 0) return std::nullopt;
    const size_t part = infos_[i].nbytes;
    return m->subspan(static_cast<size_t>(rule.segments[0].piece) * part, part);
  }

  std::optional<GeneratedFill> generated(const std::string& name) const override {
    auto fill = full_.generated(name);
    if (fill && !rules_[position(name)].replicated())
      fill->stream = rng::mix(fill->stream ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(tp_.rank + 1)));
    return fill;
  }

  std::string describe() const override {
    return fmt::format("{}, rank {} of {}", full_.describe(), tp_.rank, tp_.size);
  }
  void prefetch(const std::string& name) const override { full_.prefetch(name); }

 private:
  size_t position(const std::string& name) const {
    const TensorInfo& t = info(name);
    return static_cast<size_t>(&t - infos_.data());
  }

  const WeightSource& full_;
  TensorParallel tp_;
  std::vector<TensorInfo> infos_;
  std::vector<ShardRule> rules_;
};

int64_t divided(int64_t value, const char* field, TensorParallel tp) {
  if (value % tp.size != 0)
    fail(ErrorCode::kInvalidArgument, "tensor parallel size {} does not divide the model's {} ({})", tp.size, field,
         value);
  return value / tp.size;
}

// Heads that every rank reads: split when at least as many as the ranks,
// else replicated (one per rank, each held by size / heads ranks).
int64_t divided_or_replicated(int64_t heads, const char* field, TensorParallel tp) {
  if (heads >= tp.size) return divided(heads, field, tp);
  if (tp.size % heads != 0)
    fail(ErrorCode::kInvalidArgument, "tensor parallel size {} is not a multiple of the model's {} ({}), so they "
         "cannot be replicated evenly", tp.size, field, heads);
  return 1;
}

}  // namespace

int64_t ShardRule::local_extent() const {
  if (padded_rows > 0) return padded_rows;
  int64_t n = 0;
  for (const Segment& s : segments) n += s.extent / s.parts;
  return n;
}

VocabShard vocab_shard(int64_t vocab_size, TensorParallel tp) {
  const int64_t rows = (vocab_size + tp.size - 1) / tp.size;
  return {rows * tp.rank, rows};
}

ShardRule tensor_parallel_rule(const WeightSource& full, const ModelConfig& config, const std::string& name,
                               TensorParallel tp) {
  if (tp.size == 1) return replicated();
  if (ends_with(name, ".weight_scale") || ends_with(name, ".input_scale")) return replicated();
  constexpr std::string_view kBlockScale = ".weight_scale_inv";
  if (ends_with(name, kBlockScale)) {
    const std::string weight = name.substr(0, name.size() - kBlockScale.size()) + ".weight";
    const ShardRule w = tensor_parallel_rule(full, config, weight, tp);
    return scale_rule(name, weight, w, config, tp);
  }
  ShardRule rule = weight_rule(name, full.info(name).shape, config, tp);
  if (!rule.replicated() && rule.padded_rows == 0) check_divides(name, rule, tp);
  return rule;
}

ModelConfig tensor_parallel_config(const ModelConfig& config, TensorParallel tp) {
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size)
    fail(ErrorCode::kInvalidArgument, "tensor parallel rank {} of {}", tp.rank, tp.size);
  ModelConfig c = config;
  if (tp.size == 1) return c;
  c.num_attention_heads = divided(config.num_attention_heads, "num_attention_heads", tp);
  c.num_key_value_heads = divided_or_replicated(config.num_key_value_heads, "num_key_value_heads", tp);
  if (config.num_linear_attention_layers() > 0) {
    c.linear_num_key_heads = divided_or_replicated(config.linear_num_key_heads, "linear_num_key_heads", tp);
    c.linear_num_value_heads = divided(config.linear_num_value_heads, "linear_num_value_heads", tp);
  }
  if (config.is_moe) {
    c.moe_intermediate_size = divided(config.moe_intermediate_size, "moe_intermediate_size", tp);
    if (config.shared_expert_intermediate_size > 0)
      c.shared_expert_intermediate_size =
          divided(config.shared_expert_intermediate_size, "shared_expert_intermediate_size", tp);
  } else {
    c.intermediate_size = divided(config.intermediate_size, "intermediate_size", tp);
  }
  return c;
}

std::unique_ptr<WeightSource> shard_weights(const WeightSource& full, const ModelConfig& config, TensorParallel tp) {
  return std::make_unique<ShardedWeights>(full, config, tp);
}

}  // namespace hyllm
