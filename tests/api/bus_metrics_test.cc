// What a bus reports as metrics (bus/api/bus_metrics.cc, Bus::Metrics
// and MetricsText): each moves when its cause happens, and the text passes
// Prometheus's own linter.
#include "bus/api/bus_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

// The value of one sample line, e.g. Value(text, "walbus_commits_total").
double Value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  ADD_FAILURE() << "no sample " << series << " in\n" << text;
  return -1;
}

void Publish(Bus& bus, const std::string& subject, const std::string& data, uint64_t version = 0) {
  Transaction tx = bus.Begin();
  EventSpec e;
  e.type = "orders.order-approved.v1";
  e.subject = subject;
  e.data = data;
  e.subject_version = version;
  ASSERT_TRUE(tx.Publish(e).ok());
  ASSERT_TRUE(tx.Commit().ok());
}

TEST(BusMetricsTest, EachMetricMovesWithItsCause) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  SubscriberOptions s;
  s.name = "invoicing";
  s.skip_stale = true;
  s.retry.max_attempts = 2;
  s.retry.base = 1ms;
  s.retry.cap = 1ms;
  s.handler = [](const Event& e, HandlerContext&) -> Outcome {
    if (e.data == "poison") throw std::runtime_error("bad");
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  const std::string before = bus->MetricsText();
  EXPECT_EQ(Value(before, "walbus_subscriber_handled_total{subscriber=\"invoicing\"}"), 0);

  Publish(*bus, "order-1", "ok", 2);
  Publish(*bus, "order-1", "old", 1);                                     // stale
  Publish(*bus, "order-2", "poison");                                     // retried once, then dead-lettered
  EXPECT_FALSE(bus->IngestEnvelope("garbage", {.source = "test"}).ok());  // quarantined
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  const std::string after = bus->MetricsText();
  EXPECT_EQ(Value(after, "walbus_events_published_total{type=\"orders.order-approved.v1\"}"), 3);
  EXPECT_EQ(Value(after, "walbus_subscriber_handled_total{subscriber=\"invoicing\"}"), 1);
  EXPECT_EQ(Value(after, "walbus_subscriber_stale_skipped_total{subscriber=\"invoicing\"}"), 1);
  EXPECT_EQ(Value(after, "walbus_subscriber_retries_total{subscriber=\"invoicing\"}"), 1);
  EXPECT_EQ(Value(after, "walbus_subscriber_dead_lettered_total{subscriber=\"invoicing\"}"), 1);
  EXPECT_EQ(Value(after, "walbus_quarantined_total"), 1);
  EXPECT_EQ(Value(after, "walbus_last_sequence"), 3);
  EXPECT_EQ(Value(after, "walbus_subscriber_lag_events{subscriber=\"invoicing\"}"), 0);
  EXPECT_GE(Value(after, "walbus_commit_batch_size_count"), 3);
  EXPECT_EQ(Value(after, "walbus_subscriber_handler_duration_seconds_count{subscriber=\"invoicing\"}"), 3)
      << "one success and two failed runs; the stale skip runs no handler";
}

// One rule for every counter: it counts this process, from zero at each
// open; what the database counts over its life is a *_persisted gauge.
TEST(BusMetricsTest, CountersStartAtZeroInEachProcessAndPersistedGaugesCarryOn) {
  TempDir dir;
  const auto run = [&](const std::vector<std::string>& data) {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    SubscriberOptions s;
    s.name = "invoicing";
    s.retry.max_attempts = 1;
    s.handler = [](const Event& e, HandlerContext&) -> Outcome {
      if (e.data == "poison") throw std::runtime_error("bad");
      return Outcome::Done();
    };
    EXPECT_TRUE(bus->Subscribe(std::move(s)).ok());
    EXPECT_TRUE(bus->Start().ok());
    for (const std::string& d : data) Publish(*bus, "order-" + d, d);
    EXPECT_FALSE(bus->IngestEnvelope("garbage", {.source = "test"}).ok());
    EXPECT_TRUE(bus->WaitIdle(10s).ok());
    return bus->MetricsText();
  };
  run({"a", "b", "poison"});
  const std::string second = run({"c"});
  const std::string sub = "{subscriber=\"invoicing\"}";
  EXPECT_EQ(Value(second, "walbus_subscriber_handled_total" + sub), 1);
  EXPECT_EQ(Value(second, "walbus_subscriber_handled_persisted" + sub), 3);
  EXPECT_EQ(Value(second, "walbus_subscriber_dead_lettered_total" + sub), 0);
  EXPECT_EQ(Value(second, "walbus_subscriber_dead_lettered_persisted" + sub), 1);
  EXPECT_EQ(Value(second, "walbus_events_published_total{type=\"orders.order-approved.v1\"}"), 1);
  EXPECT_EQ(Value(second, "walbus_quarantined_total"), 1);
  EXPECT_EQ(Value(second, "walbus_quarantined_persisted"), 2);
  EXPECT_NE(second.find("# TYPE walbus_subscriber_handled_persisted gauge\n"), std::string::npos);
  EXPECT_NE(second.find("# TYPE walbus_storage_delayed_write_rate_bytes_per_second gauge\n"), std::string::npos);
  // Every counter is named *_total, and nothing else is.
  std::istringstream in(second);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("# TYPE ")) continue;
    const bool counter = line.ends_with(" counter");
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    EXPECT_EQ(counter, name.ends_with("_total")) << line;
  }
}

// What storage wrote, by where it went: every commit reaches the log; table
// files come later, from flushes and compactions.
TEST(BusMetricsTest, StorageWritesAreCountedByWhereTheyWent) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  const std::string before = bus->MetricsText();
  const std::string data(1000, 'd');
  for (int i = 0; i < 20; ++i) Publish(*bus, "order-" + std::to_string(i), data);
  const std::string after = bus->MetricsText();
  const std::string log = "walbus_storage_written_bytes_total{to=\"log\"}";
  EXPECT_GE(Value(after, log) - Value(before, log), 20 * 1000) << "each event's data went through the log";
  for (const char* to : {"flush", "compaction"}) {
    EXPECT_GE(Value(after, std::string("walbus_storage_written_bytes_total{to=\"") + to + "\"}"), 0) << to;
  }
  EXPECT_NE(after.find("# TYPE walbus_storage_written_bytes_total counter\n"), std::string::npos);
}

// A bus that only publishes holds no events in memory; a subscriber added
// later reads what it missed from the outbox, and the tail from then on.
TEST(BusMetricsTest, TheTailCacheHoldsEventsOnlyForSubscribers) {
  TempDir dir;
  std::atomic<int> handled{0};
  auto subscriber = [&] {
    SubscriberOptions s;
    s.name = "invoicing";
    s.handler = [&](const Event&, HandlerContext&) -> Outcome {
      handled.fetch_add(1);
      return Outcome::Done();
    };
    return s;
  };
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_TRUE(bus->Subscribe(subscriber()).ok());  // registered: it resumes from here
  }
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_TRUE(bus->Start().ok());
  for (int i = 0; i < 100; ++i) Publish(*bus, "order-" + std::to_string(i), std::string(200, 'x'));
  EXPECT_EQ(Value(bus->MetricsText(), "walbus_tail_cache_bytes"), 0);
  ASSERT_TRUE(bus->Subscribe(subscriber()).ok());
  for (int i = 0; i < 10; ++i) Publish(*bus, "order-" + std::to_string(i), std::string(200, 'y'));
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(handled.load(), 110) << "the events published before it subscribed come from the outbox";
  EXPECT_EQ(Value(bus->MetricsText(), "walbus_tail_cache_bytes"), 0) << "its subscriber fetched every one";
}

// The tail holds what a subscriber has yet to fetch, and frees it as the
// subscriber takes it, not when the tail's bounds push it out.
TEST(BusMetricsTest, TheTailCacheHoldsOnlyWhatASubscriberHasYetToFetch) {
  TempDir dir;
  Options options = testing::TestOptions(dir);
  options.max_in_flight_per_subscriber = 16;  // the dispatcher fetches no further ahead
  auto bus = testing::OpenBus(options);
  std::atomic<bool> released{false};
  std::atomic<int> handled{0};
  SubscriberOptions s;
  s.name = "invoicing";
  s.handler = [&](const Event& e, HandlerContext&) -> Outcome {
    // The first event holds the subscriber's window open until released.
    for (int i = 0; e.subject == "order-first" && !released.load() && i < 3000; ++i) std::this_thread::sleep_for(10ms);
    handled.fetch_add(1);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-first", std::string(200, 'x'));
  for (int i = 0; i < 100; ++i) Publish(*bus, "order-" + std::to_string(i), std::string(200, 'x'));
  EXPECT_GE(Value(bus->MetricsText(), "walbus_tail_cache_bytes"), (101 - 16) * 200)
      << "the events beyond the subscriber's window wait in the tail";
  released.store(true);
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  EXPECT_EQ(handled.load(), 101);
  EXPECT_EQ(Value(bus->MetricsText(), "walbus_tail_cache_bytes"), 0) << "each was freed once fetched";
}

class FixedSource final : public MetricsSource {
 public:
  void CollectMetrics(std::vector<MetricFamily>* out) const override {
    out->push_back({"walbus_test_things", MetricType::kGauge, "Things.", {MetricSample{{{"k", "v"}}, 7}}});
  }
};

TEST(BusMetricsTest, AddedSourcesAppearWhileTheyLive) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  auto source = std::make_shared<FixedSource>();
  EXPECT_EQ(bus->AddMetricsSource(std::weak_ptr<const MetricsSource>()).code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(bus->AddMetricsSource(source).ok());
  EXPECT_EQ(bus->AddMetricsSource(source).code(), Status::Code::kInvalidArgument) << "added twice";
  EXPECT_EQ(Value(bus->MetricsText(), "walbus_test_things{k=\"v\"}"), 7);
  source.reset();
  EXPECT_EQ(bus->MetricsText().find("walbus_test_things"), std::string::npos);
}

TEST(BusMetricsTest, AClosedBusReportsWhatMemoryHoldsAndTakesNoSource) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  Publish(*bus, "order-1", "a");
  ASSERT_TRUE(bus->Close().ok());
  const std::string text = bus->MetricsText();
  EXPECT_GE(Value(text, "walbus_commits_total"), 1) << "the publish, and what closing wrote";
  EXPECT_EQ(text.find("walbus_storage_sst_bytes"), std::string::npos) << "storage is closed: not read";
  EXPECT_EQ(text.find("walbus_replays_running"), std::string::npos) << "storage is closed: not read";
  auto source = std::make_shared<FixedSource>();
  EXPECT_TRUE(bus->AddMetricsSource(source).IsClosed());
}

TEST(BusMetricsTest, BacklogAgeFollowsTheInjectedClock) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  auto clock = std::make_shared<testing::ManualClock>();
  o.clock = clock;
  auto bus = testing::OpenBus(o);
  SubscriberOptions s;
  s.name = "stopped";  // registered, never started
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  Publish(*bus, "order-1", "a");
  Publish(*bus, "order-2", "b");
  clock->Advance(90s);
  const std::string text = bus->MetricsText();
  EXPECT_EQ(Value(text, "walbus_outbox_backlog_events"), 2);
  EXPECT_NEAR(Value(text, "walbus_outbox_oldest_age_seconds"), 90, 1);
  EXPECT_NEAR(Value(text, "walbus_subscriber_lag_seconds{subscriber=\"stopped\"}"), 90, 1);
}

TEST(BusMetricsTest, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus; tools/dev deps installs it)";
  }
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  SubscriberOptions s;
  s.name = "reporting";
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "a");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  const std::string path = dir.root() + "/metrics.prom";
  std::ofstream(path) << bus->MetricsText();
  const std::string cmd = "promtool check metrics < " + path + " > " + path + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream out(path + ".out");
  std::string findings((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << findings;
}

}  // namespace
}  // namespace walbus
