// Untrusted input through Bus::IngestEnvelope: verified envelopes are committed
// with their identity; everything else goes to the bounded quarantine.
#include "bus/core/quarantine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "bus/core/envelope.h"
#include "tests/test_util.h"
#include "tools/walbus/inspect.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

Options MakeOptions(const TempDir& dir) {
  Options o;
  o.dir = dir.path();
  o.durability = Durability::kBuffered;
  o.quarantine_max_entries = 3;
  o.quarantine_max_bytes = 1 << 20;
  return o;
}

Event Foreign(std::string data) {
  Event e;
  e.id = EventId::Generate();
  e.type = "orders.order-approved.v1";
  e.source = "device-7/orders";
  e.subject = "order-9";
  e.subject_version = 2;
  e.time = std::chrono::system_clock::now() - 1h;
  e.data = std::move(data);
  return e;
}

TEST(QuarantineTest, IngestEventTakesEachIdOncePerDedupScope) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  const Event in = Foreign("{\"total\":5}");
  IngestOptions from_a{"jetstream:a", "inbound-a"};
  auto first = bus->IngestEvent(in, from_a);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_NE(first->disposition, IngestDisposition::kDuplicate);
  ASSERT_EQ(first->receipt.event_ids.size(), 1u);
  EXPECT_EQ(first->receipt.event_ids[0], in.id);

  auto again = bus->IngestEvent(in, from_a);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->disposition, IngestDisposition::kDuplicate);
  EXPECT_TRUE(again->receipt.event_ids.empty());
  EXPECT_EQ(bus->Stats().last_seq, 1u) << "a duplicate commits nothing";

  // Another scope is another inbound channel: it takes the id once too.
  auto other = bus->IngestEvent(in, IngestOptions{"jetstream:b", "inbound-b"});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->disposition, IngestDisposition::kDuplicate);
  // Without a scope nothing is deduplicated.
  auto plain = bus->IngestEvent(in, IngestOptions{"file:x", ""});
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->disposition, IngestDisposition::kDuplicate);
  EXPECT_EQ(bus->Stats().last_seq, 3u);

  EXPECT_EQ(bus->IngestEvent(in, IngestOptions{"x", "bad scope!"}).status().code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(bus->Close().ok());
  bus.reset();

  // The dedup record is durable with the event.
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  auto after = bus->IngestEvent(in, from_a);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->disposition, IngestDisposition::kDuplicate);
}

TEST(QuarantineTest, ConcurrentIngestsOfOneIdCommitOnce) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  std::vector<Event> events;
  for (int i = 0; i < 50; ++i) events.push_back(Foreign("{}"));
  std::atomic<int> taken{0}, duplicates{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (const Event& e : events) {
        auto r = bus->IngestEvent(e, IngestOptions{"jetstream:a", "inbound"});
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        (r->disposition == IngestDisposition::kDuplicate ? duplicates : taken).fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken.load(), 50);
  EXPECT_EQ(duplicates.load(), 150);
  EXPECT_EQ(bus->Stats().last_seq, 50u);
}

IngestOptions Ordered(std::string key, uint64_t position, bool accept_gap = false) {
  IngestOptions o{"jetstream:a", "inbound"};
  o.order_key = std::move(key);
  o.position = position;
  o.accept_gap = accept_gap;
  return o;
}

TEST(QuarantineTest, OrderedIngestTakesEachKeyInItsSendersOrder) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  std::vector<Event> sent;
  for (int i = 0; i < 6; ++i) sent.push_back(Foreign(std::to_string(i + 1)));
  auto ingest = [&](size_t position, bool accept_gap = false) {
    auto r = bus->IngestEvent(sent[position - 1], Ordered("k", position, accept_gap));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : IngestResult{};
  };
  EXPECT_EQ(ingest(1).disposition, IngestDisposition::kTaken);
  // 3 before 2: refused, nothing written, and told which one is missing.
  IngestResult early = ingest(3);
  EXPECT_EQ(early.disposition, IngestDisposition::kAhead);
  EXPECT_EQ(early.next_position, 2u);
  EXPECT_EQ(bus->Stats().last_seq, 1u);
  EXPECT_EQ(ingest(2).disposition, IngestDisposition::kTaken);
  IngestResult now = ingest(3);
  EXPECT_EQ(now.disposition, IngestDisposition::kTaken);
  EXPECT_EQ(now.next_position, 4u);
  // Old positions again: duplicates, however often.
  EXPECT_EQ(ingest(1).disposition, IngestDisposition::kDuplicate);
  EXPECT_EQ(ingest(3).disposition, IngestDisposition::kDuplicate);
  // Another key of the same scope has its own order.
  auto other = bus->IngestEvent(Foreign("o"), Ordered("other", 1));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->disposition, IngestDisposition::kTaken);

  // A gap the caller gave up on: 6 is taken, 4 and 5 skipped; 5 arriving
  // afterwards is taken once, late, and never again.
  EXPECT_EQ(ingest(6).disposition, IngestDisposition::kAhead);
  IngestResult skipped = ingest(6, true);
  EXPECT_EQ(skipped.disposition, IngestDisposition::kTaken);
  EXPECT_EQ(skipped.skipped_positions, 2u);
  EXPECT_EQ(skipped.next_position, 7u);
  EXPECT_EQ(ingest(5).disposition, IngestDisposition::kLate);
  EXPECT_EQ(ingest(5).disposition, IngestDisposition::kDuplicate);
  EXPECT_EQ(ingest(6).disposition, IngestDisposition::kDuplicate);
  const uint64_t committed = bus->Stats().last_seq;
  EXPECT_EQ(committed, 6u) << "1, 2, 3, other, 6, 5";
  ASSERT_TRUE(bus->Close().ok());
  bus.reset();

  // The order record is durable with the events.
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  EXPECT_EQ(ingest(2).disposition, IngestDisposition::kDuplicate);
  IngestResult after = ingest(4);
  EXPECT_EQ(after.disposition, IngestDisposition::kLate);
  auto next = bus->IngestEvent(Foreign("7"), Ordered("k", 8));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->disposition, IngestDisposition::kAhead);
  EXPECT_EQ(next->next_position, 7u);

  EXPECT_EQ(
      bus->IngestEvent(Foreign("x"), IngestOptions{.source = "x", .order_key = "k", .position = 1}).status().code(),
      Status::Code::kInvalidArgument)
      << "an order key needs a dedup scope";
  EXPECT_EQ(bus->IngestEvent(Foreign("x"), Ordered("k", 0)).status().code(), Status::Code::kInvalidArgument);
}

TEST(QuarantineTest, ConcurrentOrderedIngestsTakeEachPositionOnce) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  std::vector<Event> events;
  for (int i = 0; i < 40; ++i) events.push_back(Foreign(std::to_string(i)));
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      // Each thread offers every position until all are taken; an early
      // one is offered again later, as a receiver holding it would.
      for (size_t next = 0; next < events.size();) {
        auto r = bus->IngestEvent(events[next], Ordered("k", next + 1));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (r->disposition == IngestDisposition::kTaken) taken.fetch_add(1);
        ASSERT_NE(r->disposition, IngestDisposition::kLate);
        next = r->disposition == IngestDisposition::kAhead ? r->next_position - 1 : next + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken.load(), 40);
  EXPECT_EQ(bus->Stats().last_seq, 40u);
}

TEST(QuarantineTest, InvalidIngestedEventAndRefusedInputAreQuarantined) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  Event no_id = Foreign("{}");
  no_id.id = EventId{};
  auto r = bus->IngestEvent(no_id, IngestOptions{"jetstream:a", "inbound"});
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  Event bad_type = Foreign("{}");
  bad_type.type = "no version";
  EXPECT_EQ(bus->IngestEvent(bad_type, IngestOptions{"jetstream:a", "inbound"}).status().code(),
            Status::Code::kInvalidArgument);
  ASSERT_TRUE(bus->Quarantine("raw message", "jetstream:a", "signature does not match").ok());
  EXPECT_EQ(bus->Stats().quarantined, 3u);
  EXPECT_EQ(bus->Stats().last_seq, 0u);
}

TEST(QuarantineTest, VerifiedEnvelopeIsCommittedWithItsIdentity) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  std::mutex mu;
  std::optional<Event> seen;
  SubscriberOptions s;
  s.name = "reader";
  s.handler = [&](const Event& e, HandlerContext&) {
    std::lock_guard<std::mutex> lock(mu);
    seen = e;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  const Event in = Foreign("{\"total\":12}");
  auto ingested = bus->IngestEnvelope(internal::EncodeEnvelope(in), {.source = "bridge:test"});
  ASSERT_TRUE(ingested.ok()) << ingested.status().ToString();
  EXPECT_EQ(ingested->disposition, IngestDisposition::kTaken);
  ASSERT_EQ(ingested->receipt.event_ids.size(), 1u);
  EXPECT_EQ(ingested->receipt.event_ids[0], in.id);
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->id, in.id);
  EXPECT_EQ(seen->source, "device-7/orders");
  EXPECT_EQ(seen->time, in.time);
  EXPECT_EQ(seen->data, in.data);
  EXPECT_EQ(bus->Stats().quarantined, 0u);
}

TEST(QuarantineTest, InvalidInputIsQuarantinedAndNeverHandled) {
  TempDir dir;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(MakeOptions(dir), &bus).ok());
  std::atomic<int> handled{0};
  SubscriberOptions s;
  s.name = "reader";
  s.handler = [&](const Event&, HandlerContext&) {
    ++handled;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Contracts()
                  .RegisterVerifier("orders.order-approved.v1",
                                    [](std::string_view d) {
                                      return d.starts_with("{")
                                                 ? Status::OK()
                                                 : Status::InvalidArgument("payload is not a JSON object");
                                    })
                  .ok());
  ASSERT_TRUE(bus->Start().ok());
  std::string truncated = internal::EncodeEnvelope(Foreign("{}"));
  truncated.resize(truncated.size() / 2);
  Event bad_type = Foreign("{}");
  bad_type.type = "OrderApproved";
  struct Case {
    std::string bytes;
    const char* reason;
  } cases[] = {
      {"not a flatbuffer at all", "verification"},
      {truncated, "verification"},
      {internal::EncodeEnvelope(bad_type), "rule"},
      {internal::EncodeEnvelope(Foreign("plain text")), "not a JSON object"},
  };
  for (const Case& c : cases) {
    auto r = bus->IngestEnvelope(c.bytes, {.source = "bridge:test"});
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.reason), std::string::npos) << r.status().ToString();
  }
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(handled.load(), 0);
  BusStats st = bus->Stats();
  EXPECT_EQ(st.last_seq, 0u) << "nothing reached the outbox";
  EXPECT_EQ(st.quarantined, 4u);
  EXPECT_EQ(st.quarantine_evicted, 1u) << "bounded at three entries";
  std::vector<internal::QuarantineEntry> q;
  ASSERT_TRUE(internal::ListQuarantine(dir.path(), &q, SIZE_MAX).ok());
  ASSERT_EQ(q.size(), 3u) << "the oldest was evicted";
  EXPECT_EQ(q[0].record.raw, truncated);
  EXPECT_EQ(q[0].record.source, "bridge:test");
  EXPECT_NE(q[2].record.reason.find("not a JSON object"), std::string::npos) << q[2].record.reason;
}

TEST(QuarantineTest, BoundsHoldAcrossRestartsAndByBytes) {
  TempDir dir;
  Options o = MakeOptions(dir);
  o.quarantine_max_entries = 100;
  o.quarantine_max_bytes = 3000;
  for (int run = 0; run < 2; ++run) {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
    for (int i = 0; i < 10; ++i) {
      EXPECT_FALSE(bus->IngestEnvelope(std::string(500, static_cast<char>('a' + i)), {.source = "file:import"}).ok());
    }
    EXPECT_EQ(bus->Stats().quarantined, 10u * (run + 1)) << "the counter survives the restart";
  }
  std::vector<internal::QuarantineEntry> q;
  ASSERT_TRUE(internal::ListQuarantine(dir.path(), &q, SIZE_MAX).ok());
  size_t bytes = 0;
  for (const auto& e : q) bytes += e.record.raw.size();
  EXPECT_LE(bytes, 3000u);
  EXPECT_GE(q.size(), 4u);
  EXPECT_EQ(q.back().record.raw, std::string(500, 'j')) << "the newest is kept";
}

}  // namespace
}  // namespace walbus
