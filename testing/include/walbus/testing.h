// walbus/testing.h: a bus for tests of code built on walbus, with virtual
// time (the walbus::testing component, library walbus_testing).
//
// A TestBus opens a bus on a fresh temporary directory (removed after)
// with a ManualClock: time moves only when the test says, and each step
// runs what falls due, follow-ups included, before it returns. A 15-minute
// timeout, a retry's backoff, a retention age: tested in milliseconds,
// with no sleep and no polling. What happened is kept to assert on: the
// events that entered the outbox, every run of the handlers subscribed
// through it, their failures, the dead letters. A handler can be made to
// fail on chosen attempts, and the bus restarted on the same directory to
// test recovery. It works with any test framework: calls return Status.
//
//   std::unique_ptr<walbus::testing::TestBus> t;
//   if (!walbus::testing::TestBus::Open(options, &t).ok()) ...
//   t->Subscribe(escalation);                 // the handler under test
//   t->Publish({received});                   // then run what it causes:
//   t->RunUntilIdle();
//   t->AdvanceTime(std::chrono::minutes(15));
//   assert(t->Published("field.order-escalated.v1").size() == 1);
//
// Threading: one thread (the test's) calls a TestBus. Handlers run on the
// bus's workers; the records are read between steps.
#ifndef WALBUS_TESTING_H_
#define WALBUS_TESTING_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/bus.h"
#include "walbus/clock.h"

namespace walbus::testing {

// One run of a handler subscribed through a TestBus.
struct HandlerRun {
  std::string subscriber;  // whose handler ran
  Event event;             // as the handler saw it (after any upcast)
  uint32_t attempt = 0;    // HandlerContext::Attempt(): 1, then 2, 3, ...
  // What it answered (unless it threw); kRetry for a Done whose unit had a
  // failed call (WriteScope::status), which the bus retries.
  Outcome::Kind outcome = Outcome::Kind::kDone;
  // Why it failed (kRetry, kReject, kWait): the reason given, the
  // exception's what() (`threw`), or "injected failure" (FailAttempts).
  std::string error;
  bool threw = false;     // the handler threw
  bool injected = false;  // FailAttempts answered instead of the handler
  // Whether this run failed: an exception, a retry or a rejection.
  bool failed() const { return threw || outcome == Outcome::Kind::kRetry || outcome == Outcome::Kind::kReject; }
};

// A bus under test, with virtual time (see the top of this file).
class TestBus {
 public:
  // How long a step may take in real time before it says TimedOut: a
  // handler that never returns, or one that keeps failing at once.
  static constexpr std::chrono::seconds kStepTimeout{60};

  // Opens a bus with `options`, except that its dir is a fresh temporary
  // directory (under $TMPDIR, else /tmp) and its clock a ManualClock. Not
  // started: subscribe first; the first step starts it.
  [[nodiscard]] static Status Open(Options options, std::unique_ptr<TestBus>* out);
  // Closes the bus and removes its directory.
  ~TestBus();
  TestBus(const TestBus&) = delete;
  TestBus& operator=(const TestBus&) = delete;

  // The bus under test: valid until Restart or the destructor.
  Bus& bus();
  // Its clock: moved by AdvanceTime, or by hand (then RunUntilIdle).
  ManualClock& clock();
  // The database directory (inside the temporary one).
  const std::string& dir() const;

  // Bus::Subscribe, with every run of the handler recorded (Runs) and the
  // failures FailAttempts asks for injected. Subscribed again by Restart.
  [[nodiscard]] Status Subscribe(SubscriberOptions subscriber);
  // Makes `subscriber`'s handler answer `instead` on these attempts of
  // each event (HandlerContext::Attempt), without running it: a transient
  // failure by default. Replaces what was asked before for it.
  void FailAttempts(const std::string& subscriber, std::vector<uint32_t> attempts,
                    Outcome instead = Outcome::RetryAfter(std::chrono::milliseconds(0)));

  // Publishes `events` in one transaction.
  [[nodiscard]] Result<Receipt> Publish(const std::vector<EventSpec>& events);

  // Starts the bus if it is not, then returns once nothing more can run
  // before the clock moves: every event due now handled, follow-ups and
  // scheduled events due now included; what waits for a later moment
  // (a timer, a retry's backoff) waits.
  [[nodiscard]] Status RunUntilIdle();
  // RunUntilIdle, then moves the clock forward by `d`, stopping at each
  // moment the bus has work for on the way (a timer, a retry's backoff)
  // to run what falls due there, as Temporal's time skipping does: a
  // timeout set by a step that ran within `d` fires within it too. Returns
  // once idle at the end.
  [[nodiscard]] Status AdvanceTime(std::chrono::milliseconds d);
  // Closes the bus and opens it again on the same directory and clock, as
  // a process restarting would; what was subscribed through the kit is
  // subscribed again, and the bus started again if it was.
  [[nodiscard]] Status Restart();

  // Every event that entered the outbox so far (published, fired,
  // ingested, handlers' follow-ups), in seq order; only those of `type`
  // when it is not empty. Complete after a step.
  std::vector<Event> Published(std::string_view type = {}) const;
  // The runs of the handlers subscribed through the kit, in the order
  // they ended; only `subscriber`'s when it is not empty.
  std::vector<HandlerRun> Runs(std::string_view subscriber = {}) const;
  // The runs that failed (HandlerRun::failed).
  std::vector<HandlerRun> Failures(std::string_view subscriber = {}) const;
  // The events `subscriber` gave up on, in seq order (Bus::EventStatus).
  Result<std::vector<Event>> DeadLettered(const std::string& subscriber);

 private:
  struct State;
  explicit TestBus(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace walbus::testing

#endif  // WALBUS_TESTING_H_
