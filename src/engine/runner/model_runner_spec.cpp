// ModelRunner, speculative decoding: after the target step has sampled every
// row, accept drafts, roll the GDN states back to the last accepted token,
// then let the MTP head propose the next drafts (greedy: the draft is a point
// mass, which is what makes acceptance by equality exact, executor.h).
//
// MTP pass 1 runs over every scheduled token whose KV the step kept: token p
// pairs its target hidden state with token p + 1 (the next prompt token, an
// accepted draft, or the token just emitted), so the head's KV cache follows
// each sequence like the attention layers' caches do; its last row of a
// sampled sequence gives draft 1. Pass j >= 2 feeds draft j - 1 and the
// head's own output at position p_last + j - 1 and gives draft j. The KV these
// later passes write sits past the sequence's end, where the next verify step
// and pass 1 overwrite it.
#include <algorithm>
#include <chrono>

#include "engine/runner/model_runner.h"
#include "engine/spec_decode.h"
#include "util/status.h"

namespace hyllm {

namespace {

TensorView prefix_view(const DeviceBuffer& b, int64_t n) {
  return b.view().reshape(Shape{b.view().numel()}).slice_rows(0, n);
}

}  // namespace

StepContext ModelRunner::plan_draft(const std::vector<DraftSeq>& seqs) {
  const int64_t S = static_cast<int64_t>(seqs.size()), bs = block_size_;
  int64_t T = 0, R = 0, max_q = 0, max_len = 0;
  bool step_order = true, uniform = true;  // the step's block table rows as they are; equal token counts
  query_start_loc_[0] = 0;
  for (int64_t s = 0; s < S; ++s) {
    const DraftSeq& d = seqs[static_cast<size_t>(s)];
    const int64_t n = static_cast<int64_t>(d.tokens.size());
    const int32_t* table = &block_tables_[d.plan_row * max_blocks_per_seq_];
    HYLLM_CHECK(T + n <= opts_.max_num_tokens, "draft pass of more than {} tokens", opts_.max_num_tokens);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t pos = d.start_pos + j;
      token_ids_[T + j] = d.tokens[static_cast<size_t>(j)];
      positions_[T + j] = static_cast<int32_t>(pos);
      slot_mapping_[T + j] = static_cast<int32_t>(table[pos / bs] * bs + pos % bs);
      hidden_rows_[T + j] = static_cast<int32_t>(d.hidden_row + j);
    }
    T += n;
    query_start_loc_[s + 1] = static_cast<int32_t>(T);
    seq_lens_[s] = static_cast<int32_t>(d.start_pos + n);
    if (d.sample) sample_rows_[R++] = static_cast<int32_t>(T - 1);
    max_q = std::max(max_q, n);
    max_len = std::max(max_len, d.start_pos + n);
    // The block table rows, packed in this pass's sequence order.
    step_order = step_order && d.plan_row == s;
    uniform = uniform && d.sample && n == static_cast<int64_t>(seqs[0].tokens.size());
    std::copy_n(table, max_blocks_per_seq_, &draft_tables_[s * max_blocks_per_seq_]);
  }
  Backend& be = model_->backend();
  auto up = [&](const DeviceBuffer& dst, const std::vector<int32_t>& src, int64_t n) {
    if (n > 0) be.copy_to_device(dst.data(), src.data(), static_cast<size_t>(n) * sizeof(int32_t));
  };
  up(dev_.token_ids, token_ids_, T);
  up(dev_.positions, positions_, T);
  up(dev_.slot_mapping, slot_mapping_, T);
  up(dev_.hidden_rows, hidden_rows_, T);
  up(dev_.query_start_loc, query_start_loc_, S + 1);
  up(dev_.seq_lens, seq_lens_, S);
  // Passes over the step's sequences in step order (pass 1, and later ones
  // when every sequence drafts) reuse the step's block tables on the device.
  if (!step_order || S > step_rows_on_device_) {
    up(dev_.block_tables, draft_tables_, S * max_blocks_per_seq_);
    step_rows_on_device_ = step_order ? S : 0;
  }
  up(dev_.sample_rows, sample_rows_, R);
  StepContext ctx;
  ctx.num_tokens = T;
  ctx.num_seqs = S;
  ctx.token_ids = prefix_view(dev_.token_ids, T);
  ctx.positions = prefix_view(dev_.positions, T);
  ctx.slot_mapping = prefix_view(dev_.slot_mapping, T);
  ctx.query_start_loc = prefix_view(dev_.query_start_loc, S + 1);
  ctx.seq_lens = prefix_view(dev_.seq_lens, S);
  ctx.block_tables = prefix_view(dev_.block_tables, S * max_blocks_per_seq_).reshape(Shape{S, max_blocks_per_seq_});
  ctx.sample_rows = prefix_view(dev_.sample_rows, R);
  ctx.max_query_len = max_q;
  ctx.max_seq_len = max_len;
  ctx.decode_only = uniform && max_q == 1;
  ctx.uniform_query_len = uniform ? max_q : 0;
  return ctx;
}

std::vector<int32_t> ModelRunner::draft_argmax(const TensorView& logits, int64_t rows) {
  std::vector<int32_t> tokens(static_cast<size_t>(rows), -1);
  if (rows == 0) return tokens;
  if (opts_.device_sampler) {
    device_rows_.assign(static_cast<size_t>(rows), DeviceSamplingRow{});
    for (DeviceSamplingRow& r : device_rows_) r.temperature = 0.0f;
    std::vector<DeviceSampledToken> t = opts_.device_sampler->sample(logits, device_rows_);
    HYLLM_CHECK(static_cast<int64_t>(t.size()) == rows, "device sampler returned {} rows for {}", t.size(), rows);
    for (int64_t r = 0; r < rows; ++r) tokens[static_cast<size_t>(r)] = t[static_cast<size_t>(r)].token;
    return tokens;
  }
  const int64_t V = model_->vocab_size();
  draft_logits_.resize(static_cast<size_t>(rows * V));
  Backend& be = model_->backend();
  be.copy_to_host(draft_logits_.data(), logits.data(), draft_logits_.size() * sizeof(float));
  be.synchronize();
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = draft_logits_.data() + r * V;
    tokens[static_cast<size_t>(r)] = static_cast<int32_t>(std::max_element(l, l + V) - l);
  }
  return tokens;
}

int64_t ModelRunner::verify_and_propose(const StepInput& input, std::vector<SampledToken> rows, StepOutput& out) {
  const int64_t S = static_cast<int64_t>(input.seqs.size());
  // Acceptance; keep_[s] is the chunk token whose GDN state stays (-1: the last).
  std::vector<int64_t> valid(static_cast<size_t>(S));  // tokens of each chunk now in the cache
  std::vector<int32_t> last(static_cast<size_t>(S), -1);
  bool rollback = false;
  size_t row = 0;
  for (int64_t s = 0; s < S; ++s) {
    const SeqWork& w = input.seqs[static_cast<size_t>(s)];
    const int64_t n = static_cast<int64_t>(w.token_ids.size());
    keep_[s] = -1;
    valid[s] = n - w.num_drafts;
    if (!w.sample) continue;
    std::vector<int32_t> targets;
    for (int j = 0; j <= w.num_drafts; ++j) targets.push_back(rows[row + static_cast<size_t>(j)].token);
    const int a = count_accepted_drafts(w.token_ids.last(static_cast<size_t>(w.num_drafts)), targets);
    std::vector<SampledToken> accepted(std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(row)),
                                       std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(row + a)));
    out.accepted.push_back(std::move(accepted));
    out.sampled.push_back(std::move(rows[row + static_cast<size_t>(a)]));
    row += static_cast<size_t>(w.num_drafts) + 1;
    last[s] = out.sampled.back().token;
    valid[s] += a;
    if (a < w.num_drafts) {
      keep_[s] = static_cast<int32_t>(valid[s] - 1);
      rollback = true;
    }
  }
  if (rollback) {
    model_->backend().copy_to_device(dev_.keep.data(), keep_.data(), static_cast<size_t>(S) * sizeof(int32_t));
    model_->rollback_states(prefix_view(dev_.state_indices, S), prefix_view(dev_.keep, S));
  }

  // MTP pass 1 over every chunk's kept tokens. The rollback above is
  // enqueued, not waited for: the first pass's wait includes it.
  const auto draft_start = std::chrono::steady_clock::now();
  std::vector<DraftSeq> pass;
  std::vector<int64_t> seq_of;  // the step sequence of each pass sequence
  std::vector<int> wanted(static_cast<size_t>(S), 0);
  std::vector<int64_t> p_last(static_cast<size_t>(S), 0);
  for (int64_t s = 0; s < S; ++s) {
    const SeqWork& w = input.seqs[static_cast<size_t>(s)];
    const int32_t next = w.sample ? last[s] : w.next_token;
    DraftSeq d;
    d.plan_row = s;
    d.start_pos = w.start_pos;
    d.hidden_row = query_start_loc_[s];
    d.tokens.assign(w.token_ids.begin() + 1, w.token_ids.begin() + valid[s]);
    if (next >= 0) d.tokens.push_back(next);
    if (d.tokens.empty()) continue;
    p_last[s] = w.start_pos + static_cast<int64_t>(d.tokens.size()) - 1;
    if (w.sample && next >= 0) {
      // Draft j comes from a pass at position p_last + j - 1 and is verified at p_last + 1 + j.
      const int64_t covered = std::min<int64_t>(static_cast<int64_t>(w.block_table.size()) * block_size_,
                                                opts_.max_model_len);
      const int64_t room = std::min<int64_t>(covered - p_last[s], opts_.max_model_len - (p_last[s] + 2));
      wanted[s] = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(w.propose_drafts, num_spec_), 0, room));
    }
    d.sample = wanted[s] > 0;
    seq_of.push_back(s);
    pass.push_back(std::move(d));
  }
  // query_start_loc_ is rewritten by plan_draft: the hidden rows were read above.
  std::vector<std::vector<int32_t>> drafts(static_cast<size_t>(S));
  bool from_draft = false;
  for (int j = 1; !pass.empty(); ++j) {
    StepContext ctx = plan_draft(pass);
    const TensorView hidden_rows = prefix_view(dev_.hidden_rows, ctx.num_tokens);
    const TensorView logits = draft_graphs_[from_draft ? 1 : 0].run(ctx, [this, hidden_rows, from_draft](const StepContext& c) {
      return model_->forward_draft(c, hidden_rows, from_draft);
    });
    const std::vector<int32_t> tokens = draft_argmax(logits, ctx.sample_rows.numel());
    std::vector<DraftSeq> next_pass;
    std::vector<int64_t> next_seq_of;
    size_t r = 0;
    int64_t flat = 0;
    for (size_t i = 0; i < pass.size(); ++i) {
      flat += static_cast<int64_t>(pass[i].tokens.size());
      if (!pass[i].sample) continue;
      const int64_t s = seq_of[i];
      const int32_t t = tokens[r++];
      if (t < 0) continue;
      drafts[s].push_back(t);
      if (j >= wanted[s]) continue;
      DraftSeq d;
      d.plan_row = s;
      d.start_pos = p_last[s] + j;
      d.tokens = {t};
      d.hidden_row = flat - 1;  // this sequence's last row of the pass just run
      d.sample = true;
      next_seq_of.push_back(s);
      next_pass.push_back(std::move(d));
    }
    pass = std::move(next_pass);
    seq_of = std::move(next_seq_of);
    from_draft = true;
  }
  for (int64_t s = 0; s < S; ++s) {
    if (input.seqs[static_cast<size_t>(s)].sample) out.drafts.push_back(std::move(drafts[s]));
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - draft_start).count();
}

}  // namespace hyllm
