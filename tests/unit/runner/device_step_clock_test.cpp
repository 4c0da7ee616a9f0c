// The runner's device-clock step timing (DeviceStepClock) over a backend
// whose marks read a clock the test sets: the idle gaps between steps, the
// start-to-forward and forward-to-tokens spans, and backends with no clock.

#include <gtest/gtest.h>

#include <array>

#include "../ops/cpu_forwarding_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "engine/runner/device_step_clock.h"

namespace hyllm {
namespace {

// The CPU backend, with marks that record the test's clock.
class ClockedBackend final : public CpuForwardingBackend {
 public:
  void record_mark(int mark) override {
    ASSERT_GE(mark, 0);
    ASSERT_LT(mark, kNumMarks);
    at_[static_cast<size_t>(mark)] = now;
  }
  double mark_elapsed_ms(int from, int to) override {
    return at_[static_cast<size_t>(to)] - at_[static_cast<size_t>(from)];
  }
  double now = 0;  // ms

 private:
  std::array<double, kNumMarks> at_{};
};

// One step: `idle` ms after the last, `prepare` ms to the forward, `compute` ms to the tokens.
void step(DeviceStepClock& clock, ClockedBackend& be, double idle, double prepare, double compute) {
  be.now += idle;
  clock.begin();
  be.now += prepare;
  clock.forward();
  be.now += compute;
  clock.end();
}

TEST(DeviceStepClock, SumsGapsAndSpansOfConsecutiveSteps) {
  ClockedBackend be;
  DeviceStepClock clock(be);
  step(clock, be, 5.0, 0.25, 2.0);  // the first step has no gap before it
  step(clock, be, 0.5, 0.125, 2.5);
  step(clock, be, 0.25, 0.0625, 3.0);
  const DeviceStepClock::Totals t = clock.take();
  ASSERT_TRUE(t.valid);
  EXPECT_EQ(t.steps, 3);
  EXPECT_EQ(t.gaps, 2);
  EXPECT_DOUBLE_EQ(t.idle_ms, 0.75);
  EXPECT_DOUBLE_EQ(t.prepare_ms, 0.4375);
  EXPECT_DOUBLE_EQ(t.compute_ms, 7.5);
  // take() starts a new window, and the chain of ends carries across it.
  step(clock, be, 1.0, 0.5, 1.5);
  const DeviceStepClock::Totals u = clock.take();
  EXPECT_EQ(u.steps, 1);
  EXPECT_EQ(u.gaps, 1);
  EXPECT_DOUBLE_EQ(u.idle_ms, 1.0);
  EXPECT_DOUBLE_EQ(u.compute_ms, 1.5);
}

TEST(DeviceStepClock, AStepThatNeverEndsBreaksTheChainOfGaps) {
  ClockedBackend be;
  DeviceStepClock clock(be);
  step(clock, be, 0.0, 0.5, 2.0);
  be.now += 1.0;
  clock.begin();  // returns before its tokens: no end()
  be.now += 3.0;
  step(clock, be, 0.5, 0.5, 2.0);  // its gap would span the unfinished step: not counted
  step(clock, be, 0.25, 0.5, 2.0);
  const DeviceStepClock::Totals t = clock.take();
  EXPECT_EQ(t.steps, 3);
  EXPECT_EQ(t.gaps, 1);
  EXPECT_DOUBLE_EQ(t.idle_ms, 0.25);
  // forward() or end() without begin() records nothing.
  clock.forward();
  clock.end();
  EXPECT_EQ(clock.take().steps, 0);
}

TEST(DeviceStepClock, WithoutForwardTheWholeStepIsCompute) {
  ClockedBackend be;
  DeviceStepClock clock(be);
  clock.begin();
  be.now += 4.0;
  clock.end();
  const DeviceStepClock::Totals t = clock.take();
  EXPECT_EQ(t.steps, 1);
  EXPECT_DOUBLE_EQ(t.prepare_ms, 0.0);
  EXPECT_DOUBLE_EQ(t.compute_ms, 4.0);
}

TEST(DeviceStepClock, ABackendWithoutADeviceClockGivesNoTotals) {
  auto cpu = make_cpu_backend();
  DeviceStepClock clock(*cpu);
  clock.begin();
  clock.forward();
  clock.end();
  clock.begin();
  clock.end();
  const DeviceStepClock::Totals t = clock.take();
  EXPECT_FALSE(t.valid);
  EXPECT_EQ(t.steps, 0);
}

}  // namespace
}  // namespace hyllm
