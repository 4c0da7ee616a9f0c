#include "engine/runner/model_runner.h"

#include <algorithm>
#include <chrono>

#include "engine/runner/memory_profile.h"
#include "engine/sampler.h"
#include "util/log.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace hyllm {

namespace {

DeviceBuffer i32_buffer(Backend& be, int64_t n) { return DeviceBuffer(be, DType::kI32, Shape{n}); }

template <typename T>
void upload(Backend& be, const DeviceBuffer& dst, const std::vector<T>& src, size_t count) {
  if (count > 0) be.copy_to_device(dst.data(), src.data(), count * sizeof(T));
}

TensorView i32_view(const DeviceBuffer& b, Shape s) { return b.view().reshape(Shape{b.view().numel()}).slice_rows(0, s.numel()).reshape(s); }

}  // namespace

ModelRunner::ModelRunner(std::unique_ptr<Model> model, const RunnerOptions& options)
    : model_(std::move(model)),
      opts_(options),
      graphs_(options.record_graph, options.max_model_len, options.max_graph_batch),
      draft_graphs_{DecodeGraphs(options.record_graph, options.max_model_len, options.max_graph_batch),
                    DecodeGraphs(options.record_graph, options.max_model_len, options.max_graph_batch)} {
  HYLLM_CHECK(model_ != nullptr, "ModelRunner without a model");
  const ModelOptions& mo = model_->options();
  if (opts_.max_num_tokens > mo.max_num_tokens || opts_.max_num_seqs > mo.max_num_seqs)
    fail(ErrorCode::kInvalidArgument, "runner capacity ({} tokens, {} seqs) exceeds the model's ({}, {})",
         opts_.max_num_tokens, opts_.max_num_seqs, mo.max_num_tokens, mo.max_num_seqs);
  Backend& be = model_->backend();
  device_clock_ = std::make_unique<DeviceStepClock>(be);
  const int64_t T = opts_.max_num_tokens, S = opts_.max_num_seqs;
  num_spec_ = mo.num_speculative_tokens;
  const int64_t R = S * (1 + num_spec_);  // a verify chunk samples 1 + drafts rows
  dev_.token_ids = i32_buffer(be, T);
  dev_.positions = i32_buffer(be, T);
  dev_.slot_mapping = i32_buffer(be, T);
  dev_.query_start_loc = i32_buffer(be, S + 1);
  dev_.seq_lens = i32_buffer(be, S);
  dev_.state_indices = i32_buffer(be, S);
  dev_.has_initial_state = i32_buffer(be, S);
  dev_.sample_rows = i32_buffer(be, R);
  dev_.score_rows = i32_buffer(be, R);
  dev_.save_slots = i32_buffer(be, S);
  dev_.save_lens = i32_buffer(be, S);
  if (num_spec_ > 0 && !opts_.samples && !opts_.share_samples)
    fail(ErrorCode::kInternal, "speculative decoding on a runner that does not sample needs share_samples");
  if (num_spec_ > 0) {
    dev_.hidden_rows = i32_buffer(be, T);
    dev_.keep = i32_buffer(be, S);
    hidden_rows_.resize(T);
    keep_.resize(S);
  }
  token_ids_.resize(T);
  positions_.resize(T);
  slot_mapping_.resize(T);
  query_start_loc_.resize(S + 1);
  seq_lens_.resize(S);
  state_indices_.resize(S);
  has_initial_state_.resize(S);
  sample_rows_.resize(R);
  save_slots_.resize(S);
  save_lens_.resize(S);
}

CacheLayout ModelRunner::cache_layout() const {
  CacheLayout c;
  c.kv_bytes_per_token = model_->kv_bytes_per_token();
  c.bytes_per_state_slot = model_->state_bytes_per_slot();
  c.num_attention_layers = static_cast<int>(model_->num_attention_layers());
  c.num_gdn_layers = static_cast<int>(model_->num_gdn_layers());
  // Padding sequences exist only where plan() adds them: never with
  // speculative decoding, never in a runner of one sequence (which pads
  // rows only, and they read its own token).
  const bool pads = (opts_.record_graph != nullptr || opts_.pad_decode_steps) && num_spec_ == 0 &&
                    std::min(opts_.max_num_seqs, opts_.max_num_tokens) > 1;
  c.reserved_blocks = pads && c.num_attention_layers > 0 ? 1 : 0;
  c.reserved_state_slots = pads && c.num_gdn_layers > 0 ? 1 : 0;
  return c;
}

int ModelRunner::vocab_size() const { return static_cast<int>(model_->vocab_size()); }

size_t ModelRunner::cache_memory_budget() {
  Backend& be = model_->backend();
  // A --kv-cache-memory past what is free is refused here, naming the flag:
  // on the host the process would otherwise grow (pages are committed as the
  // cache is zeroed) until the kernel kills it.
  auto requested_fitting = [&](size_t free_bytes, const char* where) {
    if (opts_.cache_memory_bytes > free_bytes) {
      fail(ErrorCode::kOutOfMemory, "--kv-cache-memory {:.2f}GiB exceeds the {:.2f}GiB {}",
           opts_.cache_memory_bytes / double(1ull << 30), free_bytes / double(1ull << 30), where);
    }
    return opts_.cache_memory_bytes;
  };
  if (be.device().kind == DeviceKind::kCpu) {
    if (opts_.cache_memory_bytes == 0) return size_t{1} << 30;
    return requested_fitting(be.memory_info().free_bytes, "of host memory available");
  }
  const MemoryInfo before = be.memory_info();
  profile_run();
  const MemoryInfo after = be.memory_info();
  KvBudgetInput in;
  in.total_bytes = after.total_bytes;
  in.used_bytes = after.total_bytes - after.free_bytes;
  in.weight_bytes = model_->weight_bytes();
  // The model's fixed buffers plus what the profile step made grow (kernel
  // scratch, GEMM workspaces, the sampler's buffers, block tables).
  const size_t grown = before.free_bytes > after.free_bytes ? before.free_bytes - after.free_bytes : 0;
  in.activation_bytes = model_->activation_bytes() + grown;
  in.gpu_memory_utilization = opts_.gpu_memory_utilization;
  if (opts_.cache_memory_bytes > 0) {
    log::info("KV cache memory set to {:.2f}GiB (--kv-cache-memory); {:.2f}GiB of {:.2f}GiB are in use after "
              "profiling", opts_.cache_memory_bytes / double(1ull << 30), in.used_bytes / double(1ull << 30),
              in.total_bytes / double(1ull << 30));
    return requested_fitting(after.free_bytes, "the device has free after loading and profiling");
  }
  const KvBudget b = kv_cache_budget(in);
  log_kv_budget(in, b);
  return b.cache_bytes;
}

void ModelRunner::set_block_geometry(int block_size) {
  block_size_ = block_size;
  max_blocks_per_seq_ = (opts_.max_model_len + block_size_ - 1) / block_size_;
  const int64_t n = opts_.max_num_seqs * max_blocks_per_seq_;
  if (dev_.block_tables.size() != static_cast<size_t>(n) * sizeof(int32_t)) {
    dev_.block_tables = DeviceBuffer();
    dev_.block_tables = i32_buffer(model_->backend(), n);
  }
  block_tables_.assign(static_cast<size_t>(n), 0);
  if (num_spec_ > 0) draft_tables_.assign(static_cast<size_t>(n), 0);
}

void ModelRunner::profile_run() {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> lengths =
      profile_step_lengths(opts_.max_num_tokens, opts_.max_num_seqs, opts_.max_model_len);
  constexpr int kBlock = 16;
  // Every sequence starts at position 0, so no state is read; they share one
  // state slot, whose final value nobody reads.
  int64_t blocks = 0, tokens = 0;
  for (int64_t n : lengths) {
    blocks += (n + kBlock - 1) / kBlock;
    tokens += n;
  }
  const bool attn = model_->num_attention_layers() > 0, gdn = model_->num_gdn_layers() > 0;
  model_->allocate_cache(attn ? blocks : 0, kBlock, gdn ? 1 : 0);
  set_block_geometry(kBlock);
  num_blocks_ = usable_blocks_ = static_cast<int>(blocks);
  num_slots_ = usable_slots_ = gdn ? 1 : 0;

  SamplingParams sampling;  // the full sampler path: temperature, top-k, top-p, min-p
  sampling.temperature = 1.0f;
  sampling.top_k = 20;
  sampling.top_p = 0.95f;
  sampling.min_p = 0.01f;
  const int32_t token = static_cast<int32_t>(std::min<int64_t>(1000, model_->vocab_size() - 1));
  std::vector<int32_t> ids(static_cast<size_t>(std::min<int64_t>(opts_.max_model_len, tokens)), token);
  std::vector<std::vector<int32_t>> tables;
  tables.reserve(lengths.size());
  StepInput input;
  int32_t next_block = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t n = lengths[i];
    std::vector<int32_t> table;
    for (int64_t b = 0; b < (n + kBlock - 1) / kBlock; ++b) table.push_back(next_block++);
    tables.push_back(std::move(table));
    SeqWork w;
    w.seq_id = static_cast<int64_t>(i);
    w.token_ids = std::span<const int32_t>(ids).first(static_cast<size_t>(n));
    w.start_pos = 0;
    w.block_table = tables.back();
    w.state_slot = 0;
    w.sample = true;
    w.sampling = &sampling;
    w.prompt_ids = w.token_ids;
    // Speculating, a step samples up to 1 + K rows per sequence: the profile
    // samples as many, so that the sampler's scratch reaches that size too.
    w.output_ids = std::span<const int32_t>(ids).first(0);
    w.num_drafts = static_cast<int>(std::min<int64_t>(num_spec_, n - 1));
    input.seqs.push_back(w);
  }
  profiling_ = true;
  try {
    execute(input);
  } catch (...) {
    profiling_ = false;
    throw;
  }
  profiling_ = false;
  Backend& be = model_->backend();
  be.synchronize();
  model_->allocate_cache(0, kBlock, 0);
  graphs_.clear();
  for (DecodeGraphs& g : draft_graphs_) g.clear();
  num_blocks_ = num_slots_ = usable_blocks_ = usable_slots_ = 0;
  log::info("Memory profiling took {:.2f} seconds (one step of {} tokens in {} sequences)",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), tokens,
            lengths.size());
}

void ModelRunner::allocate_cache(const CacheAllocation& a) {
  if (a.block_size <= 0) fail(ErrorCode::kUnsupported, "KV block size {} must be positive", a.block_size);
  if (a.num_blocks <= 0 && model_->num_attention_layers() > 0)
    fail(ErrorCode::kInvalidArgument, "no KV blocks for {} attention layers", model_->num_attention_layers());
  if (a.num_state_slots <= 0 && model_->num_gdn_layers() > 0)
    fail(ErrorCode::kInvalidArgument, "no state slots for {} GDN layers", model_->num_gdn_layers());
  model_->allocate_cache(a.num_blocks, a.block_size, a.num_state_slots);
  graphs_.clear();  // recordings point into the old cache
  for (DecodeGraphs& g : draft_graphs_) g.clear();
  set_block_geometry(a.block_size);
  num_blocks_ = a.num_blocks;
  num_slots_ = a.num_state_slots;
  const CacheLayout layout = cache_layout();
  usable_blocks_ = num_blocks_ - layout.reserved_blocks;
  usable_slots_ = num_slots_ - layout.reserved_state_slots;
  if ((layout.reserved_blocks > 0 && usable_blocks_ < 1) || (layout.reserved_state_slots > 0 && usable_slots_ < 1))
    fail(ErrorCode::kInvalidArgument, "{} blocks and {} state slots leave none beside the {} and {} the runner reserves",
         num_blocks_, num_slots_, layout.reserved_blocks, layout.reserved_state_slots);
  capture_decode_graphs();
}

StepContext ModelRunner::plan(const StepInput& input) {
  int64_t S = static_cast<int64_t>(input.seqs.size());
  if (S == 0 || S > opts_.max_num_seqs)
    fail(ErrorCode::kInvalidArgument, "a step of {} sequences (capacity {})", S, opts_.max_num_seqs);
  HYLLM_CHECK(block_size_ > 0, "execute before allocate_cache");
  const int64_t bs = block_size_, V = model_->vocab_size();
  int64_t T = 0, R = 0, max_q = 0, max_len = 0;
  bool decode_only = true, verify = false, uniform = true, saves = false;
  score_rows_.clear();
  score_src_.clear();
  generation_step_ = true;
  query_start_loc_[0] = 0;
  for (int64_t s = 0; s < S; ++s) {
    const SeqWork& w = input.seqs[s];
    const int64_t n = static_cast<int64_t>(w.token_ids.size());
    const int64_t end = w.start_pos + n;
    if (n == 0) fail(ErrorCode::kInternal, "sequence {} has no tokens in this step", w.seq_id);
    // A verify chunk is the last token and its drafts (the rollback keeps one
    // of its first K states); the profile step only samples as many rows.
    if (w.num_drafts < 0 || w.num_drafts > num_spec_ || w.num_drafts >= n ||
        (w.num_drafts > 0 && ((n != w.num_drafts + 1 && !profiling_) || !w.sample)))
      fail(ErrorCode::kInternal, "sequence {}: {} drafts in a chunk of {} tokens (at most {})", w.seq_id,
           w.num_drafts, n, num_spec_);
    if (T + n > opts_.max_num_tokens)
      fail(ErrorCode::kInternal, "step has more than {} tokens", opts_.max_num_tokens);
    if (w.start_pos < 0 || end > opts_.max_model_len)
      fail(ErrorCode::kInvalidArgument, "sequence {} reaches position {} (max_model_len {})", w.seq_id, end,
           opts_.max_model_len);
    const int64_t blocks_needed = (end + bs - 1) / bs;
    if (model_->num_attention_layers() > 0 && static_cast<int64_t>(w.block_table.size()) < blocks_needed)
      fail(ErrorCode::kInternal, "sequence {}: block table of {} blocks for {} tokens", w.seq_id,
           w.block_table.size(), end);
    if (model_->num_gdn_layers() > 0 && (w.state_slot < 0 || w.state_slot >= usable_slots_))
      fail(ErrorCode::kInternal, "sequence {}: state slot {} of {}", w.seq_id, w.state_slot, usable_slots_);
    const bool save = w.save_slot >= 0 && model_->num_gdn_layers() > 0;
    if (save && (w.save_slot >= usable_slots_ || w.save_slot == w.state_slot || w.save_pos <= w.start_pos ||
                 w.save_pos >= end))
      fail(ErrorCode::kInternal, "sequence {}: state save into slot {} at {} in a chunk [{}, {})", w.seq_id,
           w.save_slot, w.save_pos, w.start_pos, end);
    save_slots_[s] = save ? w.save_slot : -1;
    save_lens_[s] = save ? static_cast<int32_t>(w.save_pos - w.start_pos) : 0;
    saves = saves || save;
    int32_t* table = &block_tables_[s * max_blocks_per_seq_];
    std::fill(table, table + max_blocks_per_seq_, 0);
    const int64_t copy = std::min<int64_t>(static_cast<int64_t>(w.block_table.size()), max_blocks_per_seq_);
    for (int64_t b = 0; b < copy; ++b) {
      if (w.block_table[b] < 0 || w.block_table[b] >= usable_blocks_)
        fail(ErrorCode::kInternal, "sequence {}: block id {} of {}", w.seq_id, w.block_table[b], usable_blocks_);
      table[b] = w.block_table[b];
    }
    for (int64_t j = 0; j < n; ++j) {
      const int32_t tok = w.token_ids[j];
      if (tok < 0 || tok >= V) fail(ErrorCode::kInvalidArgument, "token id {} outside the vocabulary [0, {})", tok, V);
      const int64_t pos = w.start_pos + j;
      token_ids_[T + j] = tok;
      positions_[T + j] = static_cast<int32_t>(pos);
      slot_mapping_[T + j] =
          model_->num_attention_layers() > 0 ? static_cast<int32_t>(table[pos / bs] * bs + pos % bs) : -1;
    }
    T += n;
    query_start_loc_[s + 1] = static_cast<int32_t>(T);
    seq_lens_[s] = static_cast<int32_t>(end);
    state_indices_[s] = std::max<int32_t>(w.state_slot, 0);
    has_initial_state_[s] = w.start_pos > 0 ? 1 : 0;
    if (w.sample) {
      for (int64_t j = w.num_drafts; j >= 0; --j) sample_rows_[R++] = static_cast<int32_t>(T - 1 - j);
    }
    if (static_cast<int64_t>(w.score_ids.size()) > n)
      fail(ErrorCode::kInternal, "sequence {}: {} scored positions in a chunk of {} tokens", w.seq_id,
           w.score_ids.size(), n);
    for (size_t j = 0; j < w.score_ids.size(); ++j) {
      score_rows_.push_back(static_cast<int32_t>(T - n + j));
      score_src_.emplace_back(&w, j);
    }
    verify = verify || w.num_drafts > 0;
    uniform = uniform && w.sample && w.num_drafts == input.seqs[0].num_drafts;
    max_q = std::max(max_q, n);
    max_len = std::max(max_len, end);
    decode_only = decode_only && n == 1;
    generation_step_ = generation_step_ && n == w.num_drafts + 1;
  }
  // A step that scores prompt positions keeps every final hidden state for
  // them (score_positions); it is never a decode step (neither padded nor replayed).
  const bool scores = !score_rows_.empty();
  if (scores) decode_only = uniform = false;
  step_seqs_ = S;
  step_tokens_ = T;
  step_rows_ = R;
  // Only decode steps are padded: not verify steps or steps with saves, not
  // the profile step (op by op), nothing with speculative decoding (its MTP
  // passes read the step's rows).
  if (decode_only && !verify && !saves && !profiling_ && num_spec_ == 0 && pads_decode_steps())
    S = pad_decode_step(S, T, R);
  StepContext ctx = upload_step(S, T, R, max_q, max_len, decode_only, verify, uniform, saves);
  ctx.keep_final_hidden = scores;
  return ctx;
}

StepContext ModelRunner::upload_step(int64_t S, int64_t T, int64_t R, int64_t max_q, int64_t max_len, bool decode_only,
                                     bool verify, bool uniform, bool saves) {
  Backend& be = model_->backend();
  upload(be, dev_.token_ids, token_ids_, T);
  upload(be, dev_.positions, positions_, T);
  upload(be, dev_.slot_mapping, slot_mapping_, T);
  upload(be, dev_.query_start_loc, query_start_loc_, S + 1);
  upload(be, dev_.seq_lens, seq_lens_, S);
  upload(be, dev_.block_tables, block_tables_, S * max_blocks_per_seq_);
  step_rows_on_device_ = step_seqs_;
  upload(be, dev_.state_indices, state_indices_, S);
  upload(be, dev_.has_initial_state, has_initial_state_, S);
  upload(be, dev_.sample_rows, sample_rows_, R);
  if (saves) {
    upload(be, dev_.save_slots, save_slots_, S);
    upload(be, dev_.save_lens, save_lens_, S);
  }

  StepContext ctx;
  ctx.num_tokens = T;
  ctx.num_seqs = S;
  ctx.token_ids = i32_view(dev_.token_ids, Shape{T});
  ctx.positions = i32_view(dev_.positions, Shape{T});
  ctx.slot_mapping = i32_view(dev_.slot_mapping, Shape{T});
  ctx.query_start_loc = i32_view(dev_.query_start_loc, Shape{S + 1});
  ctx.seq_lens = i32_view(dev_.seq_lens, Shape{S});
  ctx.block_tables = i32_view(dev_.block_tables, Shape{S, max_blocks_per_seq_});
  ctx.state_indices = i32_view(dev_.state_indices, Shape{S});
  ctx.has_initial_state = i32_view(dev_.has_initial_state, Shape{S});
  ctx.sample_rows = i32_view(dev_.sample_rows, Shape{R});
  if (saves) {
    ctx.state_save_slots = i32_view(dev_.save_slots, Shape{S});
    ctx.state_save_lens = i32_view(dev_.save_lens, Shape{S});
  }
  ctx.max_query_len = max_q;
  ctx.max_seq_len = max_len;
  ctx.decode_only = decode_only;
  ctx.keep_spec_states = verify;
  // A save is never in a decode step (its chunk has two tokens or more);
  // steps with saves run op by op, since recorded graphs read no saves.
  ctx.uniform_query_len = verify && uniform && !saves ? max_q : 0;
  return ctx;
}

namespace {

// A row the device sampler cannot sample: more top logprobs than it returns,
// or a logit_bias, which it does not apply. The host sampler takes such rows
// alone, so that one such request does not move a whole batch's logits.
bool needs_host_sampler(const SamplingParams& p) {
  return p.logprobs.value_or(-1) > kMaxDeviceTopLogprobs || !p.logit_bias.empty();
}

}  // namespace

void ModelRunner::expand_rows(const StepInput& input) {
  rows_.clear();
  row_seq_.clear();
  size_t seq = 0;
  for (const SeqWork& w : input.seqs) {
    if (!w.sample) continue;
    if (w.num_drafts > 0 && w.constraint != nullptr)
      fail(ErrorCode::kInternal, "sequence {}: drafts with a structured-output constraint", w.seq_id);
    for (int j = 0; j <= w.num_drafts; ++j) {
      // Row j samples as a decode step after the first j drafts would (executor.h).
      SeqWork r = w;
      r.output_ids = std::span<const int32_t>(w.output_ids.data(), w.output_ids.size() + static_cast<size_t>(j));
      r.sample_index = w.sample_index + static_cast<uint64_t>(j);
      if (static_cast<int>(r.output_ids.size()) >= w.sampling->min_tokens) r.banned_token_ids = {};
      rows_.push_back(r);
      row_seq_.push_back(seq);
    }
    ++seq;
  }
}

void ModelRunner::sample_on_device(const TensorView& logits, std::vector<SampledToken>& out) {
  device_rows_.clear();
  for (size_t row = 0; row < rows_.size(); ++row) {
    const SeqWork& w = rows_[row];
    const SamplingParams& p = *w.sampling;
    DeviceSamplingRow r;
    r.temperature = p.temperature;
    r.top_p = p.top_p;
    r.top_k = std::max(p.top_k, 0);
    r.min_p = p.min_p;
    r.repetition_penalty = p.repetition_penalty;
    r.frequency_penalty = p.frequency_penalty;
    r.presence_penalty = p.presence_penalty;
    r.num_logprobs = p.logprobs.value_or(-1);
    r.seed = w.seed;
    r.sample_index = w.sample_index;
    r.banned_ids = w.banned_token_ids;
    r.prompt_ids = w.prompt_ids;
    r.output_ids = w.output_ids;
    r.allowed = token_mask(row_seq_[row]);
    device_rows_.push_back(r);
  }
  std::vector<DeviceSampledToken> tokens = opts_.device_sampler->sample(logits, device_rows_);
  HYLLM_CHECK(tokens.size() == device_rows_.size(), "device sampler returned {} rows for {}", tokens.size(),
              device_rows_.size());
  for (size_t row = 0; row < rows_.size(); ++row) {
    // A row whose mask allows nothing comes back as -1: the engine fails that request alone.
    DeviceSampledToken& t = tokens[row];
    out.push_back(SampledToken{t.token, t.logprob, std::move(t.top_logprobs)});
  }
}

void ModelRunner::resample_host_rows(std::vector<SampledToken>& out) {
  const int64_t V = model_->vocab_size();
  for (size_t i = 0; i < host_rows_.size(); ++i) {
    const size_t row = host_rows_[i];
    std::span<const float> l(host_row_logits_.data() + static_cast<int64_t>(i) * V, static_cast<size_t>(V));
    out[row] = sampler_.sample(l, rows_[row], token_mask(row_seq_[row]));
  }
}

void ModelRunner::sample_on_host(std::vector<SampledToken>& out) {
  const int64_t V = model_->vocab_size();
  for (size_t row = 0; row < rows_.size(); ++row) {
    std::span<const float> l(logits_host_.data() + static_cast<int64_t>(row) * V, static_cast<size_t>(V));
    out.push_back(sampler_.sample(l, rows_[row], token_mask(row_seq_[row])));
  }
}

void ModelRunner::fill_token_masks(const StepInput& input) {
  row_masked_.clear();
  constrained_rows_.clear();
  size_t rows = 0;
  for (const SeqWork& w : input.seqs) {
    if (!w.sample) continue;
    if (w.constraint != nullptr) constrained_rows_.emplace_back(rows, w.constraint);
    ++rows;
  }
  if (constrained_rows_.empty()) return;
  row_masked_.assign(rows, 0);
  const size_t words = static_cast<size_t>(bitmask_words(static_cast<int>(model_->vocab_size())));
  if (token_masks_.size() < rows * words) token_masks_.resize(rows * words);
  // Every request has its own matcher and the compiled grammars they share
  // are read-only, so the masks are filled in parallel (on the CUDA backend
  // while the forward runs on the device; on the CPU backend the forward has
  // returned and the pool is free). Each task writes only its own row.
  auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [row, constraint] = constrained_rows_[static_cast<size_t>(i)];
      std::span<uint32_t> mask(token_masks_.data() + row * words, words);
      row_masked_[row] = constraint->fill_next_token_bitmask(mask) ? 1 : 0;
    }
  };
  const auto n = static_cast<int64_t>(constrained_rows_.size());
  if (n >= kParallelMaskRows) {
    ThreadPool::global().parallel_for(0, n, fill);
  } else {
    fill(0, n);
  }
}

std::span<const uint32_t> ModelRunner::token_mask(size_t sample_row) const {
  if (sample_row >= row_masked_.size() || !row_masked_[sample_row]) return {};
  const size_t words = static_cast<size_t>(bitmask_words(static_cast<int>(model_->vocab_size())));
  return std::span<const uint32_t>(token_masks_.data() + sample_row * words, words);
}

StepOutput ModelRunner::execute(const StepInput& input) {
  for (auto [src, dst] : input.kv_block_copies) model_->copy_kv_block(src, dst);
  for (auto [src, dst] : input.state_slot_copies) model_->copy_state_slot(src, dst);
  if (input.seqs.empty()) return {};  // copies only
  for (const SeqWork& w : input.seqs) {
    if (w.sample && w.sampling == nullptr)
      fail(ErrorCode::kInternal, "sequence {} is sampled without SamplingParams", w.seq_id);
  }
  using Clock = std::chrono::steady_clock;
  const bool device_timed = !profiling_ && spdlog::should_log(spdlog::level::debug);
  if (device_timed) device_clock_->begin();
  const Clock::time_point t0 = Clock::now();
  StepContext ctx = plan(input);
  const Clock::time_point t1 = Clock::now();
  if (device_timed) device_clock_->forward();
  // The profile step's shapes are no decode step's; it runs op by op.
  TensorView logits = profiling_ ? model_->forward(ctx)
                                 : graphs_.run(ctx, [this](const StepContext& c) { return model_->forward(c); });
  // The padding sequences' rows follow the real ones; nothing reads them.
  if (step_rows_ < ctx.sample_rows.numel()) logits = logits.slice_rows(0, step_rows_);
  if (!opts_.samples && (num_spec_ == 0 || profiling_)) {
    model_->backend().synchronize();
    return {};
  }
  if (!opts_.samples) {  // speculative: accept, roll back and draft as the sampling rank does
    std::vector<SampledToken> rows;
    opts_.share_samples(rows);
    StepOutput ignored;
    verify_and_propose(input, std::move(rows), ignored);
    model_->backend().synchronize();
    return {};
  }
  fill_token_masks(input);
  const Clock::time_point t2 = Clock::now();
  const int64_t R = step_rows_, V = model_->vocab_size();
  Backend& be = model_->backend();
  expand_rows(input);
  const bool on_device = R > 0 && opts_.device_sampler != nullptr;
  host_rows_.clear();
  if (on_device) {
    for (size_t row = 0; row < rows_.size(); ++row) {
      if (needs_host_sampler(*rows_[row].sampling)) host_rows_.push_back(row);
    }
  }
  const bool to_host = R > 0 && (!on_device || opts_.keep_logits);
  logits_host_.resize(to_host ? static_cast<size_t>(R * V) : 0);
  host_row_logits_.resize(host_rows_.size() * static_cast<size_t>(V));
  // Enqueued before the device sampler's one synchronisation (and before it
  // masks rows in place), so they are done by then.
  if (to_host) be.copy_to_host(logits_host_.data(), logits.data(), logits_host_.size() * sizeof(float));
  for (size_t i = 0; i < host_rows_.size(); ++i) {
    be.copy_to_host(host_row_logits_.data() + static_cast<int64_t>(i) * V,
                    logits.data_as<const float>() + static_cast<int64_t>(host_rows_[i]) * V,
                    static_cast<size_t>(V) * sizeof(float));
  }

  std::vector<SampledToken> rows;
  if (on_device) {
    sample_on_device(logits, rows);
    resample_host_rows(rows);
  } else {
    be.synchronize();
    sample_on_host(rows);
  }
  StepOutput out;
  // After sampling, which is done with the logits buffer that the passes reuse.
  if (!score_rows_.empty()) out.scored = score_positions();
  int64_t draft_ns = 0;
  if (num_spec_ > 0 && !profiling_) {
    if (opts_.share_samples) opts_.share_samples(rows);
    draft_ns = verify_and_propose(input, std::move(rows), out);
  } else {
    out.sampled = std::move(rows);
  }
  const Clock::time_point t3 = Clock::now();
  if (device_timed) device_clock_->end();
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  record_timing(secs(t1 - t0), secs(t2 - t1), secs(t3 - t2), step_tokens_);
  if (!profiling_ && generation_step_) {
    timed_steps_.fetch_add(1, std::memory_order_relaxed);
    target_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(t3 - t0).count() - draft_ns,
                         std::memory_order_relaxed);
    draft_ns_.fetch_add(draft_ns, std::memory_order_relaxed);
  }
  if (spdlog::should_log(spdlog::level::debug)) model_->log_step_debug();
  return out;
}

ExecutorTimes ModelRunner::times() const {
  return {timed_steps_.load(std::memory_order_relaxed), target_ns_.load(std::memory_order_relaxed) * 1e-9,
          draft_ns_.load(std::memory_order_relaxed) * 1e-9};
}

void ModelRunner::record_timing(double plan_s, double enqueue_s, double sample_s, int64_t tokens) {
  constexpr int kTimingSteps = 200;
  timing_.steps += 1;
  timing_.tokens += tokens;
  timing_.plan_s += plan_s;
  timing_.enqueue_s += enqueue_s;
  timing_.sample_s += sample_s;
  if (timing_.steps < kTimingSteps) return;
  const double n = timing_.steps, ms = 1e3 / n;
  const DeviceStepClock::Totals d = device_clock_->take();
  std::string device;
  if (d.valid) {
    device = fmt::format("; on the device: idle between steps {:.3f} ms, start to forward {:.3f} ms, forward to "
                         "tokens back {:.3f} ms",
                         d.gaps > 0 ? d.idle_ms / d.gaps : 0.0, d.prepare_ms / d.steps, d.compute_ms / d.steps);
  }
  log::debug("runner: {} steps, {:.1f} tokens/step; per step: plan+upload {:.3f} ms, forward enqueue {:.3f} ms, "
             "sample+sync {:.3f} ms, total {:.3f} ms{}",
             timing_.steps, timing_.tokens / n, timing_.plan_s * ms, timing_.enqueue_s * ms, timing_.sample_s * ms,
             (timing_.plan_s + timing_.enqueue_s + timing_.sample_s) * ms, device);
  timing_ = StepTiming{};
}

}  // namespace hyllm
