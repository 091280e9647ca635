// Behaviour of the bus through its public API, against a real RocksDB in a
// temporary directory.
#include "walbus/bus.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bus/core/envelope.h"
#include "storage/db.h"
#include "storage/keys.h"
#include "tests/test_util.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

using testing::OpenBus;

Options MakeOptions(const TempDir& dir) { return testing::TestOptions(dir); }

EventSpec Approved(std::string subject, std::string data = "x") {
  EventSpec e;
  e.type = kType;
  e.subject = std::move(subject);
  e.data = std::move(data);
  return e;
}

// An event made by another system, for Bus::IngestEvent.
Event FromElsewhere() { return testing::IncomingEvent(kType, "ingested", "elsewhere"); }

// Reads the stopped database directly: outbox entries and an app value.
struct Inspector {
  explicit Inspector(const std::string& dir) : db(testing::OpenStoppedDatabase(dir)) {}
  std::vector<Event> Outbox() {
    std::vector<Event> out;
    Status s = db->ScanOutbox(0, SIZE_MAX, [&](uint64_t seq, std::string_view bytes) {
      Event e;
      EXPECT_TRUE(internal::DecodeEnvelope(bytes, 1 << 20, &e).ok());
      e.seq = seq;
      out.push_back(std::move(e));
      return true;
    });
    EXPECT_TRUE(s.ok());
    return out;
  }
  std::optional<std::string> Value(const std::string& cf, const std::string& key) {
    std::string v;
    bool found = false;
    EXPECT_TRUE(db->Get(db->AppCf(cf), key, &v, &found).ok());
    return found ? std::optional<std::string>(v) : std::nullopt;
  }
  std::unique_ptr<storage::Db> db;
};

// Keeps the outbox from being trimmed: a registered subscriber that never
// runs (the bus is not started while it is active) holds the safe point at
// its checkpoint.
void RegisterIdleSubscriber(Bus& bus) {
  SubscriberOptions s;
  s.name = "idle";
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  ASSERT_TRUE(bus.Subscribe(std::move(s)).ok());
}

TEST(BusTest, CommitWritesDomainAndOutboxAtomically) {
  TempDir dir;
  {
    auto bus = OpenBus(MakeOptions(dir));
    RegisterIdleSubscriber(*bus);
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("orders", "order-1", "approved").ok());
    auto id = tx.Publish(Approved("order-1", "payload"));
    ASSERT_TRUE(id.ok());
    auto receipt = tx.Commit();
    ASSERT_TRUE(receipt.ok()) << receipt.status().ToString();
    EXPECT_EQ(receipt->first_seq, 1u);
    ASSERT_EQ(receipt->event_ids.size(), 1u);
    EXPECT_EQ(receipt->event_ids[0], *id);
    ASSERT_TRUE(bus->Close().ok());
  }
  Inspector db(dir.path());
  EXPECT_EQ(db.Value("orders", "order-1"), "approved");
  auto outbox = db.Outbox();
  ASSERT_EQ(outbox.size(), 1u);
  EXPECT_EQ(outbox[0].seq, 1u);
  EXPECT_EQ(outbox[0].type, kType);
  EXPECT_EQ(outbox[0].subject, "order-1");
  EXPECT_EQ(outbox[0].data, "payload");
}

TEST(BusTest, TransactionDestroyedWithoutCommitLeavesNothing) {
  TempDir dir;
  {
    auto bus = OpenBus(MakeOptions(dir));
    RegisterIdleSubscriber(*bus);
    {
      Transaction tx = bus->Begin();
      ASSERT_TRUE(tx.Put("orders", "order-1", "approved").ok());
      ASSERT_TRUE(tx.Publish(Approved("order-1")).ok());
    }
    EXPECT_EQ(bus->Stats().last_seq, 0u);
    ASSERT_TRUE(bus->Close().ok());
  }
  Inspector db(dir.path());
  EXPECT_FALSE(db.Value("orders", "order-1").has_value());
  EXPECT_TRUE(db.Outbox().empty());
}

TEST(BusTest, FailedPreconditionWritesNothingAndReportsConflict) {
  TempDir dir;
  {
    auto bus = OpenBus(MakeOptions(dir));
    RegisterIdleSubscriber(*bus);
    Transaction first = bus->Begin();
    ASSERT_TRUE(first.ExpectVersion("orders", "order-1", 0).ok());
    ASSERT_TRUE(first.Put("orders", "order-1", "v1").ok());
    ASSERT_TRUE(first.Publish(Approved("order-1")).ok());
    ASSERT_TRUE(first.Commit().ok());

    Transaction stale = bus->Begin();
    ASSERT_TRUE(stale.ExpectVersion("orders", "order-1", 0).ok());
    ASSERT_TRUE(stale.Put("orders", "order-1", "stale").ok());
    ASSERT_TRUE(stale.Publish(Approved("order-1", "stale")).ok());
    auto r = stale.Commit();
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsConflict()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("orders/order-1"), std::string::npos) << r.status().ToString();

    Transaction reader = bus->Begin();
    auto v = reader.GetVersion("orders", "order-1");
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, 1u);
    ASSERT_TRUE(bus->Close().ok());
  }
  Inspector db(dir.path());
  EXPECT_EQ(db.Value("orders", "order-1"), "v1");
  EXPECT_EQ(db.Outbox().size(), 1u);
}

TEST(BusTest, ConcurrentExpectVersionLetsExactlyOneWinPerVersion) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<int> wins{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      Transaction tx = bus->Begin();
      ASSERT_TRUE(tx.ExpectVersion("orders", "hot", 0).ok());
      ASSERT_TRUE(tx.Put("orders", "hot", "mine").ok());
      auto r = tx.Commit();
      if (r.ok()) {
        ++wins;
      } else {
        EXPECT_TRUE(r.status().IsConflict());
        ++conflicts;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(conflicts.load(), 7);
}

TEST(BusTest, InvalidPublishesAreRefusedAndWriteNothing) {
  TempDir dir;
  Options o = MakeOptions(dir);
  o.max_payload_bytes = 1000;
  auto bus = OpenBus(o);
  RegisterIdleSubscriber(*bus);
  struct Case {
    EventSpec spec;
    const char* why;
  };
  std::vector<Case> cases;
  cases.push_back({Approved("s"), ""});
  cases.back().spec.type = "OrderApproved";
  cases.back().why = "type";
  cases.push_back({Approved(""), "empty subject"});
  cases.push_back({Approved("s", std::string(1001, 'x')), "payload"});
  // Every event is a CloudEvent: its subject a CloudEvents string (a key
  // is never altered on the way; one that could not travel is refused
  // here), its source a URI-reference.
  cases.push_back({Approved("evil\r\nce-type: forged.thing.v1"), "a subject with CR LF"});
  cases.push_back({Approved("bad\xff utf-8"), "a subject that is not UTF-8"});
  cases.push_back({Approved("s"), "a source that is not a URI-reference"});
  cases.back().spec.source = "urn:dev/7 b\xc3\xa4r";
  for (auto& c : cases) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("orders", "k", "v").ok());
    auto id = tx.Publish(c.spec);
    EXPECT_TRUE(id.status().IsInvalidArgument()) << c.why;
    auto r = tx.Commit();
    EXPECT_TRUE(r.status().IsInvalidArgument()) << c.why << ": the scope must fail as a whole";
  }
  Options bad_source = MakeOptions(dir);
  bad_source.source = "my app";
  std::unique_ptr<Bus> refused;
  const Status open = Bus::Open(bad_source, &refused);
  EXPECT_TRUE(open.IsInvalidArgument()) << open.ToString();
  EXPECT_NE(open.message().find("Options::source 'my app' is not a URI-reference"), std::string::npos)
      << open.ToString();
  Transaction bad_cf = bus->Begin();
  EXPECT_TRUE(bad_cf.Put("no-such-cf", "k", "v").IsInvalidArgument());
  EXPECT_TRUE(bad_cf.Commit().status().IsInvalidArgument());
  EXPECT_EQ(bus->Stats().last_seq, 0u);
  Transaction reader = bus->Begin();
  auto v = reader.Get("orders", "k");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
}

TEST(BusTest, TransactionReadsItsOwnWrites) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Put("orders", "a", "1").ok());
  EXPECT_EQ(tx.Get("orders", "a").value(), std::optional<std::string>("1"));
  ASSERT_TRUE(tx.Delete("orders", "a").ok());
  EXPECT_FALSE(tx.Get("orders", "a").value().has_value());
}

TEST(BusTest, HandlerEffectsAreExactlyOnceAndPerSubjectOrdered) {
  TempDir dir;
  Options o = MakeOptions(dir);
  o.worker_threads = 4;
  auto bus = OpenBus(o);
  std::mutex mu;
  std::map<std::string, uint64_t> last_version;  // per subject
  std::atomic<int> order_violations{0};
  SubscriberOptions s;
  s.name = "counter";
  s.types = {kType};
  s.handler = [&](const Event& e, HandlerContext& ctx) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (e.subject_version != last_version[e.subject] + 1) ++order_violations;
      last_version[e.subject] = e.subject_version;
    }
    auto cur = ctx.Get("effects", e.id.ToString());
    if (!cur.ok()) return Outcome::RetryAfter(1ms);
    int n = cur->has_value() ? std::stoi(**cur) : 0;
    if (!ctx.Put("effects", e.id.ToString(), std::to_string(n + 1)).ok()) return Outcome::RetryAfter(1ms);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());

  constexpr int kProducers = 6, kSubjects = 20, kPerProducer = 300;
  std::mutex ids_mu;
  std::vector<EventId> ids;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        const std::string subject = "order-" + std::to_string((p * 7 + i) % kSubjects);
        while (true) {  // versions make commit order checkable per subject
          Transaction tx = bus->Begin();
          uint64_t v = tx.GetVersion("orders", subject).value();
          ASSERT_TRUE(tx.ExpectVersion("orders", subject, v).ok());
          EventSpec spec = Approved(subject);
          spec.subject_version = v + 1;
          ASSERT_TRUE(tx.Publish(spec).ok());
          auto r = tx.Commit();
          if (r.ok()) {
            std::lock_guard<std::mutex> lock(ids_mu);
            ids.push_back(r->event_ids[0]);
            break;
          }
          ASSERT_TRUE(r.status().IsConflict()) << r.status().ToString();
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  EXPECT_EQ(order_violations.load(), 0);
  Transaction reader = bus->Begin();
  for (const EventId& id : ids) {
    auto v = reader.Get("effects", id.ToString());
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->value_or("missing"), "1") << id.ToString();
  }
  BusStats stats = bus->Stats();
  ASSERT_EQ(stats.subscribers.size(), 1u);
  EXPECT_EQ(stats.subscribers[0].handled, static_cast<uint64_t>(kProducers * kPerProducer));
  EXPECT_EQ(stats.subscribers[0].checkpoint, stats.last_seq);
}

// Rewinds a subscriber's checkpoint on a closed database, so that the next
// Open redelivers every event above it: the redelivery the inbox must absorb.
void RewindCheckpoint(const std::string& dir, uint32_t subscriber_id, uint64_t to) {
  Inspector db(dir);
  storage::Batch batch;
  std::string v;
  storage::PutBe64(&v, to);
  batch.Put(db.db->cf(storage::Cf::kCheckpoints),
            storage::CheckpointKey(subscriber_id, storage::CheckpointField::kWatermark), v);
  ASSERT_TRUE(batch.Commit(db.db.get(), true).ok());
}

SubscriberOptions CountingSubscriber(std::atomic<int>* calls) {
  SubscriberOptions s;
  s.name = "counter";
  s.handler = [calls](const Event& e, HandlerContext& ctx) {
    ++*calls;
    auto cur = ctx.Get("effects", e.subject);
    int n = cur.ok() && cur->has_value() ? std::stoi(**cur) : 0;
    if (!ctx.Put("effects", e.subject, std::to_string(n + 1)).ok()) return Outcome::RetryAfter(1ms);
    return Outcome::Done();
  };
  return s;
}

// Also when the events were handled by a build of the first on-disk
// format, whose inbox keys put the subscriber first: the bus converts the
// inbox as it opens, and finds every record.
class RedeliveryTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RedeliveryTest, RedeliveredEventProducesOneEffect) {
  TempDir dir;
  std::atomic<int> calls{0};
  {
    // A registered subscriber that is never active here keeps the outbox
    // from being trimmed, so the redelivery below has events to deliver.
    auto bus = OpenBus(MakeOptions(dir));
    RegisterIdleSubscriber(*bus);
  }
  {
    auto bus = OpenBus(MakeOptions(dir));
    ASSERT_TRUE(bus->Subscribe(CountingSubscriber(&calls)).ok());
    ASSERT_TRUE(bus->Start().ok());
    for (int i = 0; i < 10; ++i) {
      Transaction tx = bus->Begin();
      ASSERT_TRUE(tx.Publish(Approved("order-" + std::to_string(i))).ok());
      ASSERT_TRUE(tx.Commit().ok());
    }
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  EXPECT_EQ(calls.load(), 10);
  RewindCheckpoint(dir.path(), 2, 0);  // "counter" registered second
  if (GetParam() == 1) testing::RewriteInboxInFormat1(dir.path());
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_TRUE(bus->Subscribe(CountingSubscriber(&calls)).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  EXPECT_EQ(calls.load(), 10) << "the handler must not run again for handled events";
  BusStats stats = bus->Stats();
  EXPECT_EQ(stats.subscribers[0].duplicates, 10u);
  Transaction reader = bus->Begin();
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(reader.Get("effects", "order-" + std::to_string(i)).value(), std::optional<std::string>("1"));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, RedeliveryTest, ::testing::ValuesIn(testing::ReadableFormats()), testing::FormatName);

TEST(BusTest, BacklogLargerThanTheWindowIsDeliveredInOrder) {
  TempDir dir;
  Options o = MakeOptions(dir);
  o.max_in_flight_per_subscriber = 16;
  o.tail_cache_events = 16;
  constexpr int kEvents = 3000;
  std::atomic<int> unused{0};
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Subscribe(CountingSubscriber(&unused)).ok());  // registered, not started
    for (int i = 0; i < kEvents; ++i) {
      Transaction tx = bus->Begin();
      EventSpec spec = Approved("one-subject");
      spec.subject_version = static_cast<uint64_t>(i + 1);
      ASSERT_TRUE(tx.Publish(spec).ok());
      ASSERT_TRUE(tx.Commit().ok());
    }
    ASSERT_TRUE(bus->Close().ok());
  }
  EXPECT_EQ(unused.load(), 0);
  auto bus = OpenBus(o);
  std::vector<uint64_t> seen;
  std::atomic<uint64_t> max_in_flight{0};
  SubscriberOptions s;
  s.name = "counter";
  s.handler = [&](const Event& e, HandlerContext&) {
    seen.push_back(e.subject_version);  // one subject: never concurrent
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(testing::Eventually([&] {
    auto st = bus->Stats();
    max_in_flight = std::max<uint64_t>(max_in_flight.load(), st.subscribers[0].in_flight);
    return st.subscribers[0].checkpoint == static_cast<uint64_t>(kEvents);
  }));
  ASSERT_EQ(seen.size(), static_cast<size_t>(kEvents));
  for (int i = 0; i < kEvents; ++i) ASSERT_EQ(seen[i], static_cast<uint64_t>(i + 1));
  EXPECT_LE(max_in_flight.load(), 16u);
}

// A three-level cascade (placed -> invoiced -> shipped, each raised by a
// handler of the one before) keeps the trace of the first event, names the
// first event as the correlation of all, and links each to its parent by
// causation.
TEST(BusTest, TraceContextFollowsACascade) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::mutex mu;
  std::map<std::string, Event> seen;  // by type
  auto stage = [&](const std::string& name, const std::string& from, const std::string& to) {
    SubscriberOptions s;
    s.name = name;
    s.types = {from};
    s.handler = [&, to](const Event& e, HandlerContext& ctx) {
      {
        std::lock_guard<std::mutex> lock(mu);
        seen[e.type] = e;
      }
      if (to.empty()) return Outcome::Done();
      EventSpec next;
      next.type = to;
      next.subject = e.subject;
      return ctx.Publish(next).ok() ? Outcome::Done() : Outcome::RetryAfter(1ms);
    };
    return s;
  };
  ASSERT_TRUE(bus->Subscribe(stage("invoicing", "orders.order-placed.v1", "invoicing.invoice-raised.v1")).ok());
  ASSERT_TRUE(bus->Subscribe(stage("shipping", "invoicing.invoice-raised.v1", "shipping.parcel-sent.v1")).ok());
  ASSERT_TRUE(bus->Subscribe(stage("tracking", "shipping.parcel-sent.v1", "")).ok());
  ASSERT_TRUE(bus->Start().ok());
  const std::string traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  Transaction tx = bus->Begin();
  EventSpec placed;
  placed.type = "orders.order-placed.v1";
  placed.subject = "order-1";
  placed.traceparent = traceparent;
  auto root = tx.Publish(placed);
  ASSERT_TRUE(root.ok());
  ASSERT_TRUE(tx.Commit().ok());
  // WaitIdle covers events committed before the call; the follow-ups come
  // after, so wait for the last stage.
  ASSERT_TRUE(testing::Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return seen.size() == 3;
      },
      10s));
  std::lock_guard<std::mutex> lock(mu);
  const Event& a = seen["orders.order-placed.v1"];
  const Event& b = seen["invoicing.invoice-raised.v1"];
  const Event& c = seen["shipping.parcel-sent.v1"];
  EXPECT_EQ(a.id, *root);
  for (const Event* e : {&a, &b, &c}) EXPECT_EQ(e->traceparent, traceparent) << e->type << ": one trace";
  EXPECT_FALSE(a.causation_id.has_value());
  EXPECT_EQ(b.causation_id, a.id) << "invoice raised by the placed order";
  EXPECT_EQ(c.causation_id, b.id) << "parcel sent because of the invoice";
  EXPECT_EQ(b.correlation_id, a.id);
  EXPECT_EQ(c.correlation_id, a.id) << "the whole flow correlates to its first event";
}

// WaitQuiescent waits for the follow-ups of a receipt at any depth (here a
// slow third stage), and times out while one of them cannot complete.
TEST(BusTest, WaitQuiescentWaitsForTheWholeCascade) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<bool> third_done{false};
  std::atomic<bool> block{false};
  auto stage = [&](const std::string& name, const std::string& from, const std::string& to) {
    SubscriberOptions s;
    s.name = name;
    s.types = {from};
    s.retry.max_attempts = 100000;  // blocked, it retries; it never gives up
    s.handler = [&, to](const Event& e, HandlerContext& ctx) {
      if (to.empty()) {
        if (block.load()) return Outcome::RetryAfter(10ms);
        std::this_thread::sleep_for(100ms);
        third_done.store(true);
        return Outcome::Done();
      }
      EventSpec next;
      next.type = to;
      next.subject = e.subject;
      return ctx.Publish(next).ok() ? Outcome::Done() : Outcome::RetryAfter(1ms);
    };
    return s;
  };
  ASSERT_TRUE(bus->Subscribe(stage("one", "a.first.v1", "a.second.v1")).ok());
  ASSERT_TRUE(bus->Subscribe(stage("two", "a.second.v1", "a.third.v1")).ok());
  ASSERT_TRUE(bus->Subscribe(stage("three", "a.third.v1", "")).ok());
  ASSERT_TRUE(bus->Start().ok());
  auto commit_first = [&] {
    Transaction tx = bus->Begin();
    EventSpec e;
    e.type = "a.first.v1";
    e.subject = "s";
    EXPECT_TRUE(tx.Publish(e).ok());
    auto r = tx.Commit();
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : Receipt{};
  };
  Receipt receipt = commit_first();
  ASSERT_TRUE(bus->WaitQuiescent(receipt, 10s).ok());
  EXPECT_TRUE(third_done.load()) << "returned before the third level was handled";

  block.store(true);
  third_done.store(false);
  receipt = commit_first();
  EXPECT_EQ(bus->WaitQuiescent(receipt, 300ms).code(), Status::Code::kTimedOut);
  EXPECT_TRUE(bus->WaitQuiescent(Receipt{}, 1ms).ok()) << "nothing to wait for";
  block.store(false);
  ASSERT_TRUE(bus->WaitQuiescent(receipt, 10s).ok());
  EXPECT_TRUE(third_done.load());
}

TEST(BusTest, FollowUpEventsCommitAtomicallyWithEffects) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<int> attempts{0};
  std::atomic<int> follow_ups{0};
  std::mutex mu;
  std::optional<Event> follow_up;
  SubscriberOptions invoicing;
  invoicing.name = "invoicing";
  invoicing.types = {kType};
  invoicing.handler = [&](const Event& e, HandlerContext& ctx) {
    int attempt = ++attempts;
    EXPECT_TRUE(ctx.Put("effects", "invoice/" + e.subject, "raised").ok());
    EventSpec raised;
    raised.type = "invoicing.invoice-raised.v1";
    raised.subject = e.subject;
    EXPECT_TRUE(ctx.Publish(raised).ok());
    if (attempt == 1) {
      // A failed call poisons the unit: neither the effect nor the
      // follow-up may commit; the event is retried.
      EXPECT_FALSE(ctx.Put("no-such-cf", "k", "v").ok());
    }
    return Outcome::Done();
  };
  SubscriberOptions audit;
  audit.name = "audit";
  audit.types = {"invoicing.invoice-raised.v1"};
  audit.handler = [&](const Event& e, HandlerContext&) {
    ++follow_ups;
    std::lock_guard<std::mutex> lock(mu);
    follow_up = e;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(invoicing)).ok());
  ASSERT_TRUE(bus->Subscribe(std::move(audit)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction tx = bus->Begin();
  EventSpec spec = Approved("order-9");
  spec.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto id = tx.Publish(spec);
  ASSERT_TRUE(tx.Commit().ok());
  ASSERT_TRUE(testing::Eventually([&] { return follow_ups.load() == 1; }));
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(follow_ups.load(), 1) << "the failed attempt's follow-up must not exist";
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_TRUE(follow_up.has_value());
  EXPECT_EQ(follow_up->causation_id, *id);
  EXPECT_EQ(follow_up->correlation_id, *id);
  EXPECT_EQ(follow_up->traceparent, spec.traceparent);
  Transaction reader = bus->Begin();
  EXPECT_EQ(reader.Get("effects", "invoice/order-9").value(), std::optional<std::string>("raised"));
}

TEST(BusTest, HandlerConflictRerunsTheWholeHandler) {
  TempDir dir;
  Options o = MakeOptions(dir);
  o.worker_threads = 4;
  auto bus = OpenBus(o);
  SubscriberOptions s;
  s.name = "totals";
  s.handler = [](const Event&, HandlerContext& ctx) {
    // Many subjects, one shared total: only ExpectVersion keeps it exact.
    uint64_t v = ctx.GetVersion("effects", "total").value();
    auto cur = ctx.Get("effects", "total").value();
    int n = cur ? std::stoi(*cur) : 0;
    EXPECT_TRUE(ctx.ExpectVersion("effects", "total", v).ok());
    EXPECT_TRUE(ctx.Put("effects", "total", std::to_string(n + 1)).ok());
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (int i = 0; i < 500; ++i) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Approved("order-" + std::to_string(i))).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  Transaction reader = bus->Begin();
  EXPECT_EQ(reader.Get("effects", "total").value(), std::optional<std::string>("500"));
}

TEST(BusTest, RetryHoldsOnlyItsOwnSubject) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<bool> release{false};
  std::atomic<int> other_handled{0};
  std::atomic<int> blocked_attempts{0};
  SubscriberOptions s;
  s.name = "retrying";
  s.handler = [&](const Event& e, HandlerContext&) {
    if (e.subject == "stuck") {
      ++blocked_attempts;
      return release.load() ? Outcome::Done() : Outcome::RetryAfter(5ms);
    }
    ++other_handled;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (const char* subject : {"stuck", "a", "stuck", "b", "c"}) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Approved(subject)).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(testing::Eventually([&] { return other_handled.load() == 3; }, 10s));
  EXPECT_GE(blocked_attempts.load(), 1);
  EXPECT_EQ(bus->Stats().subscribers[0].checkpoint, 0u) << "seq 1 is still pending";
  release = true;
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(bus->Stats().subscribers[0].handled, 5u);
}

TEST(BusTest, HandlerThatThrowsIsRetriedWithBackoff) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<int> calls{0};
  SubscriberOptions s;
  s.name = "flaky";
  s.retry.base = 2ms;
  s.handler = [&](const Event&, HandlerContext& ctx) -> Outcome {
    EXPECT_EQ(ctx.Attempt(), static_cast<uint32_t>(calls.load() + 1));
    if (++calls < 3) throw std::runtime_error("transient");
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish(Approved("x")).ok());
  ASSERT_TRUE(tx.Commit().ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(bus->Stats().subscribers[0].retries, 2u);
}

TEST(BusTest, HandledOutboxIsRemovedByRange) {
  TempDir dir;
  Options o = MakeOptions(dir);
  o.trim_every_events = 100;
  std::atomic<int> calls{0};
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Subscribe(CountingSubscriber(&calls)).ok());
    ASSERT_TRUE(bus->Start().ok());
    for (int i = 0; i < 1000; ++i) {
      Transaction tx = bus->Begin();
      ASSERT_TRUE(tx.Publish(Approved("s" + std::to_string(i % 10))).ok());
      ASSERT_TRUE(tx.Commit().ok());
    }
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  Inspector db(dir.path());
  EXPECT_TRUE(db.Outbox().empty());
}

TEST(BusTest, SubscriberNamesAndDuplicatesAreChecked) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  SubscriberOptions bad;
  bad.name = "has space";
  bad.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  EXPECT_TRUE(bus->Subscribe(bad).IsInvalidArgument());
  SubscriberOptions no_handler;
  no_handler.name = "ok";
  EXPECT_TRUE(bus->Subscribe(no_handler).IsInvalidArgument());
  SubscriberOptions good = bad;
  good.name = "good";
  ASSERT_TRUE(bus->Subscribe(good).ok());
  EXPECT_TRUE(bus->Subscribe(good).IsBusy());
}

TEST(BusTest, NewSubscriberStartsAfterExistingEvents) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  Transaction before = bus->Begin();
  ASSERT_TRUE(before.Publish(Approved("old")).ok());
  ASSERT_TRUE(before.Commit().ok());
  std::atomic<int> calls{0};
  ASSERT_TRUE(bus->Subscribe(CountingSubscriber(&calls)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction after = bus->Begin();
  ASSERT_TRUE(after.Publish(Approved("new")).ok());
  ASSERT_TRUE(after.Commit().ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(calls.load(), 1);
}

TEST(BusTest, CloseIsIdempotentAndRefusesLaterCommits) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->Close().ok());
  ASSERT_TRUE(bus->Close().ok());
  Transaction tx = bus->Begin();
  EXPECT_TRUE(tx.Publish(Approved("x")).status().IsClosed());
  EXPECT_TRUE(tx.Commit().status().IsClosed());
  EXPECT_TRUE(bus->Start().IsClosed());
}

TEST(BusTest, CloseWhileOtherThreadsCallInAnswersThemClosedAndEndsTheirWaits) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_NE(bus, nullptr);
  // Never started: its events stay pending, so a WaitHandled on them
  // would last its whole timeout.
  RegisterIdleSubscriber(*bus);
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish(Approved("pending")).ok());
  Result<Receipt> pending = tx.Commit();
  ASSERT_TRUE(pending.ok());

  std::atomic<bool> stop{false};
  std::atomic<int> unexpected{0};
  auto expect_ok_or_closed = [&](const Status& s) {
    if (!s.ok() && !s.IsClosed()) {
      ++unexpected;
      ADD_FAILURE() << s.ToString();
    }
  };
  std::vector<std::thread> callers;
  // Calls that write, read storage, or both, until Close() ends them.
  callers.emplace_back([&] {
    for (int i = 0; !stop.load(); ++i) {
      SubscriberOptions s;
      s.name = "late-" + std::to_string(i);
      s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
      expect_ok_or_closed(bus->Subscribe(std::move(s)));
      expect_ok_or_closed(bus->IngestEvent(FromElsewhere(), IngestOptions{}).status());
    }
  });
  callers.emplace_back([&] {
    while (!stop.load()) {
      expect_ok_or_closed(bus->EventStatus(pending->event_ids[0]).status());
      expect_ok_or_closed(bus->Quarantine("bad input", "test", "refused"));
      EXPECT_FALSE(bus->MetricsText().empty());
    }
  });
  // An application's transactions: every call of one touches storage.
  callers.emplace_back([&] {
    for (int i = 0; !stop.load(); ++i) {
      Transaction t = bus->Begin();
      expect_ok_or_closed(t.Put("orders", "o-" + std::to_string(i), "v"));
      expect_ok_or_closed(t.Get("orders", "o-0").status());
      expect_ok_or_closed(t.Publish(Approved("o-" + std::to_string(i))).status());
      expect_ok_or_closed(t.Commit().status());
    }
  });
  std::atomic<bool> waiting{false};
  std::atomic<int> waits_ended{0};
  callers.emplace_back([&] {
    std::vector<DeliveryState> states;
    waiting.store(true);
    const Status s = bus->WaitHandled(*pending, {}, 120s, &states);
    EXPECT_TRUE(s.IsClosed()) << s.ToString();
    ++waits_ended;
  });
  while (!waiting.load()) std::this_thread::yield();
  std::this_thread::sleep_for(50ms);
  // The waiter is inside WaitHandled (its event is never handled).
  EXPECT_EQ(waits_ended.load(), 0);
  const auto closing = std::chrono::steady_clock::now();
  EXPECT_TRUE(bus->Close().ok());
  // The waiter gave up when Close() began, instead of holding it for the
  // rest of its two minutes.
  EXPECT_LT(std::chrono::steady_clock::now() - closing, 60s);
  stop.store(true);
  for (auto& t : callers) t.join();
  EXPECT_EQ(waits_ended.load(), 1);
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_TRUE(bus->EventStatus(pending->event_ids[0]).status().IsClosed());
  std::vector<DeliveryState> states;
  EXPECT_TRUE(bus->WaitHandled(*pending, {}, 1s, &states).IsClosed());
}

TEST(BusTest, CloseFromAHandlerOrAVerifierIsRefusedEvenWhileAnotherCloseWaits) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_NE(bus, nullptr);
  // A verifier runs inside Ingest: closing from there would wait for itself.
  Status from_verifier;
  ASSERT_TRUE(bus->Contracts()
                  .RegisterVerifier(kType,
                                    [&](std::string_view) {
                                      from_verifier = bus->Close();
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(bus->IngestEvent(FromElsewhere(), IngestOptions{}).ok());
  EXPECT_TRUE(from_verifier.IsInvalidArgument()) << from_verifier.ToString();

  // A handler closes while the application's Close() waits for that very
  // handler to finish: refused at once, and both return.
  std::atomic<bool> entered{false};
  std::atomic<bool> closing{false};
  Status from_handler;
  SubscriberOptions sub;
  sub.name = "closer";
  sub.handler = [&](const Event& ev, HandlerContext&) {
    if (ev.subject != "close-from-here") return Outcome::Done();
    entered.store(true);
    while (!closing.load()) std::this_thread::yield();
    std::this_thread::sleep_for(20ms);  // Close() is waiting for the workers now
    from_handler = bus->Close();
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(sub)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish(Approved("close-from-here")).ok());
  ASSERT_TRUE(tx.Commit().ok());
  ASSERT_TRUE(testing::Eventually([&] { return entered.load(); }));
  closing.store(true);
  EXPECT_TRUE(bus->Close().ok());
  EXPECT_TRUE(from_handler.IsInvalidArgument()) << from_handler.ToString();
}

// Every wait from a handler would wait for that handler: each is refused
// at once, long before its timeout, and the handler's event completes.
TEST(BusTest, WaitsFromAHandlerAreRefusedAtOnce) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_NE(bus, nullptr);
  std::vector<std::pair<std::string, Status>> from_handler;
  std::chrono::steady_clock::duration longest{};
  SubscriberOptions sub;
  sub.name = "waiter";
  sub.handler = [&](const Event&, HandlerContext&) {
    const Receipt own;  // an empty receipt: WaitHandled would return at once
    std::vector<DeliveryState> states;
    const std::vector<std::pair<std::string, std::function<Status()>>> waits = {
        {"WaitIdle", [&] { return bus->WaitIdle(60s); }},
        {"WaitCaughtUp", [&] { return bus->WaitCaughtUp(60s); }},
        {"WaitHandled", [&] { return bus->WaitHandled(own, {}, 60s, &states); }},
        {"WaitQuiescent", [&] { return bus->WaitQuiescent(own, 60s); }},
    };
    for (const auto& [name, wait] : waits) {
      const auto start = std::chrono::steady_clock::now();
      from_handler.emplace_back(name, wait());
      longest = std::max(longest, std::chrono::steady_clock::now() - start);
    }
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(sub)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish(Approved("wait-from-here")).ok());
  ASSERT_TRUE(tx.Commit().ok());
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  ASSERT_EQ(from_handler.size(), 4u);
  for (const auto& [name, status] : from_handler) {
    EXPECT_TRUE(status.IsInvalidArgument()) << name << ": " << status.ToString();
    EXPECT_NE(status.message().find(name + "() was called from a handler"), std::string::npos) << status.ToString();
  }
  EXPECT_LT(longest, 10s) << "refused at once, not after the timeout";
}

// Every count, size, duration and name of Options is checked at Open
// alike: a value out of its range is refused with InvalidArgument naming
// the option, and nothing is created; the values at the ends of each range
// are taken.
TEST(BusTest, EveryOptionOutOfItsRangeIsRefusedByName) {
  using std::chrono::milliseconds;
  struct Case {
    const char* option;
    std::function<void(Options&)> set;
  };
  const std::vector<Case> refused = {
      {"worker_threads", [](Options& o) { o.worker_threads = 0; }},
      {"worker_threads", [](Options& o) { o.worker_threads = 257; }},
      {"memory_budget", [](Options& o) { o.memory_budget = kMinMemoryBudget - 1; }},
      {"max_in_flight_per_subscriber", [](Options& o) { o.max_in_flight_per_subscriber = 15; }},
      {"max_in_flight_per_subscriber", [](Options& o) { o.max_in_flight_per_subscriber = (1u << 22) + 1; }},
      {"tail_cache_events", [](Options& o) { o.tail_cache_events = 15; }},
      {"tail_cache_bytes", [](Options& o) { o.tail_cache_bytes = (64u << 10) - 1; }},
      {"max_payload_bytes", [](Options& o) { o.max_payload_bytes = 0; }},
      {"max_payload_bytes", [](Options& o) { o.max_payload_bytes = (64u << 20) + 1; }},
      {"max_group_commits", [](Options& o) { o.max_group_commits = 0; }},
      {"max_group_bytes", [](Options& o) { o.max_group_bytes = 0; }},
      {"trim_every_events", [](Options& o) { o.trim_every_events = 0; }},
      {"quarantine_max_entries", [](Options& o) { o.quarantine_max_entries = 0; }},
      {"quarantine_max_bytes", [](Options& o) { o.quarantine_max_bytes = 0; }},
      {"buffered_sync_interval", [](Options& o) { o.buffered_sync_interval = milliseconds(0); }},
      {"buffered_sync_interval", [](Options& o) { o.buffered_sync_interval = std::chrono::hours(24) + 1ms; }},
      {"trim_interval", [](Options& o) { o.trim_interval = milliseconds(0); }},
      {"trim_interval", [](Options& o) { o.trim_interval = milliseconds(-1); }},
      {"checkpoint_interval", [](Options& o) { o.checkpoint_interval = milliseconds(0); }},
      {"checkpoint_interval", [](Options& o) { o.checkpoint_interval = milliseconds(-10); }},
      {"retain_for", [](Options& o) { o.retain_for = milliseconds(-5); }},
      {"inbox_window", [](Options& o) { o.inbox_window = milliseconds(-1); }},
      {"dir", [](Options& o) { o.dir.clear(); }},
      {"source", [](Options& o) { o.source.clear(); }},
      {"column_families", [](Options& o) { o.column_families.push_back("orders"); }},
  };
  for (const Case& c : refused) {
    TempDir dir;
    Options o = MakeOptions(dir);
    c.set(o);
    std::unique_ptr<Bus> bus;
    Status s = Bus::Open(o, &bus);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.option << ": " << s.ToString();
    EXPECT_NE(s.message().find(std::string("Options::") + c.option), std::string::npos) << s.ToString();
    EXPECT_EQ(bus, nullptr);
    EXPECT_FALSE(std::filesystem::exists(o.dir) && !o.dir.empty()) << c.option << ": nothing is created";
  }
  const std::vector<Case> taken = {
      {"worker_threads", [](Options& o) { o.worker_threads = 256; }},
      {"max_in_flight_per_subscriber", [](Options& o) { o.max_in_flight_per_subscriber = 16; }},
      {"max_payload_bytes", [](Options& o) { o.max_payload_bytes = 64u << 20; }},
      {"buffered_sync_interval", [](Options& o) { o.buffered_sync_interval = 1ms; }},
      {"checkpoint_interval", [](Options& o) { o.checkpoint_interval = std::chrono::hours(24); }},
      {"retain_for", [](Options& o) { o.retain_for = milliseconds(0); }},
  };
  for (const Case& c : taken) {
    TempDir dir;
    Options o = MakeOptions(dir);
    c.set(o);
    std::unique_ptr<Bus> bus;
    Status s = Bus::Open(o, &bus);
    EXPECT_TRUE(s.ok()) << c.option << ": " << s.ToString();
  }
}

TEST(BusTest, OpenRefusesWhatIsNotAWalbusDatabase) {
  TempDir dir;
  std::filesystem::create_directories(dir.path());
  {
    std::ofstream f(dir.path() + "/notes.txt");
    f << "hello";
  }
  std::unique_ptr<Bus> bus;
  Status s = Bus::Open(MakeOptions(dir), &bus);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not a walbus database"), std::string::npos) << s.ToString();

  Options missing = MakeOptions(dir);
  missing.dir = dir.root() + "/absent";
  missing.create_if_missing = false;
  EXPECT_TRUE(Bus::Open(missing, &bus).IsNotFound());
}

TEST(BusTest, SecondProcessGetsAClearLockError) {
  TempDir dir;
  // The second process is forked before this one opens the bus: a child of
  // a process with threads may make only async-signal-safe calls, and Open
  // allocates and locks (a lock some thread of the parent held at the fork
  // stays held in the child forever; seen as a hang under ASan). The child
  // tries once the parent holds the database.
  int go[2];
  int report_pipe[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(report_pipe), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(go[1]);
    close(report_pipe[0]);
    char held = 0;
    if (read(go[0], &held, 1) != 1) _exit(2);  // the parent failed before opening
    std::unique_ptr<Bus> second;
    Status s = Bus::Open(MakeOptions(dir), &second);
    std::string report = s.ToString();
    ssize_t w = write(report_pipe[1], report.data(), report.size());
    _exit(w > 0 && s.IsBusy() ? 0 : 1);
  }
  close(go[0]);
  close(report_pipe[1]);
  auto bus = OpenBus(MakeOptions(dir));
  ASSERT_NE(bus, nullptr);
  ASSERT_EQ(write(go[1], "1", 1), 1);
  close(go[1]);
  char buf[512] = {};
  ssize_t n = read(report_pipe[0], buf, sizeof(buf) - 1);
  close(report_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::string report(buf, n > 0 ? static_cast<size_t>(n) : 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << report;
  EXPECT_NE(report.find("LOCK"), std::string::npos) << report;
  EXPECT_NE(report.find("in use"), std::string::npos) << report;
}

// A process that only drains: WaitCaughtUp returns once every subscriber
// has completed everything, the follow-ups its handlers published at any
// depth included.
TEST(BusTest, WaitCaughtUpWaitsForFollowUpsAtAnyDepth) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<int> handled{0};
  SubscriberOptions chain;
  chain.name = "chain";
  chain.handler = [&](const Event& e, HandlerContext& ctx) {
    std::this_thread::sleep_for(5ms);
    const int depth = std::stoi(e.data);
    if (depth < 6) {
      EventSpec next = Approved(e.subject, std::to_string(depth + 1));
      if (!ctx.Publish(next).ok()) return Outcome::RetryAfter(1ms);
    }
    ++handled;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(chain)).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (const char* subject : {"order-1", "order-2"}) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Approved(subject, "1")).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(bus->WaitCaughtUp(10s).ok());
  EXPECT_EQ(handled.load(), 12) << "two chains of six";
  EXPECT_EQ(bus->Stats().last_seq, 12u);

  SubscriberOptions stuck;
  stuck.name = "stuck";
  stuck.retry.max_attempts = 1000000;
  stuck.handler = [](const Event&, HandlerContext&) { return Outcome::RetryAfter(1ms); };
  ASSERT_TRUE(bus->Subscribe(std::move(stuck)).ok());
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish(Approved("order-3", "6")).ok());
  ASSERT_TRUE(tx.Commit().ok());
  EXPECT_TRUE(bus->WaitCaughtUp(50ms).IsTimedOut());
  ASSERT_TRUE(bus->Close().ok());
  EXPECT_EQ(bus->WaitCaughtUp(10ms).code(), Status::Code::kClosed);
}

TEST(BusTest, WaitHandledReportsWhereEachEventStands) {
  TempDir dir;
  auto bus = OpenBus(MakeOptions(dir));
  std::atomic<bool> release{false};
  SubscriberOptions invoicing;
  invoicing.name = "invoicing";
  invoicing.types = {kType};
  invoicing.retry.max_attempts = 1;
  invoicing.handler = [](const Event& e, HandlerContext&) {
    return e.data == "bad" ? Outcome::Reject("bad order") : Outcome::Done();
  };
  SubscriberOptions billing;
  billing.name = "billing";
  billing.types = {"billing.invoice-raised.v1"};  // never takes orders
  billing.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  SubscriberOptions slow;
  slow.name = "slow";
  slow.retry.max_attempts = 1000000;
  slow.handler = [&](const Event&, HandlerContext&) {
    return release.load() ? Outcome::Done() : Outcome::RetryAfter(5ms);
  };
  ASSERT_TRUE(bus->Subscribe(std::move(invoicing)).ok());
  ASSERT_TRUE(bus->Subscribe(std::move(billing)).ok());
  ASSERT_TRUE(bus->Subscribe(std::move(slow)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish(Approved("order-1", "good")).ok());
  ASSERT_TRUE(tx.Publish(Approved("order-2", "bad")).ok());
  auto receipt = tx.Commit();
  ASSERT_TRUE(receipt.ok());

  std::vector<DeliveryState> states;
  ASSERT_TRUE(bus->WaitHandled(*receipt, {"invoicing", "billing"}, 10s, &states).ok());
  ASSERT_EQ(states.size(), 4u);
  auto state_of = [&](const std::string& sub, uint64_t seq) {
    for (const auto& st : states)
      if (st.subscriber == sub && st.seq == seq) return st.state;
    ADD_FAILURE() << "no state for " << sub << " seq " << seq;
    return Delivery::kPending;
  };
  EXPECT_EQ(state_of("invoicing", receipt->first_seq), Delivery::kHandled);
  EXPECT_EQ(state_of("invoicing", receipt->first_seq + 1), Delivery::kDeadLettered);
  EXPECT_EQ(state_of("billing", receipt->first_seq), Delivery::kNotDelivered);

  Status timed = bus->WaitHandled(*receipt, {"slow"}, 50ms, &states);
  EXPECT_TRUE(timed.IsTimedOut()) << timed.ToString();
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].state, Delivery::kRetrying) << "it failed and runs again";
  EXPECT_GE(states[0].attempts, 1u);
  EXPECT_TRUE(bus->WaitHandled(*receipt, {"nobody"}, 10ms, &states).IsInvalidArgument());

  release = true;
  ASSERT_TRUE(bus->WaitHandled(*receipt, {}, 10s, &states).ok()) << "all active subscribers";
  EXPECT_EQ(states.size(), 6u);

  Result<std::vector<DeliveryState>> found = bus->EventStatus(receipt->event_ids[1]);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  const std::vector<DeliveryState>& by_id = *found;
  ASSERT_EQ(by_id.size(), 3u);
  std::map<std::string, Delivery> by_name;
  for (const auto& st : by_id) by_name[st.subscriber] = st.state;
  EXPECT_EQ(by_name["invoicing"], Delivery::kDeadLettered);
  EXPECT_EQ(by_name["slow"], Delivery::kHandled);
  EXPECT_EQ(by_name["billing"], Delivery::kPending) << "by id alone, not known";
}

// The errors walbus/bus.h and walbus/scope.h promise for misuse: a second
// Commit of one transaction, bad registrations.
TEST(BusTest, MisuseGetsTheErrorsTheContractsName) {
  TempDir dir;
  auto bus = testing::OpenBus(MakeOptions(dir));
  ASSERT_NE(bus, nullptr);
  Transaction tx = bus->Begin();
  EventSpec e;
  e.type = "orders.order-placed.v1";
  e.subject = "order-1";
  ASSERT_TRUE(tx.Publish(e).ok());
  ASSERT_TRUE(tx.Commit().ok());
  Result<Receipt> again = tx.Commit();
  EXPECT_TRUE(again.status().IsInvalidArgument()) << again.status().ToString();
  EXPECT_EQ(bus->Stats().last_seq, 1u) << "nothing written twice";

  const PayloadVerifier accept = [](std::string_view) { return Status::OK(); };
  EXPECT_TRUE(bus->Contracts().RegisterVerifier("Orders.Placed", accept).IsInvalidArgument());
  EXPECT_TRUE(bus->Contracts().RegisterVerifier("orders.order-placed.v1", PayloadVerifier()).IsInvalidArgument());
  EXPECT_TRUE(bus->Contracts().RegisterVerifier("orders.order-placed.v1", accept).ok());

  const Upcaster same = [](const Event& from) -> Result<std::string> { return from.data; };
  EXPECT_TRUE(bus->Contracts().RegisterUpcaster("orders.order-placed.v1", "Orders.v2", same).IsInvalidArgument());
  EXPECT_TRUE(
      bus->Contracts().RegisterUpcaster("orders.order-placed.v1", "orders.order-shipped.v2", same).IsInvalidArgument())
      << "another base name";
  EXPECT_TRUE(
      bus->Contracts().RegisterUpcaster("orders.order-placed.v2", "orders.order-placed.v1", same).IsInvalidArgument())
      << "a lower version";
  EXPECT_TRUE(bus->Contracts()
                  .RegisterUpcaster("orders.order-placed.v1", "orders.order-placed.v2", Upcaster())
                  .IsInvalidArgument());
  EXPECT_TRUE(bus->Contracts().RegisterUpcaster("orders.order-placed.v1", "orders.order-placed.v2", same).ok());

  EXPECT_TRUE(bus->Start().ok());
  EXPECT_TRUE(bus->Start().ok()) << "again: nothing to do";
  ASSERT_TRUE(bus->Close().ok());
  EXPECT_TRUE(bus->Start().IsClosed());
}

}  // namespace
}  // namespace walbus
