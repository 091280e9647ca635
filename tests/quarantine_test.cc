// Untrusted input through Bus::Ingest: verified envelopes are committed
// with their identity; everything else goes to the bounded quarantine.
#include "bus/quarantine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "bus/envelope.h"
#include "bus/inspect.h"
#include "tests/test_util.h"
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
  auto receipt = bus->Ingest(internal::EncodeEnvelope(in), "bridge:test");
  ASSERT_TRUE(receipt.ok()) << receipt.status().ToString();
  ASSERT_EQ(receipt->event_ids.size(), 1u);
  EXPECT_EQ(receipt->event_ids[0], in.id);
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
  ASSERT_TRUE(bus->RegisterVerifier("orders.order-approved.v1", [](std::string_view d) {
                  return d.starts_with("{") ? Status::OK() : Status::InvalidArgument("payload is not a JSON object");
                }).ok());
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
    auto r = bus->Ingest(c.bytes, "bridge:test");
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
      EXPECT_FALSE(bus->Ingest(std::string(500, static_cast<char>('a' + i)), "file:import").ok());
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
