#pragma once
// The device's side of the runner's step timing. The host's clock says how
// long the runner spent planning, enqueuing and waiting; only the device's
// clock says how long the device sat idle between two steps while the host
// turned the sampled tokens into the next step (the time that overlapping
// the host's next step with the device's current one would hide).
//
// Per step, three marks on the backend's stream: at the step's start (before
// its inputs are planned and uploaded), before its forward, and after its
// sampled tokens are back on the host. The device is idle when the last one
// is recorded, so it stands for the step's end on the device's clock (late by
// the host's return from the wait). Between a step's end and the next one's
// start the device has nothing queued: that span is the idle time. Marks are
// read only once the stream has passed them (a step's end at the next
// step's start, or at take()), so the clock adds no wait between steps.

#include "backend/backend.h"

namespace hyllm {

class DeviceStepClock {
 public:
  explicit DeviceStepClock(Backend& be) : be_(be) {}

  // Sums over the steps completed since the last take(); valid is false
  // when the backend keeps no device clock. idle_ms sums the gaps between
  // consecutive timed steps (a step begun and not ended breaks the chain).
  struct Totals {
    bool valid = false;
    int steps = 0;
    int gaps = 0;
    double idle_ms = 0;     // previous step's end -> this step's start
    double prepare_ms = 0;  // start -> forward (planning, uploads, launch)
    double compute_ms = 0;  // forward -> tokens back (forward, sampling, drafts)
  };

  void begin();
  void forward();
  void end();
  Totals take();

 private:
  // An ended step whose end mark is still to be read.
  struct Pending {
    bool set = false;
    bool has_gap = false;
    int end = 0;           // its end mark
    int compute_from = 0;  // its forward mark, or its start without one
    double idle = 0, prepare = 0;
  };
  void settle();  // adds the pending step to the totals
  // Marks 0 and 1 hold the two latest ends in turn; 2 the start, 3 the forward.
  static constexpr int kBegin = 2, kForward = 3;
  Backend& be_;
  bool open_ = false;       // begin() called, end() not yet
  bool forwarded_ = false;  // forward() called in the open step
  bool has_prev_end_ = false;
  int prev_end_ = 0;  // mark holding the previous step's end
  Pending pending_;
  Totals totals_;
};

}  // namespace hyllm
