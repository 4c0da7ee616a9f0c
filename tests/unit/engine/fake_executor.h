#pragma once
// A model executor for GPU-free engine tests that checks the engine's cache
// bookkeeping as it runs. Its "KV cache" stores the token written at each
// position of each block, and its "GDN state" is a running hash of the tokens
// a slot has consumed. Before sampling it re-reads the sequence's tokens
// through the block table and checks that their hash equals the slot state:
// a wrong block table, a missed copy on write, a bad fork copy or a stale
// slot all make the check fail (the step throws). A state save inside a step
// (SeqWork::save_slot) copies the slot's running hash at the save point, so
// a later hit on that snapshot is checked the same way. The next token is a hash of
// the sequence's tokens (so it does not depend on the batch), turned into
// logits with one clear favourite and sampled by the real Sampler.
// A scored prompt position p (prompt logprobs) reads tokens 0..p back through
// the block table and reports the prompt token after it with logprob -(p + 1),
// rank 1 when it is the favourite after 0..p (else 2), and the favourite as
// its top entry.

#include <chrono>
#include <cstdint>
#include <thread>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "engine/sampler.h"

namespace hyllm::testing {

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

class FakeExecutor : public ModelExecutor {
 public:
  struct Options {
    int vocab_size = 64;
    size_t kv_bytes_per_token = 100;
    size_t bytes_per_state_slot = 1000;
    size_t budget = 1000000;
    std::chrono::microseconds step_delay{0};  // lets threaded tests act mid-request
  };
  explicit FakeExecutor(Options o) : opt_(o) {}
  FakeExecutor() : FakeExecutor(Options{}) {}

  CacheLayout cache_layout() const override {
    return {opt_.kv_bytes_per_token, opt_.bytes_per_state_slot, 1, 3};
  }
  int vocab_size() const override { return opt_.vocab_size; }
  size_t cache_memory_budget() override { return opt_.budget; }
  void allocate_cache(const CacheAllocation& a) override {
    alloc_ = a;
    kv_.assign(static_cast<size_t>(a.num_blocks) * a.block_size, -1);
    slots_.assign(static_cast<size_t>(a.num_state_slots), {0, 0});
  }

  // The token the fake model favours after `tokens`.
  static int32_t favourite(const std::vector<int32_t>& tokens, int vocab) {
    uint64_t h = 0;
    for (int32_t t : tokens) h = mix(h, static_cast<uint64_t>(t));
    return static_cast<int32_t>(h % static_cast<uint64_t>(vocab));
  }

  StepOutput execute(const StepInput& in) override {
    if (fail_next_) {
      fail_next_ = false;
      throw std::runtime_error("injected failure");
    }
    if (on_step) on_step(in);
    if (opt_.step_delay.count() > 0) std::this_thread::sleep_for(opt_.step_delay);
    for (auto [src, dst] : in.kv_block_copies) {
      for (int i = 0; i < alloc_.block_size; ++i) kv_[pos(dst, i)] = kv_[pos(src, i)];
    }
    for (auto [src, dst] : in.state_slot_copies) slots_.at(static_cast<size_t>(dst)) = slots_.at(static_cast<size_t>(src));
    std::map<int32_t, int64_t> writer_of_block;
    StepOutput out;
    for (const SeqWork& w : in.seqs) {
      check(w.state_slot >= 0 && w.state_slot < alloc_.num_state_slots, "bad slot");
      auto& slot = slots_[static_cast<size_t>(w.state_slot)];
      if (w.start_pos == 0) slot = {0, 0};
      check(slot.count == w.start_pos, "slot state is not at start_pos");
      const int end = w.start_pos + static_cast<int>(w.token_ids.size());
      check(static_cast<int>(w.block_table.size()) * alloc_.block_size >= end, "block table too short");
      if (w.save_slot >= 0) {
        check(w.save_slot < alloc_.num_state_slots && w.save_slot != w.state_slot, "bad save slot");
        check(w.save_pos > w.start_pos && w.save_pos < end, "save point outside the chunk");
        num_saves++;
      }
      for (size_t i = 0; i < w.token_ids.size(); ++i) {
        const int p = w.start_pos + static_cast<int>(i);
        const int32_t block = w.block_table[static_cast<size_t>(p / alloc_.block_size)];
        check(block >= 0 && block < alloc_.num_blocks, "bad block id");
        kv_[pos(block, p % alloc_.block_size)] = w.token_ids[i];
        auto [it, fresh] = writer_of_block.emplace(block, w.seq_id);
        check(fresh || it->second == w.seq_id, "two sequences write one block in a step");
        slot.hash = mix(slot.hash, static_cast<uint64_t>(w.token_ids[i]));
        slot.count++;
        if (w.save_slot >= 0 && p + 1 == w.save_pos) slots_.at(static_cast<size_t>(w.save_slot)) = slot;
      }
      if (!w.score_ids.empty()) out.scored.push_back(score(w));
      if (!w.sample) continue;
      // Re-read the sequence through the KV cache; it must agree with the state.
      std::vector<int32_t> seen;
      uint64_t h = 0;
      for (int p = 0; p < end; ++p) {
        const int32_t t = kv_[pos(w.block_table[static_cast<size_t>(p / alloc_.block_size)], p % alloc_.block_size)];
        seen.push_back(t);
        h = mix(h, static_cast<uint64_t>(t));
      }
      check(h == slot.hash, "KV cache and state slot disagree");
      // The context must be the prompt and outputs the sampler is given.
      std::vector<int32_t> ctx(w.prompt_ids.begin(), w.prompt_ids.end());
      ctx.insert(ctx.end(), w.output_ids.begin(), w.output_ids.end());
      check(ctx == seen, "sampling context differs from the cached tokens");
      std::vector<float> logits(static_cast<size_t>(opt_.vocab_size));
      const int32_t fav = favourite(seen, opt_.vocab_size);
      for (int t = 0; t < opt_.vocab_size; ++t) {
        logits[static_cast<size_t>(t)] = static_cast<float>(mix(h, static_cast<uint64_t>(t)) % 1000) / 1000.0f;
      }
      logits[static_cast<size_t>(fav)] += 3.0f;
      std::vector<uint32_t> mask;
      if (w.constraint) {
        mask.assign(static_cast<size_t>(bitmask_words(opt_.vocab_size)), 0u);
        if (!w.constraint->fill_next_token_bitmask(mask)) mask.clear();
      }
      out.sampled.push_back(sampler_.sample(logits, w, mask));
    }
    return out;
  }

  void fail_next_step() { fail_next_ = true; }
  std::function<void(const StepInput&)> on_step;  // sees every step before it runs
  int num_saves = 0;  // states saved inside a step (SeqWork::save_slot)
  CacheAllocation alloc_;

 private:
  struct Slot {
    int count;
    uint64_t hash;
  };
  size_t pos(int32_t block, int offset) const {
    return static_cast<size_t>(block) * static_cast<size_t>(alloc_.block_size) + static_cast<size_t>(offset);
  }
  std::vector<TokenLogprob> score(const SeqWork& w) const {
    check(w.score_ids.size() <= w.token_ids.size(), "more scored positions than tokens");
    std::vector<TokenLogprob> scored;
    std::vector<int32_t> ctx;
    for (int p = 0; p < w.start_pos + static_cast<int>(w.score_ids.size()); ++p) {
      ctx.push_back(kv_[pos(w.block_table[static_cast<size_t>(p / alloc_.block_size)], p % alloc_.block_size)]);
      if (p < w.start_pos) continue;
      TokenLogprob t;
      t.token = w.score_ids[static_cast<size_t>(p - w.start_pos)];
      t.logprob = -static_cast<float>(p + 1);
      const int32_t fav = favourite(ctx, opt_.vocab_size);
      t.rank = t.token == fav ? 1 : 2;
      if (w.num_prompt_logprobs > 0) t.top_logprobs.emplace_back(fav, -0.5f);
      scored.push_back(std::move(t));
    }
    return scored;
  }
  static void check(bool ok, const char* what) {
    if (!ok) throw std::logic_error(std::string("fake executor: ") + what);
  }

  Options opt_;
  std::vector<int32_t> kv_;
  std::vector<Slot> slots_;
  Sampler sampler_;
  bool fail_next_ = false;
};

}  // namespace hyllm::testing
