#include "bench/roofline.h"

#include <algorithm>
#include <cmath>

namespace hyllm::bench {
namespace {

struct LayerParams {
  double gdn = 0, attention = 0, dense_mlp = 0, expert = 0, shared_expert = 0, router = 0;
};

LayerParams layer_params(const ModelConfig& c) {
  const double H = static_cast<double>(c.hidden_size);
  LayerParams p;
  p.gdn = (static_cast<double>(c.linear_conv_dim()) + static_cast<double>(c.linear_value_dim()) +
           2.0 * static_cast<double>(c.linear_num_value_heads)) * H +
          H * static_cast<double>(c.linear_value_dim());
  const double kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  p.attention = (static_cast<double>(c.q_proj_rows()) + 2.0 * kv) * H +
                H * static_cast<double>(c.num_attention_heads * c.head_dim);
  p.dense_mlp = 3.0 * static_cast<double>(c.intermediate_size) * H;
  p.expert = 3.0 * static_cast<double>(c.moe_intermediate_size) * H;
  p.shared_expert = 3.0 * static_cast<double>(c.shared_expert_intermediate_size) * H;
  p.router = static_cast<double>(c.num_experts) * H + H;
  return p;
}

}  // namespace

DecodeTraffic decode_traffic(const ModelConfig& c, int batch, int context_len) {
  const LayerParams p = layer_params(c);
  const double wb = c.quant.is_fp8() ? 1.0 : 2.0;
  const double B = std::max(batch, 1);
  DecodeTraffic t;
  double linear = c.num_linear_attention_layers() * p.gdn + c.num_full_attention_layers() * p.attention;
  if (c.is_moe) {
    const double E = static_cast<double>(c.num_experts), k = static_cast<double>(c.num_experts_per_tok);
    const double touched = E * (1.0 - std::pow(1.0 - k / E, B));
    linear += c.num_hidden_layers * (touched * p.expert + p.shared_expert);
    t.linear_weight_bytes += c.num_hidden_layers * p.router * 2.0;  // the router stays BF16
  } else {
    linear += c.num_hidden_layers * p.dense_mlp;
  }
  t.linear_weight_bytes += linear * wb;
  t.lm_head_bytes = static_cast<double>(c.vocab_size * c.hidden_size) * 2.0;
  const double recurrent = static_cast<double>(c.linear_num_value_heads * c.linear_key_head_dim *
                                               c.linear_value_head_dim) * 4.0;
  const double conv = static_cast<double>(c.linear_conv_dim() * (c.linear_conv_kernel_dim - 1)) * 2.0;
  t.state_bytes = 2.0 * B * c.num_linear_attention_layers() * (recurrent + conv);
  t.kv_bytes = B * context_len * c.num_full_attention_layers() * 2.0 *
               static_cast<double>(c.num_key_value_heads * c.head_dim) * 2.0;
  return t;
}

double active_params_per_token(const ModelConfig& c) {
  const LayerParams p = layer_params(c);
  double n = c.num_linear_attention_layers() * p.gdn + c.num_full_attention_layers() * p.attention;
  if (c.is_moe)
    n += c.num_hidden_layers * (static_cast<double>(c.num_experts_per_tok) * p.expert + p.shared_expert + p.router);
  else
    n += c.num_hidden_layers * p.dense_mlp;
  return n;
}

Floors compute_floors(const ModelConfig& c, const GpuCeilings& gpu, int batch, int prompt_len, int output_len) {
  Floors f;
  const int context = prompt_len + output_len / 2;
  f.decode_step_s = decode_traffic(c, batch, context).total() / gpu.bandwidth_bytes_per_s;
  f.output_tok_per_s = std::max(batch, 1) / f.decode_step_s;
  const double T = prompt_len;
  double flops = 2.0 * active_params_per_token(c) * T;
  // Causal attention: QK^T and PV over half the square on average.
  flops += 2.0 * T * T * static_cast<double>(c.num_attention_heads * c.head_dim) * c.num_full_attention_layers();
  const double compute_s = flops / (c.quant.is_fp8() ? gpu.fp8_flops : gpu.bf16_flops);
  // Prefill also reads every weight at least once (all experts for a long MoE prompt).
  DecodeTraffic weights = decode_traffic(c, std::max(prompt_len, 1), 0);
  const double read_s = (weights.linear_weight_bytes + weights.lm_head_bytes) / gpu.bandwidth_bytes_per_s;
  f.prefill_s = std::max(compute_s, read_s);
  return f;
}

}  // namespace hyllm::bench
