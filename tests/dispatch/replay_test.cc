// bus/dispatch/replay.cc: OperatorActions::StartReplay against a real database: same-inbox and
// fresh-scope modes, per-subject order beside live events, dry runs,
// cancellation, resumption after SIGKILL, and replays recorded while their
// subscriber is not running.
#include "bus/dispatch/replay.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr char kType[] = "orders.order-placed.v1";

Options ReplayOptions(const TempDir& dir) {
  Options o = testing::TestOptions(dir);
  o.retain_events = 100000;
  o.trim_interval = 10ms;
  return o;
}

// Runs of each event (by id) and each subject's runs in order.
struct RunLog {
  std::mutex mu;
  std::map<std::string, int> runs_by_id;
  std::map<std::string, std::vector<uint64_t>> seqs_by_subject;
  std::set<std::string> running;  // subjects with a run in progress
  bool overlapped = false;

  void Enter(const Event& e) {
    std::lock_guard<std::mutex> lock(mu);
    ++runs_by_id[e.id.ToString()];
    seqs_by_subject[e.subject].push_back(e.seq);
    overlapped |= !running.insert(e.subject).second;
  }
  void Leave(const Event& e) {
    std::lock_guard<std::mutex> lock(mu);
    running.erase(e.subject);
  }
  int Runs(const EventId& id) {
    std::lock_guard<std::mutex> lock(mu);
    return runs_by_id[id.ToString()];
  }
  size_t TotalRuns() {
    std::lock_guard<std::mutex> lock(mu);
    size_t runs = 0;
    for (const auto& [id, n] : runs_by_id) runs += static_cast<size_t>(n);
    return runs;
  }
};

// A subscriber that logs its runs and rejects events of subject "bad"
// while *broken is true.
SubscriberOptions Projection(RunLog* log, std::atomic<bool>* broken, bool side_effect_safe = false,
                             std::chrono::microseconds pause = 0us) {
  SubscriberOptions s;
  s.name = "projection";
  s.types = {kType};
  s.side_effect_safe = side_effect_safe;
  s.retry.max_attempts = 1;
  s.handler = [log, broken, pause](const Event& e, HandlerContext&) {
    log->Enter(e);
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    log->Leave(e);
    if (e.subject == "bad" && broken->load()) return Outcome::Reject("broken");
    return Outcome::Done();
  };
  return s;
}

// Opens a bus in `dir` with `projection` subscribed and started; null
// (the test failed) when it cannot.
std::unique_ptr<Bus> StartProjection(const TempDir& dir, SubscriberOptions projection) {
  auto bus = testing::OpenBus(ReplayOptions(dir));
  if (bus == nullptr) return nullptr;
  EXPECT_TRUE(bus->Subscribe(std::move(projection)).ok());
  EXPECT_TRUE(bus->Start().ok());
  return bus;
}

std::vector<Receipt> PublishMany(Bus& bus, int n, const std::function<std::string(int)>& subject) {
  std::vector<Receipt> receipts;
  for (int i = 0; i < n; ++i) {
    Transaction tx = bus.Begin();
    EXPECT_TRUE(tx.Publish({.type = kType, .subject = subject(i), .data = "{}"}).ok());
    auto r = tx.Commit();
    EXPECT_TRUE(r.ok());
    if (r.ok()) receipts.push_back(*r);
  }
  return receipts;
}

ReplayRequest Request(ReplayMode mode) {
  ReplayRequest r;
  r.subscriber = "projection";
  r.mode = mode;
  r.action = {"ops-anna", "rebuild after fix 123", false};
  return r;
}

// Waits for the replay to end; returns its last report.
// OperatorActions::StartReplay and OperatorActions::Replay as a status and a report, which most
// checks here read apart.
Status ReplayInto(Bus& bus, const ReplayRequest& request, ReplayReport* report) {
  Result<ReplayReport> r = bus.Operator().StartReplay(request);
  if (r.ok()) *report = std::move(*r);
  return r.status();
}
Status GetReplayInto(Bus& bus, uint64_t id, ReplayReport* report) {
  Result<ReplayReport> r = bus.Operator().Replay(id);
  if (r.ok()) *report = std::move(*r);
  return r.status();
}

ReplayReport WaitReplay(Bus& bus, uint64_t id, std::chrono::milliseconds timeout = 30s) {
  ReplayReport report;
  testing::Eventually(
      [&] {
        EXPECT_TRUE(GetReplayInto(bus, id, &report).ok());
        return report.state != ReplayState::kRunning;
      },
      timeout);
  return report;
}

TEST(ReplayTest, SameInboxSkipsHandledEventsAndRunsWhatFailed) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{true};
  auto bus = StartProjection(dir, Projection(&log, &broken));
  ASSERT_NE(bus, nullptr);
  auto receipts =
      PublishMany(*bus, 50, [](int i) { return i % 10 == 0 ? std::string("bad") : "o" + std::to_string(i % 7); });
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  ASSERT_EQ(bus->Stats().subscribers[0].dead_lettered, 5u);
  broken = false;  // the fix is deployed

  ReplayReport report;
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kSameInbox), &report).ok());
  ASSERT_NE(report.replay_id, 0u);
  report = WaitReplay(*bus, report.replay_id);
  EXPECT_EQ(report.state, ReplayState::kDone);
  EXPECT_EQ(report.selected, 50u);
  EXPECT_EQ(report.delivered, 5u);
  EXPECT_EQ(report.skipped, 45u);
  EXPECT_EQ(report.failed, 0u);
  EXPECT_EQ(report.operator_name, "ops-anna");
  EXPECT_NE(report.ended, std::chrono::system_clock::time_point{});
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(log.Runs(receipts[i].event_ids[0]), i % 10 == 0 ? 2 : 1) << "event " << i;
  }
  Result<std::vector<DeliveryState>> found = bus->EventStatus(receipts[0].event_ids[0]);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  const std::vector<DeliveryState>& states = *found;
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].state, Delivery::kHandled) << "the dead letter is gone once it ran";
  EXPECT_EQ(bus->Stats().subscribers[0].duplicates, 0u) << "skips of a replay are its own count";
  const std::string metrics = bus->MetricsText();
  EXPECT_NE(metrics.find("walbus_replay_events_persisted{subscriber=\"projection\",outcome=\"delivered\"} 5"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("walbus_replays_running{subscriber=\"projection\"} 0"), std::string::npos);
}

TEST(ReplayTest, LeavesAParkedSubjectToTheRedrive) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{true};
  SubscriberOptions parking = Projection(&log, &broken);
  parking.on_poison = PoisonPolicy::kParkKey;
  auto bus = StartProjection(dir, std::move(parking));
  ASSERT_NE(bus, nullptr);
  auto receipts =
      PublishMany(*bus, 10, [](int i) { return i == 3 || i == 7 ? std::string("bad") : "o" + std::to_string(i); });
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  ASSERT_EQ(bus->Stats().subscribers[0].dead_lettered, 2u) << "the failure and the event held behind it";
  broken = false;

  ReplayReport report;
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kSameInbox), &report).ok());
  report = WaitReplay(*bus, report.replay_id);
  EXPECT_EQ(report.selected, 10u);
  EXPECT_EQ(report.delivered, 0u);
  EXPECT_EQ(report.skipped, 10u);
  EXPECT_EQ(log.Runs(receipts[3].event_ids[0]), 1) << "the parked subject waits for its redrive";

  ASSERT_TRUE(bus->Operator()
                  .RedriveDeadLetters({.subscriber = "projection", .subject = "bad"}, {"ops-anna", "fixed", false})
                  .ok());
  ASSERT_TRUE(testing::Eventually([&] { return log.Runs(receipts[7].event_ids[0]) == 1; }));
  EXPECT_EQ(log.Runs(receipts[3].event_ids[0]), 2);
}

TEST(ReplayTest, FreshScopeRunsEveryEventAgainOnlyForSideEffectSafeSubscribers) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{false};
  {
    auto bus = StartProjection(dir, Projection(&log, &broken, /*side_effect_safe=*/false));
    ASSERT_NE(bus, nullptr);
    PublishMany(*bus, 20, [](int i) { return "o" + std::to_string(i % 3); });
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ReplayReport report;
    Status s = ReplayInto(*bus, Request(ReplayMode::kFreshScope), &report);
    EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
    EXPECT_NE(s.message().find("side_effect_safe"), std::string::npos);
    EXPECT_TRUE(GetReplayInto(*bus, 1, &report).IsNotFound()) << "a refused replay records nothing";
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = StartProjection(dir, Projection(&log, &broken, /*side_effect_safe=*/true));
  ASSERT_NE(bus, nullptr);
  ReplayReport report;
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kFreshScope), &report).ok());
  report = WaitReplay(*bus, report.replay_id);
  EXPECT_EQ(report.state, ReplayState::kDone);
  EXPECT_EQ(report.selected, 20u);
  EXPECT_EQ(report.delivered, 20u);
  EXPECT_EQ(report.skipped, 0u);
  std::lock_guard<std::mutex> lock(log.mu);
  for (const auto& [id, runs] : log.runs_by_id) EXPECT_EQ(runs, 2) << id;
}

// A handler tells a replay's run from a live one, and which replay it is.
TEST(ReplayTest, TheContextSaysWhichReplayARunBelongsTo) {
  TempDir dir;
  std::mutex mu;
  std::vector<std::optional<HandlerContext::ReplayRun>> runs;
  std::atomic<bool> broken{true};
  SubscriberOptions s;
  s.name = "projection";
  s.types = {kType};
  s.side_effect_safe = true;
  s.retry.max_attempts = 1;
  s.handler = [&](const Event& e, HandlerContext& ctx) {
    {
      std::lock_guard<std::mutex> lock(mu);
      runs.push_back(ctx.Replaying());
    }
    if (e.subject == "bad" && broken.load()) return Outcome::Reject("broken");
    return Outcome::Done();
  };
  auto bus = StartProjection(dir, std::move(s));
  ASSERT_NE(bus, nullptr);
  PublishMany(*bus, 4, [](int i) { return i == 0 ? std::string("bad") : "o" + std::to_string(i); });
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  broken = false;
  ReplayReport same;
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kSameInbox), &same).ok());
  ASSERT_EQ(WaitReplay(*bus, same.replay_id).delivered, 1u) << "the dead letter runs again";
  ReplayReport fresh;
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kFreshScope), &fresh).ok());
  ASSERT_EQ(WaitReplay(*bus, fresh.replay_id).delivered, 4u);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(runs.size(), 9u);
  for (size_t i = 0; i < 4; ++i) EXPECT_FALSE(runs[i].has_value()) << "live run " << i;
  ASSERT_TRUE(runs[4].has_value());
  EXPECT_EQ(runs[4]->replay_id, same.replay_id);
  EXPECT_EQ(runs[4]->mode, ReplayMode::kSameInbox);
  for (size_t i = 5; i < 9; ++i) {
    ASSERT_TRUE(runs[i].has_value());
    EXPECT_EQ(runs[i]->replay_id, fresh.replay_id);
    EXPECT_EQ(runs[i]->mode, ReplayMode::kFreshScope);
  }
}

TEST(ReplayTest, SelectionBySeqTypeSubjectIdAndCap) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{false};
  auto bus = StartProjection(dir, Projection(&log, &broken, true));
  ASSERT_NE(bus, nullptr);
  auto receipts = PublishMany(*bus, 30, [](int i) { return "o" + std::to_string(i % 3); });
  ASSERT_TRUE(bus->WaitIdle(30s).ok());

  ReplayRequest r = Request(ReplayMode::kFreshScope);
  r.action.dry_run = true;
  r.from_seq = 5;
  r.to_seq = 20;
  r.subject = "o1";
  ReplayReport report;
  ASSERT_TRUE(ReplayInto(*bus, r, &report).ok());
  EXPECT_EQ(report.replay_id, 0u);
  EXPECT_EQ(report.seqs, (std::vector<uint64_t>{5, 8, 11, 14, 17, 20}));

  r.max_events = 2;
  ASSERT_TRUE(ReplayInto(*bus, r, &report).ok());
  EXPECT_EQ(report.seqs, (std::vector<uint64_t>{5, 8}));

  ReplayRequest by_id = Request(ReplayMode::kFreshScope);
  by_id.action.dry_run = true;
  by_id.ids = {receipts[3].event_ids[0], receipts[29].event_ids[0]};
  ASSERT_TRUE(ReplayInto(*bus, by_id, &report).ok());
  EXPECT_EQ(report.seqs, (std::vector<uint64_t>{4, 30}));

  ReplayRequest other_type = Request(ReplayMode::kFreshScope);
  other_type.action.dry_run = true;
  other_type.types = {"orders.order-cancelled.v1"};
  ASSERT_TRUE(ReplayInto(*bus, other_type, &report).ok());
  EXPECT_TRUE(report.seqs.empty());

  ReplayRequest future = Request(ReplayMode::kFreshScope);
  future.action.dry_run = true;
  future.since = std::chrono::system_clock::now() + 1h;
  ASSERT_TRUE(ReplayInto(*bus, future, &report).ok());
  EXPECT_EQ(report.selected, 0u);
}

TEST(ReplayTest, DryRunChangesNothing) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{true};
  auto bus = StartProjection(dir, Projection(&log, &broken));
  ASSERT_NE(bus, nullptr);
  PublishMany(*bus, 20, [](int i) { return i < 2 ? std::string("bad") : "o" + std::to_string(i); });
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  broken = false;
  ReplayRequest r = Request(ReplayMode::kSameInbox);
  r.action.dry_run = true;
  ReplayReport report;
  ASSERT_TRUE(ReplayInto(*bus, r, &report).ok());
  EXPECT_EQ(report.replay_id, 0u);
  EXPECT_EQ(report.selected, 20u);
  EXPECT_EQ(report.skipped, 18u) << "the two dead letters would run";
  // A replay runs only once recorded, and the dispatcher is handed one
  // only after its record commits: with no record, nothing can run later.
  EXPECT_TRUE(GetReplayInto(*bus, 1, &report).IsNotFound());
  EXPECT_EQ(log.TotalRuns(), 20u);
  EXPECT_EQ(bus->Stats().subscribers[0].dead_lettered, 2u);
}

TEST(ReplayTest, NeverRunsBesideOrAheadOfLiveEventsOfItsSubject) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{false};
  auto bus = StartProjection(dir, Projection(&log, &broken, true, 200us));
  ASSERT_NE(bus, nullptr);
  PublishMany(*bus, 300, [](int i) { return "o" + std::to_string(i % 5); });
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  {
    std::lock_guard<std::mutex> lock(log.mu);
    log.seqs_by_subject.clear();
  }
  ReplayReport report;
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kFreshScope), &report).ok());
  PublishMany(*bus, 300, [](int i) { return "o" + std::to_string(i % 5); });  // live, meanwhile
  report = WaitReplay(*bus, report.replay_id);
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  EXPECT_EQ(report.delivered, 300u);
  std::lock_guard<std::mutex> lock(log.mu);
  EXPECT_FALSE(log.overlapped) << "two runs of one subject at once";
  for (const auto& [subject, seqs] : log.seqs_by_subject) {
    // Replayed events (seq <= 300) in order, and live ones (> 300) in
    // order; a replayed block is never split by a live event going first.
    std::vector<uint64_t> replayed, live;
    for (uint64_t s : seqs) (s <= 300 ? replayed : live).push_back(s);
    EXPECT_TRUE(std::is_sorted(replayed.begin(), replayed.end())) << subject;
    EXPECT_TRUE(std::is_sorted(live.begin(), live.end())) << subject;
    EXPECT_EQ(replayed.size(), 60u) << subject;
    EXPECT_EQ(live.size(), 60u) << subject;
  }
}

TEST(ReplayTest, OneAtATimePerSubscriberAndCancellable) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{false};
  auto bus = StartProjection(dir, Projection(&log, &broken, true, 2ms));
  ASSERT_NE(bus, nullptr);
  PublishMany(*bus, 500, [](int) { return std::string("one-subject"); });
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ReplayReport first, second;
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kFreshScope), &first).ok());
  EXPECT_TRUE(ReplayInto(*bus, Request(ReplayMode::kFreshScope), &second).IsBusy());
  // Cancelled while it runs: its first event has started.
  ASSERT_TRUE(testing::Eventually([&] { return log.TotalRuns() > 500; }, 30s));
  EXPECT_TRUE(bus->Operator().CancelReplay(first.replay_id, {"ops-ben", "", false}).IsInvalidArgument())
      << "why is required";
  ASSERT_TRUE(bus->Operator().CancelReplay(first.replay_id, {"ops-ben", "wrong selection", false}).ok());
  ReplayReport done = WaitReplay(*bus, first.replay_id);
  EXPECT_EQ(done.state, ReplayState::kCancelled);
  EXPECT_LT(done.delivered, 500u);
  EXPECT_EQ(done.cancelled_by, "ops-ben");
  EXPECT_EQ(done.cancel_reason, "wrong selection");
  EXPECT_TRUE(bus->Operator().CancelReplay(first.replay_id, {"ops-cy", "again", false}).ok())
      << "an ended replay: no-op";
  ASSERT_TRUE(GetReplayInto(*bus, first.replay_id, &done).ok());
  EXPECT_EQ(done.cancelled_by, "ops-ben");
  EXPECT_TRUE(bus->Operator().CancelReplay(999, {"ops-ben", "typo", false}).IsNotFound());
  ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kFreshScope), &second).ok()) << "the subscriber is free again";
  ASSERT_TRUE(bus->Operator().CancelReplay(second.replay_id, {"ops-ben", "test over", false}).ok());
}

TEST(ReplayTest, RecordedWhileTheSubscriberIsAwayRunsWhenItSubscribes) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{false};
  {
    auto bus = StartProjection(dir, Projection(&log, &broken, true));
    ASSERT_NE(bus, nullptr);
    PublishMany(*bus, 10, [](int i) { return "o" + std::to_string(i); });
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  {
    // An operator's tool: the database is free, the subscriber not here.
    auto bus = testing::OpenBus(ReplayOptions(dir));
    ASSERT_NE(bus, nullptr);
    ReplayReport report;
    ASSERT_TRUE(ReplayInto(*bus, Request(ReplayMode::kFreshScope), &report).ok());
    EXPECT_EQ(report.state, ReplayState::kRunning);
    EXPECT_EQ(report.selection, "seq 1..10");
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = StartProjection(dir, Projection(&log, &broken, true));
  ASSERT_NE(bus, nullptr);
  ReplayReport report = WaitReplay(*bus, 1);
  EXPECT_EQ(report.state, ReplayState::kDone);
  EXPECT_EQ(report.delivered, 10u);
}

// A tool on a stopped database knows how the subscriber was last
// subscribed: a fresh-scope replay of one that is not side-effect-safe is
// refused at once, with the reason, not recorded to be refused later.
TEST(ReplayTest, FreshScopeOnAStoppedDatabaseIsRefusedAtOnceForAnUnsafeSubscriber) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{false};
  {
    auto bus = StartProjection(dir, Projection(&log, &broken, /*side_effect_safe=*/false));
    ASSERT_NE(bus, nullptr);
    PublishMany(*bus, 3, [](int i) { return "o" + std::to_string(i); });
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = testing::OpenBus(ReplayOptions(dir));
  ASSERT_NE(bus, nullptr);
  ReplayReport report;
  const Status s = ReplayInto(*bus, Request(ReplayMode::kFreshScope), &report);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.message().find("is not side_effect_safe"), std::string::npos) << s.ToString();
  EXPECT_EQ(report.replay_id, 0u) << "nothing recorded";
  EXPECT_TRUE(ReplayInto(*bus, Request(ReplayMode::kSameInbox), &report).ok()) << "same-inbox is safe for anyone";
}

TEST(ReplayTest, BadRequestsAreRefused) {
  TempDir dir;
  RunLog log;
  std::atomic<bool> broken{false};
  auto bus = testing::OpenBus(ReplayOptions(dir));
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->Subscribe(Projection(&log, &broken, true)).ok());
  ReplayReport report;
  ReplayRequest r = Request(ReplayMode::kSameInbox);
  r.action.operator_name.clear();
  EXPECT_TRUE(ReplayInto(*bus, r, &report).IsInvalidArgument());
  r = Request(ReplayMode::kSameInbox);
  r.subscriber = "nobody";
  EXPECT_TRUE(ReplayInto(*bus, r, &report).IsInvalidArgument());
  r = Request(ReplayMode::kSameInbox);
  r.from_seq = 9;
  r.to_seq = 3;
  EXPECT_TRUE(ReplayInto(*bus, r, &report).IsInvalidArgument());
  r = Request(ReplayMode::kSameInbox);
  r.types = {"not a type"};
  EXPECT_TRUE(ReplayInto(*bus, r, &report).IsInvalidArgument());
  EXPECT_TRUE(GetReplayInto(*bus, 1, &report).IsNotFound());
}

// Counts each event's effect (by seq) in the "effects" column family, in the
// handler's own transaction: exactly-once shows as a count of exactly 2
// (the live run and the replay's) after any crash.
SubscriberOptions EffectCounter(std::chrono::microseconds pause) {
  SubscriberOptions s;
  s.name = "projection";
  s.types = {kType};
  s.side_effect_safe = true;
  s.handler = [pause](const Event& e, HandlerContext& ctx) {
    auto cur = ctx.Get("effects", std::to_string(e.seq));
    if (!cur.ok()) return Outcome::RetryAfter(1ms);
    const int n = cur->has_value() ? std::stoi(**cur) : 0;
    ctx.Put("effects", std::to_string(e.seq), std::to_string(n + 1)).IgnoreError();
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    return Outcome::Done();
  };
  return s;
}

TEST(ReplayTest, KilledMidwayResumesWithoutDoubleEffects) {
  TempDir dir;
  constexpr int kEvents = 600;
  Options options = ReplayOptions(dir);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    std::unique_ptr<Bus> bus;
    if (!Bus::Open(options, &bus).ok()) _exit(2);
    if (!bus->Subscribe(EffectCounter(500us)).ok() || !bus->Start().ok()) _exit(2);
    for (int i = 0; i < kEvents; ++i) {
      Transaction tx = bus->Begin();
      if (!tx.Publish({.type = kType, .subject = "o" + std::to_string(i % 4), .data = "{}"}).ok() ||
          !tx.Commit().ok()) {
        _exit(4);
      }
    }
    if (!bus->WaitIdle(60s).ok()) _exit(5);
    // A replay selects up to the written checkpoint: wait until a dry run
    // selects every event.
    ReplayRequest look = Request(ReplayMode::kFreshScope);
    look.action.dry_run = true;
    ReplayReport looked;
    if (!testing::Eventually(
            [&] { return ReplayInto(*bus, look, &looked).ok() && looked.selected == static_cast<uint64_t>(kEvents); },
            60s)) {
      _exit(8);
    }
    ReplayReport report;
    if (!ReplayInto(*bus, Request(ReplayMode::kFreshScope), &report).ok()) _exit(6);
    while (GetReplayInto(*bus, report.replay_id, &report).ok() && report.delivered < kEvents / 3) {
      std::this_thread::sleep_for(1ms);
    }
    if (write(fds[1], "k", 1) != 1) _exit(7);
    pause();
    _exit(0);
  }
  close(fds[1]);
  char c = 0;
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);

  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  ReplayReport report;
  ASSERT_TRUE(GetReplayInto(*bus, 1, &report).ok());
  ASSERT_EQ(report.state, ReplayState::kRunning) << "killed before the end";
  EXPECT_GT(report.next_seq, 1u) << "its position was recorded";
  ASSERT_TRUE(bus->Subscribe(EffectCounter(0us)).ok());
  ASSERT_TRUE(bus->Start().ok());
  report = WaitReplay(*bus, 1, 60s);
  EXPECT_EQ(report.state, ReplayState::kDone);
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  Transaction reader = bus->Begin();
  for (int seq = 1; seq <= kEvents; ++seq) {
    auto effect = reader.Get("effects", std::to_string(seq));
    ASSERT_TRUE(effect.ok());
    ASSERT_EQ(effect->value_or("0"), "2") << "seq " << seq << ": one live run and one replayed, exactly";
  }
}

// ---------------------------------------------------------------------------
// Rebuilds: a fresh-scope replay that clears the projection it rebuilds in
// the commit that records it.

// Adds each event's data (a number) to "effects"/<subject>: a projection
// that doubles if an event is applied twice and comes up short if one is
// lost.
SubscriberOptions StockProjection() {
  SubscriberOptions s;
  s.name = "stock";
  s.types = {kType};
  s.side_effect_safe = true;
  s.handler = [](const Event& e, HandlerContext& ctx) {
    auto on_hand = ctx.Get("effects", e.subject);
    if (!on_hand.ok()) return Outcome::RetryAfter(1ms);
    const int next = std::stoi(on_hand->value_or("0")) + std::stoi(e.data);
    return ctx.Put("effects", e.subject, std::to_string(next)).ok() ? Outcome::Done() : Outcome::RetryAfter(1ms);
  };
  return s;
}

ReplayRequest Rebuild() {
  ReplayRequest r;
  r.subscriber = "stock";
  r.mode = ReplayMode::kFreshScope;
  r.clear_column_families = {"effects"};
  r.action = {"ops-anna", "rebuild stock after fix 124", false};
  return r;
}

void PublishStock(Bus& bus, const std::string& sku, int quantity) {
  Transaction tx = bus.Begin();
  ASSERT_TRUE(tx.Publish({.type = kType, .subject = sku, .data = std::to_string(quantity)}).ok());
  ASSERT_TRUE(tx.Commit().ok());
}

std::map<std::string, std::string> Stock(Bus& bus) {
  std::map<std::string, std::string> rows;
  auto page = bus.Read().Scan("effects", ScanOptions{});
  EXPECT_TRUE(page.ok());
  if (page.ok()) {
    for (auto& row : page->rows) rows[row.key] = row.value;
  }
  return rows;
}

TEST(RebuildTest, ClearsTheProjectionSoAFreshScopeReplayDoesNotDoubleIt) {
  TempDir dir;
  {
    auto bus = testing::OpenBus(ReplayOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(StockProjection()).ok());
    ASSERT_TRUE(bus->Start().ok());
    for (int i = 0; i < 30; ++i) PublishStock(*bus, "sku-" + std::to_string(i % 3), i);
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ASSERT_EQ(Stock(*bus), (std::map<std::string, std::string>{{"sku-0", "135"}, {"sku-1", "145"}, {"sku-2", "155"}}));
    ReplayReport refused;
    EXPECT_TRUE(ReplayInto(*bus, Rebuild(), &refused).IsBusy()) << "not while it runs here";
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = testing::OpenBus(ReplayOptions(dir));
  ASSERT_NE(bus, nullptr);
  ReplayReport report;
  ASSERT_TRUE(ReplayInto(*bus, Rebuild(), &report).ok());
  EXPECT_EQ(report.cleared, std::vector<std::string>{"effects"});
  EXPECT_NE(report.selection.find("cleared effects"), std::string::npos) << report.selection;
  EXPECT_TRUE(Stock(*bus).empty()) << "cleared in the commit that recorded the rebuild";
  ASSERT_TRUE(bus->Subscribe(StockProjection()).ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishStock(*bus, "sku-0", 1000);  // live, beside the rebuild
  report = WaitReplay(*bus, report.replay_id);
  EXPECT_EQ(report.state, ReplayState::kDone);
  EXPECT_EQ(report.delivered, 30u);
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  EXPECT_EQ(Stock(*bus), (std::map<std::string, std::string>{{"sku-0", "1135"}, {"sku-1", "145"}, {"sku-2", "155"}}));
  ReplayReport stored;
  ASSERT_TRUE(GetReplayInto(*bus, report.replay_id, &stored).ok());
  EXPECT_EQ(stored.cleared, std::vector<std::string>{"effects"}) << "the record keeps what was cleared";
}

TEST(RebuildTest, RefusesWhatWouldLeaveThePartialOrDoubled) {
  TempDir dir;
  Options options = ReplayOptions(dir);
  {
    auto bus = testing::OpenBus(options);
    ASSERT_NE(bus, nullptr);
    SubscriberOptions stock = StockProjection();
    stock.retry.max_attempts = 1;
    auto handler = stock.handler;
    stock.handler = [handler](const Event& e, HandlerContext& ctx) {
      return e.subject == "bad" ? Outcome::Reject("bad") : handler(e, ctx);
    };
    ASSERT_TRUE(bus->Subscribe(std::move(stock)).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishStock(*bus, "sku-1", 1);
    PublishStock(*bus, "bad", 1);
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
  }
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  ReplayReport report;
  ReplayRequest same_inbox = Rebuild();
  same_inbox.mode = ReplayMode::kSameInbox;
  EXPECT_TRUE(ReplayInto(*bus, same_inbox, &report).IsInvalidArgument());
  ReplayRequest filtered = Rebuild();
  filtered.subject = "sku-1";
  EXPECT_TRUE(ReplayInto(*bus, filtered, &report).IsInvalidArgument());
  ReplayRequest unknown = Rebuild();
  unknown.clear_column_families = {"nope"};
  EXPECT_TRUE(ReplayInto(*bus, unknown, &report).IsInvalidArgument());
  Status dead = ReplayInto(*bus, Rebuild(), &report);
  EXPECT_TRUE(dead.IsNotSupported()) << dead.ToString();
  EXPECT_NE(dead.message().find("dead letters"), std::string::npos) << dead.ToString();
  ReplayRequest dry = Rebuild();
  dry.action.dry_run = true;
  EXPECT_TRUE(ReplayInto(*bus, dry, &report).IsNotSupported()) << "a dry run says so too";
  auto purged = bus->Operator().PurgeDeadLetters({.subscriber = "stock"}, {"ops-anna", "bad input", false});
  ASSERT_TRUE(purged.ok());
  ASSERT_TRUE(ReplayInto(*bus, dry, &report).ok());
  EXPECT_EQ(report.selected, 2u);
  EXPECT_EQ(Stock(*bus).at("sku-1"), "1") << "a dry run clears nothing";
  ASSERT_TRUE(bus->Close().ok());

  // Once handled events are trimmed, the history is no longer whole.
  TempDir trimmed_dir;
  Options trimmed = testing::TestOptions(trimmed_dir);
  trimmed.trim_interval = 10ms;
  auto trimming = testing::OpenBus(trimmed);
  ASSERT_NE(trimming, nullptr);
  ASSERT_TRUE(trimming->Subscribe(StockProjection()).ok());
  ASSERT_TRUE(trimming->Start().ok());
  PublishStock(*trimming, "sku-1", 1);
  ASSERT_TRUE(trimming->WaitIdle(30s).ok());
  ASSERT_TRUE(trimming->Close().ok());
  trimming = testing::OpenBus(trimmed);
  ASSERT_NE(trimming, nullptr);
  Status gone;
  ASSERT_TRUE(testing::Eventually(
      [&] {
        // The trim of the first run may land at its close or at this open.
        gone = ReplayInto(*trimming, Rebuild(), &report);
        return gone.IsNotSupported();
      },
      5s))
      << gone.ToString();
  EXPECT_NE(gone.message().find("no longer kept"), std::string::npos) << gone.ToString();
}

// Killed while it handles a stream of events, a subscriber leaves events
// handled above its durable checkpoint. A rebuild then must apply every
// committed event exactly once: those up to the checkpoint by the replay,
// those above it live again (their inbox records dropped with the clear).
TEST(RebuildTest, KilledMidwayEveryEventCountsOnce) {
  int rounds_with_handled_above_checkpoint = 0;
  for (uint32_t round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir;
    Options options = ReplayOptions(dir);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      std::unique_ptr<Bus> bus;
      if (!Bus::Open(options, &bus).ok() || !bus->Subscribe(StockProjection()).ok() || !bus->Start().ok()) _exit(2);
      if (write(fds[1], "r", 1) != 1) _exit(3);
      for (int i = 0;; ++i) {
        Transaction tx = bus->Begin();
        if (!tx.Publish({.type = kType, .subject = "sku-" + std::to_string(i % 7), .data = "1"}).ok() ||
            !tx.Commit().ok()) {
          _exit(4);
        }
      }
    }
    close(fds[1]);
    char c = 0;
    ASSERT_EQ(read(fds[0], &c, 1), 1);
    close(fds[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 70 * round));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);

    auto bus = testing::OpenBus(options);
    ASSERT_NE(bus, nullptr);
    // Every committed event is one unit of stock (nothing was trimmed).
    const uint64_t last_seq = bus->Stats().last_seq;
    ASSERT_GT(last_seq, 0u);
    // The dry run selects the events up to the durable checkpoint; effects
    // of more than those mean events were handled above it.
    ReplayRequest dry_run = Rebuild();
    dry_run.action.dry_run = true;
    ReplayReport dry;
    ASSERT_TRUE(ReplayInto(*bus, dry_run, &dry).ok());
    int applied_before = 0;
    for (const auto& [sku, n] : Stock(*bus)) applied_before += std::stoi(n);
    if (static_cast<uint64_t>(applied_before) > dry.selected) ++rounds_with_handled_above_checkpoint;

    ReplayReport report;
    ASSERT_TRUE(ReplayInto(*bus, Rebuild(), &report).ok());
    ASSERT_TRUE(bus->Subscribe(StockProjection()).ok());
    ASSERT_TRUE(bus->Start().ok());
    report = WaitReplay(*bus, report.replay_id, 60s);
    ASSERT_EQ(report.state, ReplayState::kDone);
    ASSERT_TRUE(bus->WaitIdle(60s).ok());
    int total = 0;
    for (const auto& [sku, n] : Stock(*bus)) total += std::stoi(n);
    EXPECT_EQ(static_cast<uint64_t>(total), last_seq) << "every committed event counted exactly once";
  }
  EXPECT_GT(rounds_with_handled_above_checkpoint, 0)
      << "no round left handled events above the checkpoint: the case this test is for did not arise";
}

}  // namespace
}  // namespace walbus
