// bus/core/disk_budget.cc: Options::disk_budget on a real bus. A
// subscriber that does not pass its events lets the outbox fill the
// budget; the application's next commit of events is refused whole;
// the bus's own work and commits without events still go; once the
// subscriber drains and the outbox is trimmed, commits go again, and
// every event that committed is handled exactly once.
#include "bus/core/disk_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/storage_harness.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr char kType[] = "telemetry.reading-taken.v1";
constexpr char kFollowUp[] = "telemetry.reading-checked.v1";
constexpr uint64_t kBudget = uint64_t{2} << 20;

Options BudgetOptions(const TempDir& dir) {
  Options o;
  o.dir = dir.path();
  o.durability = Durability::kBuffered;
  o.column_families = {"readings"};
  o.disk_budget = kBudget;
  o.trim_every_events = 64;  // trims soon after the drain
  o.trim_interval = 10ms;
  return o;
}

EventSpec Reading(int i) {
  return EventSpec{
      .type = kType, .subject = "sensor-" + std::to_string(i % 7), .data = testing::IncompressibleBytes(i)};
}

// Holds every event of kType until released; then handles each once,
// counting by id, and publishes one follow-up per event.
class HeldSubscriber {
 public:
  SubscriberOptions Options() {
    SubscriberOptions s;
    s.name = "uplink";
    s.types = {kType};
    s.handler = [this](const Event& e, HandlerContext& ctx) {
      if (!released_.load()) return Outcome::Wait(5ms, "held by the test");
      if (!ctx.Publish(EventSpec{.type = kFollowUp, .subject = e.subject, .data = "ok"}).ok()) {
        return Outcome::RetryAfter(1ms);
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++handled_[e.id.ToString()];
      return Outcome::Done();
    };
    return s;
  }
  void Release() { released_.store(true); }
  std::map<std::string, int> handled() {
    std::lock_guard<std::mutex> lock(mu_);
    return handled_;
  }

 private:
  std::atomic<bool> released_{false};
  std::mutex mu_;
  std::map<std::string, int> handled_;
};

// Every kind the budget counts, summed, from the metrics.
double UseTotal(const std::string& metrics) {
  double total = 0;
  for (const char* kind : {"outbox", "dead_letters", "quarantine", "scheduled", "log"}) {
    total += testing::MetricSample(metrics, "walbus_disk_use_bytes{kind=\"" + std::string(kind) + "\"}");
  }
  return total;
}

TEST(DiskBudgetTest, TheBudgetRefusesCommitsOfEventsWholeUntilTheOutboxDrains) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(BudgetOptions(dir), &bus).ok());
  HeldSubscriber uplink;
  ASSERT_TRUE(bus->Subscribe(uplink.Options()).ok());
  ASSERT_TRUE(bus->Start().ok());

  // Fill: 1 KiB events until the budget refuses one (it must, well
  // before twice the budget).
  std::vector<std::string> committed;
  Status refused;
  for (int i = 0; i < 2 * static_cast<int>(kBudget >> 10); ++i) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("readings", "last", std::to_string(i)).ok());
    ASSERT_TRUE(tx.Publish(Reading(i)).ok());
    Result<Receipt> r = tx.Commit();
    if (!r.ok()) {
      refused = r.status();
      break;
    }
    committed.push_back(r->event_ids[0].ToString());
  }
  ASSERT_TRUE(refused.IsResourceExhausted()) << refused.ToString();
  EXPECT_NE(refused.message().find("disk budget of " + std::to_string(kBudget) + " bytes reached"), std::string::npos)
      << refused.message();
  // The write-ahead log holds the same events until their memtable
  // flushes, and counts: a third of the budget in events at the least.
  EXPECT_GT(committed.size() * 1024, kBudget / 3) << "refused long before the budget";

  // Refused whole: neither the event nor the state write of that commit.
  const uint64_t last_seq = bus->Stats().last_seq;
  ASSERT_EQ(last_seq, committed.size());
  {
    Transaction tx = bus->Begin();
    Result<std::optional<std::string>> last = tx.Get("readings", "last");
    ASSERT_TRUE(last.ok());
    EXPECT_EQ(last->value_or(""), std::to_string(committed.size() - 1));
  }
  // An ingested event is refused the same way; a commit without events
  // goes.
  Event foreign;
  foreign.id = EventId::Generate();
  foreign.type = kType;
  foreign.source = "urn:device:9";
  foreign.subject = "sensor-x";
  foreign.time = std::chrono::system_clock::now();
  foreign.data = testing::IncompressibleBytes(99);
  EXPECT_TRUE(bus->IngestEvent(foreign, IngestOptions{"test", "inbound"}).status().IsResourceExhausted());
  {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("readings", "note", "still writable").ok());
    EXPECT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(bus->Stats().last_seq, last_seq);
  const std::string metrics = bus->MetricsText();
  EXPECT_EQ(testing::MetricSample(metrics, "walbus_disk_budget_bytes"), static_cast<double>(kBudget)) << metrics;
  EXPECT_EQ(testing::MetricSample(metrics, "walbus_disk_budget_refusals_total"), 2) << metrics;
  EXPECT_GT(UseTotal(metrics), kBudget * 0.9) << metrics;
  EXPECT_GT(testing::MetricSample(metrics, "walbus_disk_use_bytes{kind=\"log\"}"), 0) << metrics;

  // Drain: the subscriber passes everything, and its follow-ups (the
  // bus's own work) commit although the budget is full when they start.
  uplink.Release();
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  const std::map<std::string, int> handled = uplink.handled();
  ASSERT_EQ(handled.size(), committed.size());
  for (const std::string& id : committed) {
    auto it = handled.find(id);
    ASSERT_NE(it, handled.end()) << id;
    EXPECT_EQ(it->second, 1) << id;
  }
  EXPECT_EQ(bus->Stats().last_seq, 2 * last_seq) << "one follow-up per event";

  // Trimmed, the outbox frees its share: commits go again.
  ASSERT_TRUE(testing::Eventually(
      [&] {
        Transaction tx = bus->Begin();
        return tx.Publish(Reading(0)).ok() && tx.Commit().ok();
      },
      30s));
  ASSERT_TRUE(bus->Close().ok());
}

TEST(DiskBudgetTest, UseIsMeasuredByKindWithoutABudget) {
  TempDir dir;
  Options o = BudgetOptions(dir);
  o.disk_budget = 0;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(o, &bus).ok());
  HeldSubscriber uplink;
  ASSERT_TRUE(bus->Subscribe(uplink.Options()).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (int i = 0; i < 4 * static_cast<int>(kBudget >> 10); ++i) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Reading(i)).ok());
    ASSERT_TRUE(tx.Commit().ok()) << "no budget, nothing refused";
  }
  const std::string metrics = bus->MetricsText();
  EXPECT_EQ(testing::MetricSample(metrics, "walbus_disk_budget_bytes"), 0) << metrics;
  EXPECT_EQ(testing::MetricSample(metrics, "walbus_disk_budget_refusals_total"), 0) << metrics;
  const double outbox = testing::MetricSample(metrics, "walbus_disk_use_bytes{kind=\"outbox\"}");
  EXPECT_GT(outbox, 2.0 * kBudget) << "4 MiB of events wait for the subscriber";
  EXPECT_LT(outbox, 8.0 * kBudget);
  uplink.Release();
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ASSERT_TRUE(bus->Close().ok());
}

// Time to full, on a clock the test moves: unknown until a window of
// 10 s has passed, then the room left over the rate of that window, and
// never while use does not grow.
TEST(DiskBudgetTest, TimeToFullFollowsTheRateUseGrew) {
  TempDir dir;
  Options o = BudgetOptions(dir);
  auto clock = std::make_shared<ManualClock>();
  o.clock = clock;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(o, &bus).ok());
  HeldSubscriber uplink;
  ASSERT_TRUE(bus->Subscribe(uplink.Options()).ok());
  ASSERT_TRUE(bus->Start().ok());
  const std::string first = bus->MetricsText();
  EXPECT_EQ(testing::MetricSample(first, "walbus_disk_budget_seconds_to_full"), std::numeric_limits<double>::infinity())
      << "no window yet";
  for (int i = 0; i < 256; ++i) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Reading(i)).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  clock->Advance(10s);
  const std::string second = bus->MetricsText();
  const double rate = (UseTotal(second) - UseTotal(first)) / 10;
  ASSERT_GT(rate, 256 * 1024 / 10);
  const double expected = (static_cast<double>(kBudget) - UseTotal(second)) / rate;
  EXPECT_NEAR(testing::MetricSample(second, "walbus_disk_budget_seconds_to_full"), expected, expected * 0.01) << second;
  clock->Advance(10s);
  EXPECT_EQ(testing::MetricSample(bus->MetricsText(), "walbus_disk_budget_seconds_to_full"),
            std::numeric_limits<double>::infinity())
      << "use did not grow over the last window";
  uplink.Release();
  clock->Advance(1s);
  ASSERT_TRUE(bus->Close().ok());
}

// The outbox's ledger on its own: a trim frees the groups it passed
// whole exactly, and of the block it ends in the share of seqs passed.
TEST(DiskBudgetTest, ATrimFreesWhatItPassed) {
  TempDir dir;
  testing::StorageHarness storage(dir.path(), {});
  ASSERT_TRUE(storage.opened().ok());
  internal::DiskBudget budget(storage.db(), kBudget, 1, 0);
  const uint64_t stores = budget.Measure().total();  // empty memtables
  budget.NoteCommitted(1, 100, 1000);
  budget.NoteCommitted(101, 200, 1000);  // the same block
  budget.NoteCommitted(4096, 4096, 700);
  budget.NoteCommitted(9000, 9099, 300);
  EXPECT_EQ(budget.Measure().outbox, 3000u);
  budget.NoteOutboxTrimmed(51);
  EXPECT_EQ(budget.Measure().outbox, 2500u) << "50 of the block's 200 seqs passed: a quarter of its 2000";
  budget.NoteOutboxTrimmed(201);
  EXPECT_EQ(budget.Measure().outbox, 1000u) << "the block passed whole";
  budget.NoteOutboxTrimmed(4097);
  EXPECT_EQ(budget.Measure().outbox, 300u);
  EXPECT_TRUE(budget.Admit(kBudget - stores - 300).ok()) << "exactly fills the budget";
  const Status over = budget.Admit(kBudget - stores - 299);
  EXPECT_TRUE(over.IsResourceExhausted()) << over.ToString();
  EXPECT_EQ(budget.refusals(), 1u);
  budget.NoteOutboxTrimmed(9100);
  EXPECT_EQ(budget.Measure().outbox, 0u);
}

// Under a budget the write-ahead log is bounded: a column family written
// once (here, the application's) no longer keeps every log file since.
// Without one, it keeps them up to storage's default bound. The bound
// starts a flush; the old log goes when the flush ends, so a slow flush
// lets it pass the bound meanwhile (6.1 MiB once under ASan): bounded is
// measured once the flushes have ended.
TEST(DiskBudgetTest, UnderABudgetTheLogIsBounded) {
  EXPECT_EQ(internal::MaxLogBytes(0), storage::kDefaultMaxLogBytes);
  EXPECT_EQ(internal::MaxLogBytes(uint64_t{1} << 30), uint64_t{64} << 20) << "a 16th";
  EXPECT_EQ(internal::MaxLogBytes(uint64_t{8} << 20), internal::kMinLogBound);
  EXPECT_EQ(internal::MaxLogBytes(uint64_t{64} << 40), storage::kDefaultMaxLogBytes);
  auto log_after_12_mib = [](uint64_t budget, bool flushes_end) {
    TempDir dir;
    Options o = BudgetOptions(dir);
    o.disk_budget = budget;
    std::unique_ptr<Bus> bus;
    EXPECT_TRUE(Bus::Open(o, &bus).ok());
    HeldSubscriber uplink;
    EXPECT_TRUE(bus->Subscribe(uplink.Options()).ok());
    EXPECT_TRUE(bus->Start().ok());
    {
      Transaction tx = bus->Begin();
      EXPECT_TRUE(tx.Put("readings", "first", "pins the log").ok());
      EXPECT_TRUE(tx.Commit().ok());
    }
    for (int i = 0; i < 12 * 1024; ++i) {
      Transaction tx = bus->Begin();
      EXPECT_TRUE(tx.Publish(Reading(i)).ok());
      EXPECT_TRUE(tx.Commit().ok());
    }
    auto log_now = [&] { return testing::MetricSample(bus->MetricsText(), "walbus_disk_use_bytes{kind=\"log\"}"); };
    double log = log_now();
    if (flushes_end) {
      (void)testing::Eventually(
          [&] {
            log = log_now();
            return log < 6.0 * (1 << 20);
          },
          30s);
    }
    uplink.Release();
    EXPECT_TRUE(bus->WaitIdle(60s).ok());
    EXPECT_TRUE(bus->Close().ok());
    return log;
  };
  EXPECT_LT(log_after_12_mib(uint64_t{64} << 20, true), 6.0 * (1 << 20)) << "4 MiB and the write that passed it";
  EXPECT_GT(log_after_12_mib(0, false), 12.0 * (1 << 20)) << "every event still in the log";
}

TEST(DiskBudgetTest, ABudgetBelowTheLeastIsRefusedAtOpen) {
  TempDir dir;
  Options o = BudgetOptions(dir);
  o.disk_budget = kMinDiskBudget - 1;
  std::unique_ptr<Bus> bus;
  const Status s = Bus::Open(o, &bus);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("Options::disk_budget"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace walbus
