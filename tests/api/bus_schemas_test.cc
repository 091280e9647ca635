// bus/api/bus_schemas.cc: Bus::RegisterSchema against a real database:
// versions, the same schema again, compatible and breaking evolutions
// checked against every version, restarts, concurrent registrations.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "tests/test_util.h"
#include "tools/walbus/schema_source.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

std::string Binary(const std::string& fields) {
  auto schema = internal::ParseSchemaSource(
      "namespace orders;\ntable OrderApproved { " + fields + " }\nroot_type OrderApproved;\nfile_identifier \"ORDA\";",
      "", "order_approved.fbs");
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return schema.ok() ? schema->bytes() : std::string();
}

TEST(BusSchemasTest, VersionsGrowOnlyByCompatibleEvolutions) {
  TempDir dir;
  const std::string v1 = Binary("order_id: string (required); priority: int;");
  const std::string v2 = Binary("order_id: string (required); priority: int; note: string;");
  const std::string v3 = Binary("order_id: string (required); priority: int; note: string; lines: [string];");
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    auto first = bus->RegisterSchema(kType, v1);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(first->version, 1u);
    EXPECT_TRUE(first->added);
    EXPECT_EQ(first->hash.size(), 16u);
    auto again = bus->RegisterSchema(kType, v1);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->version, 1u);
    EXPECT_FALSE(again->added) << "the same bytes are the same schema";
    EXPECT_EQ(again->hash, first->hash);
    auto second = bus->RegisterSchema(kType, v2);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->version, 2u);
    EXPECT_NE(second->hash, first->hash);
    // Another type is a registry of its own.
    auto other = bus->RegisterSchema("orders.order-shipped.v1", v2);
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(other->version, 1u);
  }
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  auto kept = bus->RegisterSchema(kType, v2);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->version, 2u) << "versions survive a restart";
  EXPECT_FALSE(kept->added);
  auto old = bus->RegisterSchema(kType, v1);
  ASSERT_TRUE(old.ok()) << "an older accepted schema is still accepted, as itself";
  EXPECT_EQ(old->version, 1u);
  // Retyping `priority` breaks both versions; each line names the one it
  // breaks.
  auto breaking = bus->RegisterSchema(kType, Binary("order_id: string (required); priority: long; note: string;"));
  ASSERT_TRUE(breaking.status().IsInvalidArgument());
  const std::string why = breaking.status().message();
  EXPECT_NE(why.find("against version 1: orders.OrderApproved.priority changed type from Int to Long"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("against version 2: orders.OrderApproved.priority changed type"), std::string::npos) << why;
  EXPECT_NE(why.find("new type version"), std::string::npos) << why;
  auto removed = bus->RegisterSchema(kType, Binary("order_id: string (required); priority: int; other: int;"));
  ASSERT_TRUE(removed.status().IsInvalidArgument());
  EXPECT_EQ(removed.status().message().find("against version 1"), std::string::npos)
      << "version 1 has no field 2, so only version 2 is broken: " << removed.status().message();
  EXPECT_NE(removed.status().message().find("against version 2: orders.OrderApproved.note (id 2) was renamed"),
            std::string::npos)
      << removed.status().message();
  auto third = bus->RegisterSchema(kType, v3);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->version, 3u) << "a refused schema takes no version";
}

TEST(BusSchemasTest, BadInputIsRefusedAndStoresNothing) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  EXPECT_TRUE(bus->RegisterSchema("not a type", Binary("x: int;")).status().IsInvalidArgument());
  auto garbage = bus->RegisterSchema(kType, "not a schema");
  ASSERT_TRUE(garbage.status().IsInvalidArgument());
  EXPECT_NE(garbage.status().message().find("binary schema"), std::string::npos) << garbage.status().ToString();
  auto first = bus->RegisterSchema(kType, Binary("x: int;"));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->version, 1u) << "nothing refused took a version";
  ASSERT_TRUE(bus->Close().ok());
  EXPECT_TRUE(bus->RegisterSchema(kType, Binary("x: int;")).status().IsClosed());
}

// Two evolutions of v1, each compatible with it but not with each other
// (the same new field, two types), registered at once: exactly one is
// accepted, the other is refused against it.
TEST(BusSchemasTest, ConcurrentRegistrationsAreCheckedAgainstEachOther) {
  for (int round = 0; round < 10; ++round) {
    TempDir dir;
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->RegisterSchema(kType, Binary("x: int;")).ok());
    const std::string with_int = Binary("x: int; y: int;"), with_string = Binary("x: int; y: string;");
    std::atomic<int> accepted{0}, refused{0};
    auto run = [&](const std::string* schema) {
      auto r = bus->RegisterSchema(kType, *schema);
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

}  // namespace
}  // namespace walbus
