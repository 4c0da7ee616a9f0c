#include "engine/runner/device_step_clock.h"

namespace hyllm {

void DeviceStepClock::begin() {
  settle();
  if (open_) has_prev_end_ = false;  // the last step never ended: no gap to measure
  open_ = true;
  forwarded_ = false;
  be_.record_mark(kBegin);
}

void DeviceStepClock::forward() {
  if (!open_) return;
  forwarded_ = true;
  be_.record_mark(kForward);
}

void DeviceStepClock::end() {
  if (!open_) return;
  open_ = false;
  const int end = has_prev_end_ ? 1 - prev_end_ : 0;
  be_.record_mark(end);
  // The stream has passed this step's start and forward marks (its tokens
  // are back), so these reads do not wait; the end mark is read later.
  pending_ = Pending{};
  pending_.set = true;
  pending_.end = end;
  pending_.has_gap = has_prev_end_;
  pending_.idle = has_prev_end_ ? be_.mark_elapsed_ms(prev_end_, kBegin) : 0.0;
  pending_.prepare = forwarded_ ? be_.mark_elapsed_ms(kBegin, kForward) : 0.0;
  pending_.compute_from = forwarded_ ? kForward : kBegin;
  prev_end_ = end;
  has_prev_end_ = true;
}

void DeviceStepClock::settle() {
  if (!pending_.set) return;
  const Pending p = pending_;
  pending_ = Pending{};
  const double compute = be_.mark_elapsed_ms(p.compute_from, p.end);
  if (p.idle < 0 || p.prepare < 0 || compute < 0) {
    has_prev_end_ = false;
    return;
  }
  totals_.valid = true;
  totals_.steps += 1;
  totals_.prepare_ms += p.prepare;
  totals_.compute_ms += compute;
  if (p.has_gap) {
    totals_.gaps += 1;
    totals_.idle_ms += p.idle;
  }
}

DeviceStepClock::Totals DeviceStepClock::take() {
  settle();
  Totals t = totals_;
  totals_ = Totals{};
  return t;
}

}  // namespace hyllm
