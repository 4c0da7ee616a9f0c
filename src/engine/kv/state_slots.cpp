#include "engine/kv/state_slots.h"

#include <algorithm>

#include "util/status.h"

namespace hyllm {

StateSlotPool::StateSlotPool(int num_slots)
    : state_(static_cast<size_t>(std::max(num_slots, 0)), State::kFree),
      snapshots_(state_.size()),
      generation_(state_.size(), 0),
      prev_(state_.size() + 1, num_slots),
      next_(state_.size() + 1, num_slots) {
  HYLLM_CHECK(num_slots >= 0, "negative slot count {}", num_slots);
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
  num_free_ = num_slots;
}

size_t StateSlotPool::check(int32_t slot) const {
  HYLLM_CHECK(slot >= 0 && slot < num_slots(), "state slot {} out of range", slot);
  return static_cast<size_t>(slot);
}

double StateSlotPool::usage() const {
  return num_slots() == 0 ? 0.0 : static_cast<double>(num_live_) / num_slots();
}

void StateSlotPool::lru_unlink(int32_t s) {
  const auto i = static_cast<size_t>(s);
  next_[static_cast<size_t>(prev_[i])] = next_[i];
  prev_[static_cast<size_t>(next_[i])] = prev_[i];
}

void StateSlotPool::lru_push_back(int32_t s) {
  const auto sentinel = static_cast<size_t>(num_slots());
  const int32_t last = prev_[sentinel];
  prev_[static_cast<size_t>(s)] = last;
  next_[static_cast<size_t>(s)] = static_cast<int32_t>(sentinel);
  next_[static_cast<size_t>(last)] = s;
  prev_[sentinel] = s;
}

void StateSlotPool::drop(int32_t slot) {
  const size_t i = check(slot);
  HYLLM_CHECK(state_[i] == State::kSnapshot, "state slot {} holds no snapshot", slot);
  const Snapshot s = snapshots_[i];
  lru_unlink(slot);
  by_key_.erase(s.key);
  if (s.tail_tokens > 0) {
    auto it = tails_.find(s.parent);
    auto& v = it->second;
    v.erase(std::find(v.begin(), v.end(), slot));
    if (v.empty()) tails_.erase(it);
  }
  state_[i] = State::kFree;
  generation_[i]++;
  free_.push_back(slot);
  num_free_++;
  if (on_drop_) on_drop_(s);
}

void StateSlotPool::drop_all() {
  while (next_[static_cast<size_t>(num_slots())] != num_slots()) drop(next_[static_cast<size_t>(num_slots())]);
}

int32_t StateSlotPool::take_free_or_evict() {
  if (free_.empty()) {
    const int32_t lru = next_[static_cast<size_t>(num_slots())];
    if (lru == num_slots()) return -1;
    drop(lru);
  }
  const int32_t s = free_.back();
  free_.pop_back();
  num_free_--;
  return s;
}

int32_t StateSlotPool::allocate() {
  const int32_t s = take_free_or_evict();
  if (s < 0) return -1;
  state_[static_cast<size_t>(s)] = State::kLive;
  num_live_++;
  return s;
}

void StateSlotPool::release(int32_t slot) {
  const size_t i = check(slot);
  HYLLM_CHECK(state_[i] == State::kLive, "double free of state slot {}", slot);
  state_[i] = State::kFree;
  num_live_--;
  free_.push_back(slot);
  num_free_++;
}

void StateSlotPool::register_snapshot(int32_t slot, const Snapshot& s) {
  const auto i = static_cast<size_t>(slot);
  state_[i] = State::kSnapshot;
  snapshots_[i] = s;
  generation_[i]++;
  by_key_.emplace(s.key, slot);
  if (s.tail_tokens > 0) tails_[s.parent].push_back(slot);
  lru_push_back(slot);
}

int32_t StateSlotPool::allocate_snapshot(const Snapshot& s) {
  if (by_key_.count(s.key)) return -1;
  const int32_t slot = take_free_or_evict();
  if (slot >= 0) register_snapshot(slot, s);
  return slot;
}

bool StateSlotPool::keep_as_snapshot(int32_t slot, const Snapshot& s) {
  const size_t i = check(slot);
  HYLLM_CHECK(state_[i] == State::kLive, "state slot {} is not live", slot);
  if (by_key_.count(s.key)) return false;
  num_live_--;
  register_snapshot(slot, s);
  return true;
}

int32_t StateSlotPool::find(const BlockHash& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? -1 : it->second;
}

const std::vector<int32_t>& StateSlotPool::tails_after(const BlockHash& parent) const {
  static const std::vector<int32_t> none;
  auto it = tails_.find(parent);
  return it == tails_.end() ? none : it->second;
}

const Snapshot& StateSlotPool::snapshot(int32_t slot) const {
  const size_t i = check(slot);
  HYLLM_CHECK(state_[i] == State::kSnapshot, "state slot {} holds no snapshot", slot);
  return snapshots_[i];
}

bool StateSlotPool::is_snapshot(int32_t slot) const { return state_[check(slot)] == State::kSnapshot; }

void StateSlotPool::touch(int32_t slot) {
  HYLLM_CHECK(is_snapshot(slot), "state slot {} holds no snapshot", slot);
  lru_unlink(slot);
  lru_push_back(slot);
}

uint64_t StateSlotPool::generation(int32_t slot) const { return generation_[check(slot)]; }

}  // namespace hyllm
