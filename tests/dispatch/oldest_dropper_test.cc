// bus/dispatch/oldest_dropper.cc: Options::drop_oldest_types on a real
// bus. An uplink that holds what it fetched (a relay offline) lets the
// outbox fill the disk budget many times over with readings (drop oldest)
// and acknowledgements (reject). No commit is refused: the oldest readings
// no subscriber holds give way. Once the uplink drains, it has every
// acknowledgement once and every reading but those the counters say were
// dropped, and never one it had fetched.
#include "bus/dispatch/oldest_dropper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr char kReading[] = "telemetry.reading-taken.v1";
constexpr char kAck[] = "commands.command-acked.v1";
// Under a budget the write-ahead log is bounded at 4 MiB at least, and
// counts: the budget leaves room beside it for the outbox.
constexpr uint64_t kBudget = uint64_t{16} << 20;
constexpr size_t kWindow = 64;  // the uplink holds this many fetched events

Options DropOptions(const TempDir& dir) {
  Options o;
  o.dir = dir.path();
  o.durability = Durability::kBuffered;
  o.disk_budget = kBudget;
  o.drop_oldest_types = {"telemetry.reading-taken"};  // every version
  o.max_in_flight_per_subscriber = kWindow;
  o.trim_every_events = 64;
  o.trim_interval = 10ms;
  return o;
}

// Counts each event it handles by seq; holds everything until released
// when `held`.
class CountingSubscriber {
 public:
  CountingSubscriber(std::string name, bool held) : name_(std::move(name)), released_(!held) {}
  SubscriberOptions Options() {
    SubscriberOptions s;
    s.name = name_;
    s.handler = [this](const Event& e, HandlerContext&) {
      if (!released_.load()) return Outcome::Wait(5ms, "held by the test");
      std::lock_guard<std::mutex> lock(mu_);
      ++handled_[e.seq];
      return Outcome::Done();
    };
    return s;
  }
  void Release() { released_.store(true); }
  std::map<uint64_t, int> handled() {
    std::lock_guard<std::mutex> lock(mu_);
    return handled_;
  }

 private:
  const std::string name_;
  std::atomic<bool> released_;
  std::mutex mu_;
  std::map<uint64_t, int> handled_;
};

const SubscriberStats& StatsOf(const BusStats& stats, const std::string& name) {
  for (const SubscriberStats& s : stats.subscribers) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no subscriber " << name;
  return stats.subscribers.front();
}

TEST(OldestDropperTest, TheOldestReadingsGiveWayAndNothingHeldOrRejectingIsDropped) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(DropOptions(dir), &bus).ok());
  CountingSubscriber uplink("uplink", /*held=*/true), local("local", /*held=*/false);
  ASSERT_TRUE(bus->Subscribe(uplink.Options()).ok());
  ASSERT_TRUE(bus->Subscribe(local.Options()).ok());
  ASSERT_TRUE(bus->Start().ok());

  // Three budgets of readings, an acknowledgement in every hundred
  // events: every commit goes.
  constexpr int kEvents = 3 * static_cast<int>(kBudget >> 10);
  std::set<uint64_t> readings, acks;
  for (int i = 0; i < kEvents; ++i) {
    const bool ack = i % 100 == 99;
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(EventSpec{.type = ack ? kAck : kReading,
                                     .subject = "sensor-" + std::to_string(i % 7),
                                     .data = testing::IncompressibleBytes(i)})
                    .ok());
    Result<Receipt> r = tx.Commit();
    ASSERT_TRUE(r.ok()) << "commit " << i << ": " << r.status().ToString();
    (ack ? acks : readings).insert(r->first_seq);
  }
  const BusStats full = bus->Stats();
  EXPECT_GT(full.dropped, readings.size() / 2) << "two budgets of readings at the least went";
  EXPECT_EQ(StatsOf(full, "uplink").dropped, full.dropped) << "the uplink had fetched none of them";
  const std::string metrics = bus->MetricsText();
  EXPECT_EQ(testing::MetricSample(metrics, "walbus_disk_budget_refusals_total"), 0) << metrics;
  EXPECT_EQ(testing::MetricSample(metrics, "walbus_disk_budget_dropped_total{type=\"" + std::string(kReading) + "\"}"),
            static_cast<double>(full.dropped))
      << metrics;
  EXPECT_EQ(testing::MetricSample(metrics, "walbus_subscriber_dropped_total{subscriber=\"uplink\"}"),
            static_cast<double>(full.dropped))
      << metrics;

  // Drained: every acknowledgement once; every reading once but the
  // dropped, and those it held from the start among the handled.
  uplink.Release();
  ASSERT_TRUE(bus->WaitIdle(120s).ok());
  const std::map<uint64_t, int> handled = uplink.handled();
  for (uint64_t seq : acks) EXPECT_EQ(handled.count(seq), 1u) << "ack at seq " << seq;
  uint64_t missing = 0;
  for (uint64_t seq : readings) missing += handled.count(seq) == 0 ? 1 : 0;
  for (const auto& [seq, times] : handled) EXPECT_EQ(times, 1) << "seq " << seq;
  EXPECT_EQ(missing, full.dropped) << "the dropped are exactly what was not handled";
  for (uint64_t seq = 1; seq <= kWindow; ++seq) EXPECT_EQ(handled.count(seq), 1u) << "held from the start: " << seq;
  // The local subscriber missed only what it had not fetched.
  const BusStats drained = bus->Stats();
  EXPECT_EQ(local.handled().size() + StatsOf(drained, "local").dropped, static_cast<size_t>(kEvents));

  // The counts are durable.
  ASSERT_TRUE(bus->Close().ok());
  bus.reset();
  ASSERT_TRUE(Bus::Open(DropOptions(dir), &bus).ok());
  const BusStats reopened = bus->Stats();
  EXPECT_EQ(reopened.dropped, full.dropped);
  EXPECT_EQ(StatsOf(reopened, "uplink").dropped, full.dropped);
  ASSERT_TRUE(bus->Close().ok());
}

TEST(OldestDropperTest, BadOptionsAreRefused) {
  TempDir dir;
  Options o = DropOptions(dir);
  o.disk_budget = 0;
  std::unique_ptr<Bus> bus;
  Status s = Bus::Open(o, &bus);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("drop_oldest_types needs Options::disk_budget"), std::string::npos) << s.message();
  o = DropOptions(dir);
  o.drop_oldest_types = {"Not A Type"};
  s = Bus::Open(o, &bus);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("drop_oldest_types"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace walbus
