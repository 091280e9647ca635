// Failure handling of handler runs (bus/dispatch/handler_runner.cc): retry budgets, dead
// letters, parked subjects, crash-loop protection, stale events. Against a
// real database; dead letters are read back with the operator's view.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "bus/dispatch/handler_runner.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tests/dispatch/runner_harness.h"
#include "tests/test_util.h"
#include "tools/walbus/inspect.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

using testing::OpenBus;

Options MakeOptions(const TempDir& dir) { return testing::TestOptions(dir); }

void Publish(Bus& bus, const std::string& subject, const std::string& data, uint64_t version = 0) {
  Transaction tx = bus.Begin();
  EventSpec e;
  e.type = kType;
  e.subject = subject;
  e.data = data;
  e.subject_version = version;
  ASSERT_TRUE(tx.Publish(e).ok());
  ASSERT_TRUE(tx.Commit().ok());
}

RetryPolicy FastRetries(uint32_t max_attempts) {
  RetryPolicy r;
  r.max_attempts = max_attempts;
  r.base = 1ms;
  r.cap = 2ms;
  return r;
}

std::vector<internal::DeadLetterEntry> DeadLetters(const std::string& dir) {
  std::vector<internal::DeadLetterEntry> out;
  Status s = internal::ListDeadLetters(dir, "", &out, SIZE_MAX);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// Records the data of every event the handler completed, in order.
struct Journal {
  std::mutex mu;
  std::vector<std::string> done;
  std::atomic<int> calls{0};
  void Add(const std::string& d) {
    std::lock_guard<std::mutex> lock(mu);
    done.push_back(d);
  }
  std::vector<std::string> Done() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }
};

SubscriberOptions PoisonAware(Journal* j, RetryPolicy retry) {
  SubscriberOptions s;
  s.name = "invoicing";
  s.retry = retry;
  s.handler_version = "invoicing-2.3";
  s.handler = [j](const Event& e, HandlerContext&) -> Outcome {
    ++j->calls;
    if (e.data == "poison") throw std::runtime_error("cannot parse order");
    j->Add(e.data);
    return Outcome::Done();
  };
  return s;
}

TEST(WorkerTest, PoisonIsDeadLetteredAndItsSubjectMovesOn) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Journal j;
  ASSERT_TRUE(bus->Subscribe(PoisonAware(&j, FastRetries(3))).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "poison");
  Publish(*bus, "order-1", "next-of-same-subject");
  Publish(*bus, "order-2", "other-subject");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(j.calls.load(), 3 + 2) << "three attempts on the poison, one run each for the others";
  auto done = j.Done();
  EXPECT_EQ(done.size(), 2u);
  SubscriberStats st = bus->Stats().subscribers[0];
  EXPECT_EQ(st.handled, 2u);
  EXPECT_EQ(st.dead_lettered, 1u);
  EXPECT_EQ(st.retries, 2u);
  EXPECT_EQ(st.checkpoint, 3u) << "nothing left pending: every event is handled or dead-lettered";

  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 1u);
  const auto& dl = letters[0];
  EXPECT_EQ(dl.subscriber, "invoicing");
  EXPECT_EQ(dl.seq, 1u);
  EXPECT_EQ(dl.record.attempts, 3u);
  EXPECT_NE(dl.record.error.find("cannot parse order"), std::string::npos) << dl.record.error;
  EXPECT_EQ(dl.record.handler_version, "invoicing-2.3");
  EXPECT_LE(dl.record.first_failure_ms, dl.record.last_failure_ms);
  ASSERT_TRUE(dl.event_ok) << dl.event_error;
  EXPECT_EQ(dl.event.data, "poison");
  EXPECT_EQ(dl.event.subject, "order-1");
}

TEST(WorkerTest, RejectAndPermanentExceptionsDeadLetterWithoutRetries) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<int> calls{0};
  SubscriberOptions s;
  s.name = "strict";
  s.retry = FastRetries(10);
  s.classify_exception = [](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::invalid_argument&) {
      return FailureClass::kPermanent;
    } catch (...) {
      return FailureClass::kTransient;
    }
  };
  s.handler = [&](const Event& e, HandlerContext&) -> Outcome {
    ++calls;
    if (e.data == "reject") return Outcome::Reject("amount is negative");
    if (e.data == "invalid") throw std::invalid_argument("no such currency");
    if (e.data == "flaky" && calls < 6) throw std::runtime_error("timeout");
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "a", "reject");
  Publish(*bus, "b", "invalid");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(calls.load(), 2) << "permanent failures are not retried";
  Publish(*bus, "c", "flaky");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(calls.load(), 6) << "transient exceptions are retried until they pass";
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 2u);
  EXPECT_NE(letters[0].record.error.find("rejected: amount is negative"), std::string::npos);
  EXPECT_EQ(letters[0].record.attempts, 1u);
  EXPECT_NE(letters[1].record.error.find("no such currency"), std::string::npos);
  SubscriberStats st = bus->Stats().subscribers[0];
  EXPECT_EQ(st.dead_lettered, 2u);
  EXPECT_EQ(st.handled, 1u);
}

// Outcome::Wait: not ready, not a failure. Waits spend no attempt, write
// no retry record, log at debug level and count apart from retries.
TEST(WorkerTest, WaitsAreNotFailedAttempts) {
  TempDir dir;
  auto logger = std::make_shared<testing::CapturingLogger>(LogLevel::kDebug);
  Options options = MakeOptions(dir);
  options.logger = logger;
  auto bus = OpenBus(options);
  std::atomic<int> calls{0};
  SubscriberOptions s;
  s.name = "uplink";
  s.retry = FastRetries(2);  // three waits would spend it, were they attempts
  s.handler = [&](const Event&, HandlerContext&) -> Outcome {
    const int call = ++calls;
    if (call <= 3) return Outcome::Wait(1ms, "modem down");
    if (call == 4) throw std::runtime_error("timeout");
    return Outcome::Reject("bad record");
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "a", "x");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(calls.load(), 5);
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].record.attempts, 2u) << "the throw and the reject; the waits were no attempts";
  const SubscriberStats st = bus->Stats().subscribers[0];
  EXPECT_EQ(st.waits, 3u);
  EXPECT_EQ(st.retries, 1u);
  EXPECT_NE(bus->MetricsText().find("walbus_subscriber_waits_total{subscriber=\"uplink\"} 3"), std::string::npos);
  const std::string log = logger->text();
  size_t waits = 0;
  for (size_t at = log.find("outcome=waiting"); at != std::string::npos; at = log.find("outcome=waiting", at + 1)) {
    ++waits;
  }
  EXPECT_EQ(waits, 3u) << log;
  EXPECT_NE(log.find("debug walbus event outcome=waiting subscriber=uplink"), std::string::npos) << log;
  EXPECT_NE(log.find("error=\"modem down\""), std::string::npos) << log;
  EXPECT_EQ(log.find("warning walbus event outcome=waiting"), std::string::npos) << log;
}

TEST(WorkerTest, ParkKeyHoldsTheSubjectBehindItsDeadLetterAcrossRestarts) {
  TempDir dir;
  Journal j;
  {
    auto bus = OpenBus(MakeOptions(dir));
    SubscriberOptions s = PoisonAware(&j, FastRetries(2));
    s.on_poison = PoisonPolicy::kParkKey;
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, "order-1", "poison");
    Publish(*bus, "order-1", "held");
    Publish(*bus, "order-2", "free");
    ASSERT_TRUE(bus->WaitIdle(10s).ok());
    EXPECT_EQ(j.Done(), std::vector<std::string>{"free"});
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = OpenBus(MakeOptions(dir));
  SubscriberOptions s = PoisonAware(&j, FastRetries(2));
  s.on_poison = PoisonPolicy::kParkKey;
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "still-held");
  Publish(*bus, "order-3", "free-too");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(j.Done(), (std::vector<std::string>{"free", "free-too"}));
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 3u) << "the poison and, in order behind it, the held events";
  EXPECT_EQ(letters[0].event.data, "poison");
  EXPECT_EQ(letters[1].event.data, "held");
  EXPECT_NE(letters[1].record.error.find("held behind the dead letter at seq 1"), std::string::npos)
      << letters[1].record.error;
  EXPECT_EQ(letters[2].event.data, "still-held");
}

TEST(WorkerTest, RetryBudgetSurvivesARestart) {
  TempDir dir;
  std::atomic<int> calls{0};
  auto failing = [&calls](RetryPolicy retry) {
    SubscriberOptions s;
    s.name = "failing";
    s.retry = retry;
    s.handler = [&calls](const Event&, HandlerContext&) {
      ++calls;
      return Outcome::RetryAfter(20ms);
    };
    return s;
  };
  {
    auto bus = OpenBus(MakeOptions(dir));
    ASSERT_TRUE(bus->Subscribe(failing(FastRetries(5))).ok());
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, "order-1", "x");
    ASSERT_TRUE(testing::Eventually([&] { return calls.load() >= 2; }));
    ASSERT_TRUE(bus->Close().ok());
  }
  const int before = calls.load();
  ASSERT_GE(before, 2);
  ASSERT_LT(before, 5);
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_TRUE(bus->Subscribe(failing(FastRetries(5))).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(calls.load(), 5) << "attempts before the restart count against the budget";
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].record.attempts, 5u);
}

EventId PublishOne(Bus& bus, const std::string& subject, const std::string& data) {
  Transaction tx = bus.Begin();
  EventSpec e;
  e.type = "orders.order-approved.v1";
  e.subject = subject;
  e.data = data;
  Result<EventId> id = tx.Publish(e);
  EXPECT_TRUE(id.ok());
  EXPECT_TRUE(tx.Commit().ok());
  return *id;
}

// What an application shows its user as pending: retrying (with attempts,
// the next attempt's time and the last error) and parked events, as
// EventStatus and Pending tell them.
TEST(WorkerTest, DeliveryStatesSayRetryingAndParked) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  SubscriberOptions billing;
  billing.name = "billing";
  billing.handler = [](const Event& e, HandlerContext&) {
    return e.data == "slow" ? Outcome::RetryAfter(1h) : Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(billing)).ok());
  SubscriberOptions ledger;
  ledger.name = "ledger";
  ledger.on_poison = PoisonPolicy::kParkKey;
  ledger.handler = [](const Event& e, HandlerContext&) {
    return e.data == "bad" ? Outcome::Reject("amount is negative") : Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(ledger)).ok());
  ASSERT_TRUE(bus->Start().ok());
  const auto before = std::chrono::system_clock::now();
  const EventId slow = PublishOne(*bus, "order-1", "slow");
  const EventId bad = PublishOne(*bus, "order-9", "bad");
  const EventId held = PublishOne(*bus, "order-9", "ok");
  PublishOne(*bus, "order-5", "ok");
  const auto state_of = [&](const EventId& id, const std::string& who) {
    Result<std::vector<DeliveryState>> states = bus->EventStatus(id);
    EXPECT_TRUE(states.ok()) << states.status().ToString();
    if (!states.ok()) return DeliveryState{};
    for (const DeliveryState& st : *states) {
      if (st.subscriber == who) return st;
    }
    return DeliveryState{};
  };
  ASSERT_TRUE(testing::Eventually([&] { return state_of(slow, "billing").state == Delivery::kRetrying; }, 10s));
  ASSERT_TRUE(testing::Eventually([&] { return state_of(bad, "ledger").state == Delivery::kDeadLettered; }, 10s));

  const DeliveryState retrying = state_of(slow, "billing");
  EXPECT_EQ(retrying.seq, 1u) << "found by id through its retry record";
  EXPECT_EQ(retrying.attempts, 1u);
  EXPECT_NE(retrying.last_error.find("retry"), std::string::npos) << retrying.last_error;
  ASSERT_TRUE(retrying.next_attempt.has_value());
  EXPECT_GE(*retrying.next_attempt, before + 59min);
  EXPECT_LE(*retrying.next_attempt, std::chrono::system_clock::now() + 61min);
  const DeliveryState letter = state_of(bad, "ledger");
  EXPECT_EQ(letter.attempts, 1u);
  EXPECT_NE(letter.last_error.find("amount is negative"), std::string::npos) << letter.last_error;

  Result<std::vector<DeliveryState>> billing_pending = bus->Pending("billing", 0);
  ASSERT_TRUE(billing_pending.ok());
  ASSERT_TRUE(testing::Eventually(
      [&] {
        billing_pending = bus->Pending("billing", 0);
        return billing_pending.ok() && billing_pending->size() == 1;
      },
      10s));
  EXPECT_EQ((*billing_pending)[0].id, slow);
  EXPECT_EQ((*billing_pending)[0].state, Delivery::kRetrying);
  Result<std::vector<DeliveryState>> ledger_pending = bus->Pending("ledger", 0);
  ASSERT_TRUE(testing::Eventually(
      [&] {
        ledger_pending = bus->Pending("ledger", 0);
        return ledger_pending.ok() && ledger_pending->size() == 1 && (*ledger_pending)[0].state == Delivery::kParked;
      },
      10s))
      << "the dead letter is not pending; the event behind it is, parked";
  EXPECT_EQ((*ledger_pending)[0].id, held);
  EXPECT_EQ((*ledger_pending)[0].state, Delivery::kParked);
  EXPECT_EQ((*ledger_pending)[0].parked_behind, 2u);
  EXPECT_EQ(bus->Pending("ledger", 1)->size(), 1u);
  const DeliveryState parked = state_of(held, "ledger");
  EXPECT_EQ(parked.state, Delivery::kParked);
  EXPECT_EQ(parked.parked_behind, 2u);
  EXPECT_TRUE(bus->Pending("nobody", 0).status().IsInvalidArgument());
}

// Attempts count handler runs. After a clean Close nothing was running:
// the events that were waiting then (handed to the dispatcher, not run),
// and those committed after the next open, start at attempt 1, however
// small the budget. (After a crash the events that may have been running
// are charged: HandlerThatAbortsTheProcessIsDeadLetteredAfterItsBudget.)
TEST(WorkerTest, CleanRestartChargesNoAttempt) {
  TempDir dir;
  std::mutex mu;
  std::map<std::string, uint32_t> first_attempt;
  std::atomic<bool> hold{true};
  auto recording = [&] {
    SubscriberOptions s;
    s.name = "recording";
    s.retry.max_attempts = 1;
    s.handler = [&](const Event& e, HandlerContext& ctx) {
      while (e.data == "first" && hold.load()) std::this_thread::sleep_for(1ms);
      std::lock_guard<std::mutex> lock(mu);
      first_attempt.emplace(e.data, ctx.Attempt());
      return Outcome::Done();
    };
    return s;
  };
  {
    auto bus = OpenBus(MakeOptions(dir));
    ASSERT_TRUE(bus->Subscribe(recording()).ok());
    ASSERT_TRUE(bus->Start().ok());
    // One subject: "first" runs and holds it; the rest wait behind it.
    for (const char* data : {"first", "waiting-1", "waiting-2", "waiting-3"}) Publish(*bus, "order-1", data);
    ASSERT_TRUE(testing::Eventually(
        [&] {
          const BusStats stats = bus->Stats();
          return !stats.subscribers.empty() && stats.subscribers[0].in_flight == 4;
        },
        10s));
    std::thread release([&] {
      std::this_thread::sleep_for(100ms);
      hold.store(false);
    });
    ASSERT_TRUE(bus->Close().ok());  // lets "first" finish, runs no other
    release.join();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_LT(first_attempt.size(), 4u) << "some events were waiting at the stop";
  }
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_TRUE(bus->Subscribe(recording()).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (int i = 0; i < 3; ++i) Publish(*bus, "order-" + std::to_string(i + 2), "after-" + std::to_string(i));
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(first_attempt.size(), 7u) << "none dead-lettered without running";
  for (const auto& [data, attempt] : first_attempt) EXPECT_EQ(attempt, 1u) << data;
  EXPECT_TRUE(DeadLetters(dir.path()).empty());
}

// Appends one byte to `path`: a mark that survives the process's abort.
void AppendMark(const std::string& path, char mark) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0 || write(fd, &mark, 1) != 1) _exit(3);
  close(fd);
}

std::string ReadMarks(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs the application again and again in a child process, each time
// until it is idle or until a handler aborts it, at most 10 times:
// `subscribe` adds its subscriber, `publish` its events on the first run.
// Returns how many children ran, and whether the last one came up and
// finished cleanly.
struct Relaunches {
  int children = 0;
  bool finished = false;
};
Relaunches RelaunchUntilClean(const Options& options, const std::function<SubscriberOptions()>& subscriber,
                              const std::function<bool(Bus&)>& publish) {
  Relaunches r;
  for (; r.children < 10 && !r.finished; ++r.children) {
    pid_t pid = fork();
    EXPECT_GE(pid, 0);
    if (pid < 0) return r;
    if (pid == 0) {
      std::unique_ptr<Bus> bus;
      if (!Bus::Open(options, &bus).ok()) _exit(2);
      if (!bus->Subscribe(subscriber()).ok() || !bus->Start().ok()) _exit(2);
      if (bus->Stats().last_seq == 0 && !publish(*bus)) _exit(4);
      _exit(bus->WaitIdle(10s).ok() && bus->Close().ok() ? 0 : 5);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r.finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!r.finished && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)) {
      ADD_FAILURE() << "child status " << status;
      return r;
    }
  }
  return r;
}

bool PublishAll(Bus& bus, const std::vector<std::pair<std::string, std::string>>& subject_data) {
  Transaction tx = bus.Begin();
  for (const auto& [subject, data] : subject_data) {
    EventSpec e;
    e.type = kType;
    e.subject = subject;
    e.data = data;
    if (!tx.Publish(e).ok()) return false;
  }
  return tx.Commit().ok();
}

// A handler that takes the whole process down on one event: each run
// counts as an attempt before it starts, so after the budget the event is
// dead-lettered without running and the application comes up again.
TEST(WorkerTest, HandlerThatAbortsTheProcessIsDeadLetteredAfterItsBudget) {
  TempDir dir;
  const std::string runs_file = dir.root() + "/poison-runs";
  constexpr uint32_t kBudget = 3;
  auto subscriber = [&] {
    SubscriberOptions s;
    s.name = "crashy";
    s.retry = FastRetries(kBudget);
    s.handler = [&runs_file](const Event& e, HandlerContext& ctx) {
      if (e.data == "poison") {
        AppendMark(runs_file, 'x');
        abort();
      }
      if (!ctx.Put("effects", e.subject, "done").ok()) return Outcome::RetryAfter(1ms);
      return Outcome::Done();
    };
    return s;
  };
  Relaunches r = RelaunchUntilClean(MakeOptions(dir), subscriber, [](Bus& bus) {
    return PublishAll(bus, {{"order-1", "poison"}, {"order-2", "fine"}});
  });
  ASSERT_TRUE(r.finished) << "the application must come up again";
  EXPECT_EQ(ReadMarks(runs_file).size(), kBudget) << "the poison ran exactly its budget";
  EXPECT_EQ(r.children, static_cast<int>(kBudget) + 1);
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].event.data, "poison");
  EXPECT_EQ(letters[0].record.attempts, kBudget);
  auto bus = OpenBus(MakeOptions(dir));
  Transaction reader = bus->Begin();
  EXPECT_EQ(reader.Get("effects", "order-2").value(), std::optional<std::string>("done"));
}

// After a crash, every event that may have been running runs alone: no
// other handler runs until its outcome commits. Otherwise a poison run
// beside it takes the process down again and charges it a recorded
// attempt each time, until the innocent event is dead-lettered too. Slow
// handlers on many subjects and four workers make runs overlap whenever
// the bus lets them.
TEST(WorkerTest, EventsThatMayHaveBeenRunningRunAloneAfterACrash) {
  TempDir dir;
  const std::string runs_file = dir.root() + "/poison-runs";
  const std::string overlaps_file = dir.root() + "/overlaps";
  constexpr uint32_t kBudget = 3;
  constexpr int kFineSubjects = 6;
  constexpr int kEventsPerSubject = 3;
  Options options = MakeOptions(dir);
  options.worker_threads = 4;
  // In the child: handlers running now, and whether one of them runs alone.
  static std::atomic<int> running{0};
  static std::atomic<bool> alone_running{false};
  auto subscriber = [&] {
    SubscriberOptions s;
    s.name = "crashy";
    s.retry = FastRetries(kBudget);
    s.handler = [&](const Event& e, HandlerContext& ctx) {
      const bool must_be_alone = ctx.Attempt() > 1;  // these never fail: charged for a crash
      if (running.fetch_add(1) != 0 && must_be_alone) AppendMark(overlaps_file, 'a');
      if (alone_running.load()) AppendMark(overlaps_file, 'b');
      if (e.data == "poison") {
        AppendMark(runs_file, 'x');
        abort();
      }
      alone_running.store(must_be_alone);
      std::this_thread::sleep_for(5ms);
      alone_running.store(false);
      running.fetch_sub(1);
      std::string count = ctx.Get("effects", e.subject).value().value_or("");
      if (!ctx.Put("effects", e.subject, count + "x").ok()) return Outcome::RetryAfter(1ms);
      return Outcome::Done();
    };
    return s;
  };
  std::vector<std::pair<std::string, std::string>> events = {{"order-1", "poison"}};
  for (int n = 0; n < kEventsPerSubject; ++n) {
    for (int k = 0; k < kFineSubjects; ++k) events.emplace_back("fine-" + std::to_string(k), "fine");
  }
  Relaunches r = RelaunchUntilClean(options, subscriber, [&](Bus& bus) { return PublishAll(bus, events); });
  ASSERT_TRUE(r.finished) << "the application must come up again";
  EXPECT_EQ(ReadMarks(overlaps_file), "") << "a: a charged event ran beside another; b: one ran beside it";
  EXPECT_EQ(ReadMarks(runs_file).size(), kBudget);
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 1u) << "an event that ran beside the poison was charged for its crashes";
  EXPECT_EQ(letters[0].event.data, "poison");
  auto bus = OpenBus(MakeOptions(dir));
  ReadView reader = bus->Read();
  for (int k = 0; k < kFineSubjects; ++k) {
    EXPECT_EQ(reader.Get("effects", "fine-" + std::to_string(k)).value(),
              std::optional<std::string>(std::string(kEventsPerSubject, 'x')));
  }
}

TEST(WorkerTest, StaleVersionsAreSkippedAndCounted) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  SubscriberOptions s;
  s.name = "projection";
  s.skip_stale = true;
  s.handler = [](const Event& e, HandlerContext& ctx) {
    if (!ctx.Put("effects", e.subject, std::to_string(e.subject_version)).ok()) return Outcome::RetryAfter(1ms);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "", 5);
  Publish(*bus, "order-1", "", 3);  // older, arriving later
  Publish(*bus, "order-1", "", 5);  // same version again
  Publish(*bus, "order-1", "", 6);
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  SubscriberStats st = bus->Stats().subscribers[0];
  EXPECT_EQ(st.handled, 2u);
  EXPECT_EQ(st.stale_skipped, 2u);
  Transaction reader = bus->Begin();
  EXPECT_EQ(reader.Get("effects", "order-1").value(), std::optional<std::string>("6"));
}

// A hot subject: the events queued behind its front one run in turns, each
// handler on top of the uncommitted writes of those before it.
constexpr int kHotEvents = 300;
constexpr const char* kHotSubject = "account-7";

// Publishes kHotEvents events of one subject in one commit, their data
// "0", "1", ...: once the first is running, the rest wait behind it.
void PublishHotSubject(Bus& bus) {
  Transaction tx = bus.Begin();
  for (int i = 0; i < kHotEvents; ++i) {
    EventSpec e;
    e.type = kType;
    e.subject = kHotSubject;
    e.data = std::to_string(i);
    ASSERT_TRUE(tx.Publish(e).ok());
  }
  ASSERT_TRUE(tx.Commit().ok());
}

// Counts the hot subject's events in effects/count, read and rewritten
// under ExpectVersion, and keeps a row per event under "log/": every run
// of event i must see a count of i, i rows, and the count's version i.
struct HotCounter {
  Bus* bus = nullptr;
  std::atomic<int> calls{0};
  std::atomic<int> ahead_of_storage{0};  // runs that read a count not committed yet
  // Its answer for event `index` before the counting (Done: count it).
  std::function<Outcome(int index, HandlerContext& ctx)> twist;
  // Without it, only the turn's order of commits keeps the count right.
  bool assert_versions = true;

  SubscriberOptions Subscriber() {
    SubscriberOptions s;
    s.name = "ledger";
    s.retry = FastRetries(5);
    s.handler = [this](const Event& e, HandlerContext& ctx) -> Outcome {
      ++calls;
      const int index = std::stoi(e.data);
      if (twist) {
        if (Outcome o = twist(index, ctx); o.kind() != Outcome::Kind::kDone) return o;
      }
      Result<VersionedValue> count = ctx.GetWithVersion("effects", "count");
      if (!count.ok()) return Outcome::RetryAfter(1ms);
      const int n = count->value ? std::stoi(*count->value) : 0;
      EXPECT_EQ(n, index) << "event " << index << " must see the effect of each event before it, once";
      if (assert_versions) {
        EXPECT_EQ(count->version, static_cast<uint64_t>(index));
      }
      Result<ScanPage> rows = ctx.Scan("effects", ScanOptions{.prefix = "log/"});
      EXPECT_TRUE(rows.ok());
      if (rows.ok()) {
        EXPECT_EQ(rows->rows.size(), static_cast<size_t>(index));
      }
      std::optional<std::string> stored = bus->Read().Get("effects", "count").value();
      if (n != (stored ? std::stoi(*stored) : 0)) ++ahead_of_storage;
      if (assert_versions) {
        EXPECT_TRUE(ctx.ExpectVersion("effects", "count", count->version).ok());
      }
      EXPECT_TRUE(ctx.Put("effects", "count", std::to_string(n + 1)).ok());
      char row[16];
      std::snprintf(row, sizeof(row), "log/%05d", index);
      EXPECT_TRUE(ctx.Put("effects", row, e.data).ok());
      return Outcome::Done();
    };
    return s;
  }

  // Subscribes, publishes the hot subject, lets every event be handled and
  // checks the count.
  void Run() {
    ASSERT_TRUE(bus->Subscribe(Subscriber()).ok());
    PublishHotSubject(*bus);
    ASSERT_TRUE(bus->Start().ok());
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    EXPECT_EQ(bus->Read().Get("effects", "count").value(), std::optional<std::string>(std::to_string(kHotEvents)));
    EXPECT_EQ(bus->Stats().subscribers[0].handled, static_cast<uint64_t>(kHotEvents));
  }
};

TEST(WorkerTest, AHotSubjectRunsInTurnsEachOnTopOfTheWritesBeforeIt) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  HotCounter counter{.bus = bus.get()};
  counter.Run();
  EXPECT_EQ(counter.calls.load(), kHotEvents);
  EXPECT_GT(counter.ahead_of_storage.load(), 0) << "no event ran on top of uncommitted writes: no turn formed";
  EXPECT_EQ(bus->Stats().subscribers[0].conflicts, 0u) << "a version asserted in a turn must count the ones before";
}

TEST(WorkerTest, AFailureInATurnCommitsTheEventsBeforeItAndRunsTheRestAfterIt) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  HotCounter counter{.bus = bus.get()};
  std::atomic<int> failures{0};
  counter.twist = [&](int index, HandlerContext& ctx) {
    if (ctx.Attempt() > 1) return Outcome::Done();
    if (index == 100) {
      ++failures;
      return Outcome::RetryAfter(1ms);
    }
    if (index == 150) {
      ++failures;
      throw std::runtime_error("the ledger is busy");
    }
    return Outcome::Done();
  };
  counter.Run();
  EXPECT_EQ(failures.load(), 2);
  EXPECT_EQ(counter.calls.load(), kHotEvents + 2);
  EXPECT_EQ(bus->Stats().subscribers[0].retries, 2u);
}

TEST(WorkerTest, AConflictInATurnRerunsItsEventAndWhatFollows) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  HotCounter counter{.bus = bus.get(), .assert_versions = false};
  std::atomic<bool> interfered{false};
  counter.twist = [&](int index, HandlerContext& ctx) {
    if (index != 100 || interfered.exchange(true)) return Outcome::Done();
    // Event 100 asserts the version of a key another commit moves first.
    const uint64_t v = ctx.GetVersion("effects", "guard").value();
    Transaction other = bus->Begin();
    EXPECT_TRUE(other.ExpectVersion("effects", "guard", v).ok());
    EXPECT_TRUE(other.Put("effects", "guard", "moved").ok());
    EXPECT_TRUE(other.Commit().ok());
    EXPECT_TRUE(ctx.ExpectVersion("effects", "guard", v).ok());
    return Outcome::Done();
  };
  counter.Run();
  EXPECT_EQ(bus->Stats().subscribers[0].conflicts, 1u);
  EXPECT_GT(counter.calls.load(), kHotEvents) << "event 100 ran again";
}

TEST(WorkerTest, StaleSkipsInATurnSeeTheVersionsAppliedBeforeThem) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  SubscriberOptions s;
  s.name = "projection";
  s.skip_stale = true;
  std::atomic<int> calls{0};
  s.handler = [&](const Event& e, HandlerContext& ctx) {
    ++calls;
    if (!ctx.Put("effects", e.subject, std::to_string(e.subject_version)).ok()) return Outcome::RetryAfter(1ms);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  // Queued behind one another: the repeated versions run in the same turn
  // as the first of theirs.
  Transaction tx = bus->Begin();
  for (uint64_t version : {1, 2, 2, 3, 4, 4, 4, 5}) {
    EventSpec e;
    e.type = kType;
    e.subject = "order-1";
    e.subject_version = version;
    ASSERT_TRUE(tx.Publish(e).ok());
  }
  ASSERT_TRUE(tx.Commit().ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  SubscriberStats st = bus->Stats().subscribers[0];
  EXPECT_EQ(calls.load(), 5);
  EXPECT_EQ(st.handled, 5u);
  EXPECT_EQ(st.stale_skipped, 3u);
}

TEST(WorkerTest, FailingSubjectBacksOffAndNeverDelaysOthers) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<int> poison_calls{0};
  std::atomic<int> others{0};
  SubscriberOptions s;
  s.name = "mixed";
  s.retry.max_attempts = 100000;
  s.retry.base = 10ms;
  s.retry.cap = 40ms;
  s.handler = [&](const Event& e, HandlerContext&) -> Outcome {
    if (e.subject == "poison") {
      ++poison_calls;
      throw std::runtime_error("always");
    }
    ++others;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "poison", "");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) Publish(*bus, "order-" + std::to_string(i), "");
  ASSERT_TRUE(testing::Eventually([&] { return others.load() == 100; }, 10s));
  std::this_thread::sleep_until(start + 600ms);
  const int attempts = poison_calls.load();
  // Full jitter up to 40 ms averages about 20 ms: some 30 attempts in
  // 600 ms. A spinning retry would make thousands.
  EXPECT_GE(attempts, 5);
  EXPECT_LE(attempts, 150);
}

// A subscriber that only the age budget stops: unbounded attempts, a fixed
// delay, `max_age`.
SubscriberOptions Aging(std::chrono::milliseconds delay, std::chrono::milliseconds max_age, Handler handler) {
  SubscriberOptions s;
  s.name = "aging";
  s.retry.max_attempts = 1000000;
  s.retry.base = delay;
  s.retry.cap = delay;
  s.retry.max_age = max_age;
  s.handler = std::move(handler);
  return s;
}

TEST(WorkerTest, MaxAgeDeadLettersOnTheInjectedClock) {
  TempDir dir;
  Options o = MakeOptions(dir);
  auto clock = std::make_shared<testing::ManualClock>();
  o.clock = clock;
  auto bus = OpenBus(o);
  std::atomic<int> calls{0};
  SubscriberOptions s = Aging(100ms, 10s, [&](const Event&, HandlerContext&) {
    ++calls;
    return Outcome::RetryAfter(0ms);
  });
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "");
  int64_t advanced_ms = 0;
  ASSERT_TRUE(testing::Eventually(
      [&] {
        if (bus->Stats().subscribers[0].dead_lettered == 1) return true;
        clock->Advance(100ms);
        advanced_ms += 100;
        return false;
      },
      60s));
  EXPECT_GE(advanced_ms, 10000) << "not before max_age on the injected clock";
  EXPECT_LE(calls.load(), 10000 / 1 + 1);
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_NE(letters[0].record.error.find("max_age"), std::string::npos) << letters[0].record.error;
  EXPECT_GE(letters[0].record.last_failure_ms - letters[0].record.first_failure_ms, 10000u);
}

void PublishTyped(Bus& bus, const std::string& type, const std::string& subject, const std::string& data) {
  Transaction tx = bus.Begin();
  EventSpec e;
  e.type = type;
  e.subject = subject;
  e.data = data;
  ASSERT_TRUE(tx.Publish(e).ok());
  ASSERT_TRUE(tx.Commit().ok());
}

// Takes v2 only; records "<type>:<data>" of what it handled.
SubscriberOptions V2Reader(Journal* j, UnknownVersionPolicy policy) {
  SubscriberOptions s;
  s.name = "v2-reader";
  s.types = {"orders.order-approved.v2"};
  s.on_unknown_version = policy;
  s.handler = [j](const Event& e, HandlerContext&) {
    j->Add(e.type + ":" + e.data);
    return Outcome::Done();
  };
  return s;
}

TEST(WorkerTest, OldVersionsAreUpcastForSubscribersOfTheNewOne) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Journal j;
  ASSERT_TRUE(bus->Subscribe(V2Reader(&j, UnknownVersionPolicy::kPause)).ok());
  ASSERT_TRUE(bus->Contracts()
                  .RegisterUpcaster("orders.order-approved.v1", "orders.order-approved.v2",
                                    [](const Event& e) -> Result<std::string> { return "{" + e.data + "}"; })
                  .ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishTyped(*bus, "orders.order-approved.v1", "order-1", "old");
  PublishTyped(*bus, "orders.order-approved.v2", "order-1", "{new}");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(j.Done(), (std::vector<std::string>{"orders.order-approved.v2:{old}", "orders.order-approved.v2:{new}"}));
}

TEST(WorkerTest, UnknownVersionPausesTheSubscriberUntilAnUpcasterArrives) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Journal j, other;
  ASSERT_TRUE(bus->Subscribe(V2Reader(&j, UnknownVersionPolicy::kPause)).ok());
  SubscriberOptions audit;
  audit.name = "audit";
  audit.handler = [&other](const Event& e, HandlerContext&) {
    other.Add(e.data);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(audit)).ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishTyped(*bus, "orders.order-approved.v1", "order-1", "old");
  ASSERT_TRUE(testing::Eventually(
      [&] {
        for (const auto& s : bus->Stats().subscribers)
          if (s.name == "v2-reader") return s.paused;
        return false;
      },
      10s));
  // Events that were already running when it paused may finish; nothing
  // committed after the pause is handled, not even on other subjects.
  PublishTyped(*bus, "orders.order-approved.v2", "order-2", "{new}");
  ASSERT_TRUE(testing::Eventually([&] { return other.Done().size() == 2; }, 10s)) << "others are unaffected";
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(j.Done().empty()) << "no progress while paused";
  ASSERT_TRUE(bus->Contracts()
                  .RegisterUpcaster("orders.order-approved.v1", "orders.order-approved.v2",
                                    [](const Event& e) -> Result<std::string> { return "{" + e.data + "}"; })
                  .ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  auto done = j.Done();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_NE(std::find(done.begin(), done.end(), "orders.order-approved.v2:{old}"), done.end());
  for (const auto& s : bus->Stats().subscribers) {
    if (s.name != "v2-reader") continue;
    EXPECT_FALSE(s.paused);
    EXPECT_EQ(s.pauses, 1u);
    EXPECT_EQ(s.handled, 2u);
  }
}

TEST(WorkerTest, UnknownVersionCanDeadLetterInstead) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Journal j;
  ASSERT_TRUE(bus->Subscribe(V2Reader(&j, UnknownVersionPolicy::kDeadLetter)).ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishTyped(*bus, "orders.order-approved.v3", "order-1", "future");
  PublishTyped(*bus, "orders.order-approved.v2", "order-1", "{now}");
  PublishTyped(*bus, "billing.invoice-raised.v1", "order-1", "not mine");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(j.Done(), std::vector<std::string>{"orders.order-approved.v2:{now}"});
  auto letters = DeadLetters(dir.path());
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_NE(letters[0].record.error.find("no upcaster brings orders.order-approved.v3"), std::string::npos)
      << letters[0].record.error;
}

TEST(WorkerTest, WallClockJumpingBackDoesNotSpendTheAgeBudget) {
  TempDir dir;
  Options o = MakeOptions(dir);
  auto clock = std::make_shared<testing::ManualClock>();
  o.clock = clock;
  auto bus = OpenBus(o);
  std::atomic<int> calls{0};
  SubscriberOptions s = Aging(10ms, 60s, [&](const Event&, HandlerContext&) {
    if (++calls == 1) clock->StepWall(-std::chrono::hours(1));  // NTP steps back after the first failure
    return Outcome::RetryAfter(10ms);
  });
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "");
  ASSERT_TRUE(testing::Eventually(
      [&] {
        clock->Advance(10ms);
        return calls.load() >= 20;
      },
      30s));
  EXPECT_EQ(bus->Stats().subscribers[0].dead_lettered, 0u) << "a negative age is no age";
  clock->StepWall(std::chrono::hours(1));
  ASSERT_TRUE(testing::Eventually(
      [&] {
        clock->Advance(1000ms);
        return bus->Stats().subscribers[0].dead_lettered == 1;
      },
      30s))
      << "the budget still ends once real age passes max_age";
}

TEST(WorkerTest, RedriveReleasesAParkedSubjectInOriginalOrder) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Journal j;
  std::atomic<bool> fixed{false};
  SubscriberOptions s;
  s.name = "ledger";
  s.retry = FastRetries(2);
  s.on_poison = PoisonPolicy::kParkKey;
  s.handler = [&](const Event& e, HandlerContext&) -> Outcome {
    if (e.data == "poison" && !fixed.load()) throw std::runtime_error("bug in the handler");
    j.Add(e.subject + ":" + e.data);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "acct-1", "poison");
  Publish(*bus, "acct-1", "second");
  Publish(*bus, "acct-2", "other");
  Publish(*bus, "acct-1", "third");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(j.Done(), std::vector<std::string>{"acct-2:other"});
  ASSERT_EQ(DeadLetters(dir.path()).size(), 3u);

  OperatorAction who{.operator_name = "alice", .reason = "fixed the parser", .dry_run = true};
  Result<ActionReport> dry_run = bus->Operator().RedriveDeadLetters({.subscriber = "ledger", .subject = "acct-1"}, who);
  ASSERT_TRUE(dry_run.ok()) << dry_run.status().ToString();
  const ActionReport& dry = *dry_run;
  EXPECT_EQ(dry.seqs, (std::vector<uint64_t>{1, 2, 4}));
  EXPECT_EQ(dry.released_subjects, std::vector<std::string>{"acct-1"});
  EXPECT_EQ(dry.action_id, 0u) << "a dry run records nothing";
  EXPECT_EQ(DeadLetters(dir.path()).size(), 3u) << "and changes nothing";

  fixed = true;
  who.dry_run = false;
  Result<ActionReport> redriven = bus->Operator().RedriveDeadLetters({.subscriber = "ledger", .seqs = {1}}, who);
  ASSERT_TRUE(redriven.ok()) << redriven.status().ToString();
  const ActionReport& done = *redriven;
  EXPECT_EQ(done.action_id, 1u);
  EXPECT_EQ(done.released_subjects, std::vector<std::string>{"acct-1"});
  ASSERT_TRUE(testing::Eventually([&] { return j.Done().size() == 4; }, 10s));
  Publish(*bus, "acct-1", "fourth");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(j.Done(), (std::vector<std::string>{"acct-2:other", "acct-1:poison", "acct-1:second", "acct-1:third",
                                                "acct-1:fourth"}))
      << "the held events come back behind the poison, in order, before anything new";
  EXPECT_TRUE(DeadLetters(dir.path()).empty());
  EXPECT_EQ(bus->Stats().subscribers[0].checkpoint, 5u);
}

TEST(WorkerTest, SkipReleasesAndPurgeDeletesWithARecord) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Journal j;
  SubscriberOptions s = PoisonAware(&j, FastRetries(1));
  s.on_poison = PoisonPolicy::kParkKey;
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "poison");
  Publish(*bus, "order-1", "held");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  OperatorAction who{.operator_name = "bob", .reason = "order cancelled"};
  EXPECT_TRUE(bus->Operator()
                  .SkipDeadLetters({.subscriber = "invoicing"}, {.operator_name = "bob"})
                  .status()
                  .IsInvalidArgument())
      << "a reason is required";
  Result<ActionReport> skipped =
      bus->Operator().SkipDeadLetters({.subscriber = "invoicing", .subject = "order-1"}, who);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(skipped->released_subjects, std::vector<std::string>{"order-1"});
  Publish(*bus, "order-1", "after-skip");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(j.Done(), std::vector<std::string>{"after-skip"}) << "released without running the skipped ones";
  EXPECT_EQ(DeadLetters(dir.path()).size(), 2u) << "skipped dead letters stay for inspection";
  Result<ActionReport> purged = bus->Operator().PurgeDeadLetters({.subscriber = "invoicing"}, who);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->seqs, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(purged->action_id, 2u);
  EXPECT_TRUE(DeadLetters(dir.path()).empty());
}

// Regression: after a restart, conflict reruns of events that may have been
// running must not count as attempts (they used to, and contended handlers
// were dead-lettered).
TEST(WorkerTest, ConflictRerunsAfterARestartDoNotSpendTheBudget) {
  TempDir dir;
  constexpr int kEvents = 200;
  auto subscriber = [](Handler handler) {
    SubscriberOptions s;
    s.name = "totals";
    s.retry = FastRetries(4);
    s.handler = std::move(handler);
    return s;
  };
  {
    auto bus = OpenBus(MakeOptions(dir));
    std::atomic<int> ran{0};
    ASSERT_TRUE(bus->Subscribe(subscriber([&ran](const Event&, HandlerContext&) {
                     ++ran;
                     return Outcome::RetryAfter(std::chrono::hours(1));  // dispatched, never done
                   }))
                    .ok());
    ASSERT_TRUE(bus->Start().ok());
    for (int i = 0; i < kEvents; ++i) Publish(*bus, "order-" + std::to_string(i), "x");
    ASSERT_TRUE(testing::Eventually([&] { return ran.load() >= kEvents; }, 30s)) << "every event was dispatched";
    ASSERT_TRUE(bus->Close().ok());
  }
  Options o = MakeOptions(dir);
  o.worker_threads = 4;
  auto bus = OpenBus(o);
  ASSERT_TRUE(bus->Subscribe(subscriber([](const Event&, HandlerContext& ctx) {
                   // One shared total: concurrent subjects conflict often.
                   uint64_t v = ctx.GetVersion("effects", "total").value();
                   auto cur = ctx.Get("effects", "total").value();
                   const int n = cur ? std::stoi(*cur) : 0;
                   EXPECT_TRUE(ctx.ExpectVersion("effects", "total", v).ok());
                   EXPECT_TRUE(ctx.Put("effects", "total", std::to_string(n + 1)).ok());
                   return Outcome::Done();
                 }))
                  .ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  EXPECT_EQ(bus->Stats().subscribers[0].dead_lettered, 0u);
  Transaction reader = bus->Begin();
  EXPECT_EQ(reader.Get("effects", "total").value(), std::optional<std::string>(std::to_string(kEvents)));
}

using testing::RunnerHarness;

std::string InboxKeyOf(storage::Db& db, const Event& e) {
  return storage::InboxKey(db.inbox_layout(), 7, storage::IdBytes(e.id));
}

TEST(HandlerRunnerTest, ADoneRunCommitsItsEffectWithTheInboxRecord) {
  TempDir dir;
  RunnerHarness h(dir.path());
  ASSERT_TRUE(h.opened().ok()) << h.opened().ToString();
  auto sub = h.NewSubscriber([](const Event& e, HandlerContext& ctx) {
    EXPECT_TRUE(ctx.Put("state", "row", e.data).ok());
    return Outcome::Done();
  });
  std::shared_ptr<const Event> event = RunnerHarness::MakeEvent(1, "v1");
  std::vector<internal::Message> replies = h.Run(sub.get(), event);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].kind, internal::Message::Kind::kDone);
  EXPECT_EQ(replies[0].sub, sub.get());
  EXPECT_EQ(h.ReadState("row"), std::optional<std::string>("v1"));
  EXPECT_TRUE(h.Read(storage::Cf::kInbox, InboxKeyOf(h.db(), *event)).has_value());
}

TEST(HandlerRunnerTest, AFailedRunLeavesARetryRecordAndTheLastADeadLetter) {
  TempDir dir;
  RunnerHarness h(dir.path());
  ASSERT_TRUE(h.opened().ok()) << h.opened().ToString();
  auto sub = h.NewSubscriber(
      [](const Event&, HandlerContext& ctx) {
        EXPECT_TRUE(ctx.Put("state", "row", "never").ok());  // dropped with the attempt
        throw std::runtime_error("boom");
        return Outcome::Done();
      },
      /*max_attempts=*/2);
  std::shared_ptr<const Event> event = RunnerHarness::MakeEvent(1, "x");
  std::vector<internal::Message> first = h.Run(sub.get(), event);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, internal::Message::Kind::kRetry);
  EXPECT_EQ(first[0].next.runs, 1u);
  EXPECT_FALSE(first[0].next.check_stored);
  const std::string key = storage::SubscriberSeqKey(7, 1);
  std::optional<std::string> retry = h.Read(storage::Cf::kRetries, key);
  ASSERT_TRUE(retry.has_value());
  storage::RetryRecord record;
  ASSERT_TRUE(storage::DecodeRetry(*retry, &record));
  EXPECT_EQ(record.attempts, 1u);
  EXPECT_NE(record.last_error.find("boom"), std::string::npos);
  EXPECT_FALSE(h.ReadState("row").has_value());

  std::vector<internal::Message> last = h.Run(sub.get(), event, /*attempt=*/2);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].kind, internal::Message::Kind::kDeadLettered);
  EXPECT_FALSE(h.Read(storage::Cf::kRetries, key).has_value());
  std::optional<std::string> dead = h.Read(storage::Cf::kDeadLetters, key);
  ASSERT_TRUE(dead.has_value());
  storage::DeadLetterRecord letter;
  ASSERT_TRUE(storage::DecodeDeadLetter(*dead, &letter));
  EXPECT_EQ(letter.attempts, 2u);
  EXPECT_FALSE(h.ReadState("row").has_value());
}

TEST(HandlerRunnerTest, AnEventTheInboxHasIsADuplicateAndDoesNotRun) {
  TempDir dir;
  RunnerHarness h(dir.path());
  ASSERT_TRUE(h.opened().ok()) << h.opened().ToString();
  int runs = 0;
  auto sub = h.NewSubscriber([&](const Event&, HandlerContext&) {
    ++runs;
    return Outcome::Done();
  });
  std::shared_ptr<const Event> event = RunnerHarness::MakeEvent(1, "x");
  ASSERT_EQ(h.Run(sub.get(), event).at(0).kind, internal::Message::Kind::kDone);
  // Delivered again after a restart before the checkpoint: memory may be
  // behind storage, so the runner looks at the inbox first.
  std::vector<internal::Message> again = h.Run(sub.get(), event, 1, /*check_stored=*/true);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].kind, internal::Message::Kind::kDuplicate);
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace walbus
