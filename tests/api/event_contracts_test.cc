// bus/api/event_contracts.cc: EventContracts::RegisterSchema against a real database:
// versions, the same schema again, compatible and breaking evolutions
// checked against every version, restarts, concurrent registrations.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "tests/payload_json.h"
#include "tests/test_util.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/schema_source.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

std::string Source(const std::string& fields) {
  return "namespace orders;\ntable OrderApproved { " + fields +
         " }\nroot_type OrderApproved;\nfile_identifier \"ORDA\";";
}

std::string Binary(const std::string& fields) {
  auto schema = internal::ParseSchemaSource(Source(fields), {}, "order_approved.fbs");
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return schema.ok() ? schema->bytes() : std::string();
}

std::string Payload(const std::string& source, const std::string& json) {
  std::string error;
  std::string payload = testing::PayloadFromJson(source, json, &error);
  EXPECT_FALSE(payload.empty()) << error;
  return payload;
}

const std::string kV1Fields = "order_id: string (required); priority: int;";
const std::string kV2Fields = "order_id: string (required); priority: int; note: string;";
const std::string kStockReleased =
    "namespace stock; table StockReleased { order_id: string; } root_type StockReleased; file_identifier \"STRL\";";

Status PublishOne(Bus* bus, const std::string& type, const std::string& data) {
  Transaction tx = bus->Begin();
  if (auto id = tx.Publish(EventSpec{.type = type, .subject = "order-1", .data = data}); !id.ok()) return id.status();
  return tx.Commit().status();
}

TEST(EventContractsTest, VersionsGrowOnlyByCompatibleEvolutions) {
  TempDir dir;
  const std::string v1 = Binary("order_id: string (required); priority: int;");
  const std::string v2 = Binary("order_id: string (required); priority: int; note: string;");
  const std::string v3 = Binary("order_id: string (required); priority: int; note: string; lines: [string];");
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    auto first = bus->Contracts().RegisterSchema(kType, v1);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(first->version, 1u);
    EXPECT_TRUE(first->added);
    EXPECT_EQ(first->hash.size(), 16u);
    auto again = bus->Contracts().RegisterSchema(kType, v1);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->version, 1u);
    EXPECT_FALSE(again->added) << "the same bytes are the same schema";
    EXPECT_EQ(again->hash, first->hash);
    auto second = bus->Contracts().RegisterSchema(kType, v2);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->version, 2u);
    EXPECT_NE(second->hash, first->hash);
    // Another type is a registry of its own.
    auto other = bus->Contracts().RegisterSchema("orders.order-shipped.v1", v2);
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(other->version, 1u);
  }
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  auto kept = bus->Contracts().RegisterSchema(kType, v2);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->version, 2u) << "versions survive a restart";
  EXPECT_FALSE(kept->added);
  auto old = bus->Contracts().RegisterSchema(kType, v1);
  ASSERT_TRUE(old.ok()) << "an older accepted schema is still accepted, as itself";
  EXPECT_EQ(old->version, 1u);
  // Retyping `priority` breaks both versions; each line names the one it
  // breaks.
  auto breaking =
      bus->Contracts().RegisterSchema(kType, Binary("order_id: string (required); priority: long; note: string;"));
  ASSERT_TRUE(breaking.status().IsInvalidArgument());
  const std::string why = breaking.status().message();
  EXPECT_NE(why.find("against version 1: orders.OrderApproved.priority changed type from Int to Long"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("against version 2: orders.OrderApproved.priority changed type"), std::string::npos) << why;
  EXPECT_NE(why.find("new type version"), std::string::npos) << why;
  auto removed =
      bus->Contracts().RegisterSchema(kType, Binary("order_id: string (required); priority: int; other: int;"));
  ASSERT_TRUE(removed.status().IsInvalidArgument());
  EXPECT_EQ(removed.status().message().find("against version 1"), std::string::npos)
      << "version 1 has no field 2, so only version 2 is broken: " << removed.status().message();
  EXPECT_NE(removed.status().message().find("against version 2: orders.OrderApproved.note (id 2) was renamed"),
            std::string::npos)
      << removed.status().message();
  auto third = bus->Contracts().RegisterSchema(kType, v3);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->version, 3u) << "a refused schema takes no version";
}

// A build rolled back to an earlier version of a type's schema registers
// it as that version, whatever bytes its flatc wrote, and publishes what
// the latest version reads.
TEST(EventContractsTest, AnEarlierVersionIsTakenAsItselfAfterARollback) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  const std::string v1_fields = "order_id: string (required); priority: int;";
  ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary(v1_fields)).ok());
  auto v2 = bus->Contracts().RegisterSchema(kType, Binary(v1_fields + " note: string;"));
  ASSERT_TRUE(v2.ok() && v2->version == 2u);

  // The same source with a user attribute: other bytes, the same schema.
  const std::string v1_again =
      "attribute \"doc\";\n" + Source("order_id: string (required, doc: \"id\"); priority: int;");
  auto rolled_back_schema = internal::ParseSchemaSource(v1_again, {}, "order_approved.fbs");
  ASSERT_TRUE(rolled_back_schema.ok()) << rolled_back_schema.status().ToString();
  ASSERT_NE(rolled_back_schema->bytes(), Binary(v1_fields));
  for (const std::string& bytes : {Binary(v1_fields), rolled_back_schema->bytes()}) {
    auto rolled_back = bus->Contracts().RegisterSchema(kType, bytes);
    ASSERT_TRUE(rolled_back.ok()) << rolled_back.status().ToString();
    EXPECT_EQ(rolled_back->version, 1u);
    EXPECT_FALSE(rolled_back->added);
  }
  auto latest = bus->Contracts().LatestSchema(kType);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version, 2u) << "payloads are still checked against the latest";
  EXPECT_TRUE(PublishOne(bus.get(), kType, Payload(Source(v1_fields), R"({ order_id: "o-1", priority: 2 })")).ok());

  // The latest with other attributes is a new version: its attributes may
  // change what the payload check checks.
  const std::string v2_again =
      "attribute \"doc\";\n" + Source("order_id: string (required, doc: \"id\"); priority: int; note: string;");
  auto v3 =
      bus->Contracts().RegisterSchema(kType, internal::ParseSchemaSource(v2_again, {}, "order_approved.fbs")->bytes());
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->version, 3u);
}

TEST(EventContractsTest, BadInputIsRefusedAndStoresNothing) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  EXPECT_TRUE(bus->Contracts().RegisterSchema("not a type", Binary("x: int;")).status().IsInvalidArgument());
  auto garbage = bus->Contracts().RegisterSchema(kType, "not a schema");
  ASSERT_TRUE(garbage.status().IsInvalidArgument());
  EXPECT_NE(garbage.status().message().find("binary schema"), std::string::npos) << garbage.status().ToString();
  auto first = bus->Contracts().RegisterSchema(kType, Binary("x: int;"));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->version, 1u) << "nothing refused took a version";
  ASSERT_TRUE(bus->Close().ok());
  EXPECT_TRUE(bus->Contracts().RegisterSchema(kType, Binary("x: int;")).status().IsClosed());
}

// Two evolutions of v1, each compatible with it but not with each other
// (the same new field, two types), registered at once: exactly one is
// accepted, the other is refused against it.
TEST(EventContractsTest, ConcurrentRegistrationsAreCheckedAgainstEachOther) {
  for (int round = 0; round < 10; ++round) {
    TempDir dir;
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary("x: int;")).ok());
    const std::string with_int = Binary("x: int; y: int;"), with_string = Binary("x: int; y: string;");
    std::atomic<int> accepted{0}, refused{0};
    auto run = [&](const std::string* schema) {
      auto r = bus->Contracts().RegisterSchema(kType, *schema);
      if (r.ok()) {
        EXPECT_EQ(r->version, 2u);
        ++accepted;
      } else {
        EXPECT_NE(r.status().message().find("against version 2"), std::string::npos) << r.status().ToString();
        ++refused;
      }
    };
    std::thread a(run, &with_int), b(run, &with_string);
    a.join();
    b.join();
    EXPECT_EQ(accepted.load(), 1) << "round " << round;
    EXPECT_EQ(refused.load(), 1) << "round " << round;
  }
}

TEST(EventContractsTest, PublishedPayloadsAreCheckedAgainstTheLatestSchema) {
  TempDir dir;
  const std::string v1_payload = Payload(Source(kV1Fields), R"({ order_id: "o-1", priority: 2 })");
  const std::string wrong_table = Payload(kStockReleased, R"({ order_id: "o-1" })");
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(PublishOne(bus.get(), kType, wrong_table).ok()) << "no schema yet: payloads are opaque";
    ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary(kV1Fields)).ok());
    EXPECT_TRUE(PublishOne(bus.get(), kType, v1_payload).ok());
    const Status refused = PublishOne(bus.get(), kType, wrong_table);
    ASSERT_TRUE(refused.IsInvalidArgument());
    EXPECT_NE(refused.message().find("payload of orders.order-approved.v1 is not a orders.OrderApproved (schema "
                                     "version 1): its file identifier is not \"ORDA\""),
              std::string::npos)
        << refused.ToString();
    EXPECT_TRUE(PublishOne(bus.get(), "orders.order-shipped.v1", wrong_table).ok()) << "other types are unchecked";
  }
  EXPECT_EQ(testing::OutboxSize(*testing::OpenStoppedDatabase(dir.path())), 3u)
      << "the refused publish committed nothing";
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  EXPECT_TRUE(PublishOne(bus.get(), kType, wrong_table).IsInvalidArgument())
      << "the stored schema checks payloads after a restart, registered again or not";
  // A compatible version 2: payloads of either producer pass.
  ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary(kV2Fields)).ok());
  EXPECT_TRUE(PublishOne(bus.get(), kType, v1_payload).ok()) << "an older producer's payload";
  EXPECT_TRUE(PublishOne(bus.get(), kType, Payload(Source(kV2Fields), R"({ order_id: "o-2", note: "n" })")).ok());
  const Status missing = PublishOne(
      bus.get(), kType, Payload(Source("order_id: string; priority: int; note: string;"), R"({ priority: 1 })"));
  ASSERT_TRUE(missing.IsInvalidArgument());
  EXPECT_NE(missing.message().find("(schema version 2): orders.OrderApproved.order_id: a required field is missing"),
            std::string::npos)
      << missing.ToString();
}

TEST(EventContractsTest, EachEventRecordsTheSchemaVersionItWasCheckedAgainst) {
  TempDir dir;
  const std::string v1_payload = Payload(Source(kV1Fields), R"({ order_id: "o-1", priority: 2 })");
  std::string v1_hash;
  Options o = testing::TestOptions(dir);
  o.retain_events = 100;  // the reader below starts at the oldest
  {
    auto bus = testing::OpenBus(o);
    ASSERT_TRUE(PublishOne(bus.get(), kType, v1_payload).ok());  // no schema yet: 0
    auto v1 = bus->Contracts().RegisterSchema(kType, Binary(kV1Fields));
    ASSERT_TRUE(v1.ok());
    v1_hash = v1->hash;
    ASSERT_TRUE(PublishOne(bus.get(), kType, v1_payload).ok());  // 1
    ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary(kV2Fields)).ok());
    ASSERT_TRUE(PublishOne(bus.get(), kType, v1_payload).ok());  // 2: checked against the latest
    Event in = testing::IncomingEvent(kType, "order-1", "device-7/orders", v1_payload);
    in.schema_version = 7;  // what another bus said: this one checks again
    ASSERT_TRUE(bus->IngestEvent(in, IngestOptions{"jetstream:a", ""}).ok());  // 2
    EXPECT_TRUE(bus->Contracts().Schema(kType, 3).status().IsNotFound());
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = testing::OpenBus(o);
  auto v1 = bus->Contracts().Schema(kType, 1);
  ASSERT_TRUE(v1.ok()) << "known after a restart: " << v1.status().ToString();
  EXPECT_EQ(v1->hash, v1_hash);
  std::mutex mu;
  std::vector<uint32_t> seen;
  SubscriberOptions sub;
  sub.name = "reader";
  sub.start = StartPosition::OldestRetained();
  sub.handler = [&](const Event& e, HandlerContext&) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(e.schema_version);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(sub)).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(std::chrono::seconds(10)).ok());
  EXPECT_EQ(seen, (std::vector<uint32_t>{0, 1, 2, 2}));
  ASSERT_TRUE(bus->Close().ok());
  std::vector<internal::OutboxEntry> entries;
  ASSERT_TRUE(internal::ListOutbox(dir.path(), internal::OutboxFilter{}, &entries, SIZE_MAX).ok());
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].payload.version, 2u) << "not recorded: named by the latest, which reads it";
  EXPECT_EQ(entries[1].payload.version, 1u);
  EXPECT_EQ(entries[1].payload.dataschema, "walbus:schema:" + std::string(kType) + ":v1:" + v1_hash);
  EXPECT_EQ(entries[2].payload.version, 2u);
}

TEST(EventContractsTest, IngestedPayloadsThatFailTheirSchemaAreQuarantined) {
  TempDir dir;
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary(kV1Fields)).ok());
    Event in =
        testing::IncomingEvent(kType, "order-1", "device-7/orders", Payload(kStockReleased, R"({ order_id: "o-1" })"));
    auto refused = bus->IngestEvent(in, IngestOptions{"jetstream:a", "inbound"});
    ASSERT_TRUE(refused.status().IsInvalidArgument());
    EXPECT_NE(refused.status().message().find("quarantined"), std::string::npos) << refused.status().ToString();
    in.id = EventId::Generate();
    in.data = Payload(Source(kV2Fields), R"({ order_id: "o-1", note: "from a newer device" })");
    auto taken = bus->IngestEvent(in, IngestOptions{"jetstream:a", "inbound"});
    EXPECT_TRUE(taken.ok()) << "a newer producer's fields are skipped: " << taken.status().ToString();
  }
  std::vector<internal::QuarantineEntry> quarantined;
  ASSERT_TRUE(internal::ListQuarantine(dir.path(), &quarantined, SIZE_MAX).ok());
  ASSERT_EQ(quarantined.size(), 1u);
  EXPECT_NE(quarantined[0].record.reason.find("file identifier"), std::string::npos) << quarantined[0].record.reason;
  EXPECT_EQ(testing::OutboxSize(*testing::OpenStoppedDatabase(dir.path())), 1u);
}

TEST(EventContractsTest, RequireSchemasRefusesTypesWithoutOne) {
  TempDir dir;
  Options options = testing::TestOptions(dir);
  options.require_schemas = true;
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  const Status refused = PublishOne(bus.get(), kType, "opaque");
  ASSERT_TRUE(refused.IsInvalidArgument());
  EXPECT_NE(refused.message().find("has no registered schema"), std::string::npos) << refused.ToString();
  ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary(kV1Fields)).ok());
  EXPECT_TRUE(PublishOne(bus.get(), kType, Payload(Source(kV1Fields), R"({ order_id: "o-1" })")).ok());
}

TEST(EventContractsTest, RequireSchemasWarnsOfASubscribedTypeNothingCanPublish) {
  TempDir dir;
  auto logger = std::make_shared<testing::CapturingLogger>(LogLevel::kWarning);
  Options options = testing::TestOptions(dir);
  options.require_schemas = true;
  options.logger = logger;
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Binary(kV1Fields)).ok());
  for (const char* type : {kType, "orders.order-aproved.v1"}) {  // the second mistyped
    SubscriberOptions s;
    s.name = std::string("sub-") + (type == kType ? "right" : "typo");
    s.types = {type};
    s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  }
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->Start().ok());  // warned once, not per Start
  const std::string log = logger->text();
  EXPECT_NE(log.find("subscriber sub-typo takes orders.order-aproved.v1, which has no schema: under require_schemas "
                     "no event of it can be published or ingested; types with a schema near it: " +
                     std::string(kType)),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("sub-right"), std::string::npos) << log;
  EXPECT_EQ(log.find("aproved"), log.rfind("aproved")) << "once: " << log;
}

TEST(EventContractsTest, ASchemaWithoutFileIdentifierChecksPayloadsWithoutOne) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  const std::string source = "table T { x: int; } root_type T;";
  auto schema = internal::ParseSchemaSource(source, {}, "t.fbs");
  ASSERT_TRUE(schema.ok());
  auto registered = bus->Contracts().RegisterSchema(kType, schema->bytes());
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  EXPECT_EQ(registered->version, 1u);
  EXPECT_TRUE(PublishOne(bus.get(), kType, testing::PayloadFromJson(source, "{ x: 5 }")).ok());
  const Status refused = PublishOne(bus.get(), kType, "not a FlatBuffer at all");
  EXPECT_TRUE(refused.IsInvalidArgument()) << refused.ToString();
}

}  // namespace
}  // namespace walbus
