// Activation ranges for static (ModelOpt) FP8: the BF16 model runs once over
// the calibration tokens as one sequence and every Linear reports its input.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/layers/linear.h"
#include "model/qwen3_5.h"

namespace hyllm {

namespace {

DeviceBuffer i32_device(Backend& be, const std::vector<int32_t>& v, Shape shape) {
  DeviceBuffer b(be, DType::kI32, shape);
  be.copy_to_device(b.data(), v.data(), v.size() * 4);
  return b;
}

}  // namespace

std::map<std::string, float> calibrate_linear_inputs(const ModelConfig& cfg, const WeightSource& weights,
                                                     Backend& be, std::vector<int32_t> tokens) {
  if (tokens.empty()) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 256; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      tokens.push_back(static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(cfg.vocab_size)));
    }
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t block = 16, blocks = (n + block - 1) / block;
  ModelOptions mo;
  mo.max_num_tokens = n;
  mo.max_num_seqs = 1;
  auto model = make_qwen3_5(cfg, weights, be, mo);
  model->allocate_cache(blocks, block, 1);

  std::vector<int32_t> positions(n), table(blocks);
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(i);
  for (int64_t i = 0; i < blocks; ++i) table[i] = static_cast<int32_t>(i);
  auto ids_d = i32_device(be, tokens, Shape{n});
  auto pos_d = i32_device(be, positions, Shape{n});
  auto qsl_d = i32_device(be, {0, static_cast<int32_t>(n)}, Shape{2});
  auto len_d = i32_device(be, {static_cast<int32_t>(n)}, Shape{1});
  auto table_d = i32_device(be, table, Shape{1, blocks});
  auto zero_d = i32_device(be, {0}, Shape{1});
  auto row_d = i32_device(be, {static_cast<int32_t>(n - 1)}, Shape{1});
  StepContext ctx;
  ctx.num_tokens = n;
  ctx.num_seqs = 1;
  ctx.token_ids = ids_d.view();
  ctx.positions = pos_d.view();
  ctx.slot_mapping = pos_d.view();  // blocks 0.. in order: slot = position
  ctx.query_start_loc = qsl_d.view();
  ctx.seq_lens = len_d.view();
  ctx.block_tables = table_d.view();
  ctx.state_indices = zero_d.view();
  ctx.has_initial_state = zero_d.view();
  ctx.sample_rows = row_d.view();
  ctx.max_query_len = n;
  ctx.max_seq_len = n;

  std::map<std::string, float> amax;
  std::vector<uint16_t> host;
  set_linear_input_observer([&](const std::string& module, const TensorView& x) {
    host.resize(static_cast<size_t>(x.numel()));
    be.copy_to_host(host.data(), x.data(), x.nbytes());
    be.synchronize();
    float m = 0;
    for (uint16_t h : host) m = std::max(m, std::fabs(bf16_to_f32(h)));
    float& slot = amax[module];
    slot = std::max(slot, m);
  });
  try {
    model->forward(ctx);
  } catch (...) {
    set_linear_input_observer(nullptr);
    throw;
  }
  set_linear_input_observer(nullptr);
  return amax;
}

}  // namespace hyllm
