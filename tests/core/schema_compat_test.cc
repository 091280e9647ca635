// bus/core/schema_compat.cc: each kind of breaking change refused with a
// line that names it, each allowed change accepted, and bad schema bytes
// refused before reflection reads them.
#include "bus/core/schema_compat.h"
#include "tools/walbus/schema_source.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace walbus::internal {
namespace {

// Version 1 of a contract, with a slot for each variant's change: every
// test replaces one {{placeholder}} (or none).
constexpr const char* kBase = R"(
namespace orders;
enum Channel : byte { Web = 0, Store = 1 }
struct Money { units: long; cents: int; }
table Line { sku: string; qty: int; }
table Card { last4: string; }
table Cash { till: int; }
table Unused { x: int; }
union Payment { Card, Cash }
table OrderApproved {
  order_id: string (required);
  amount: Money;
  channel: Channel = Web;
  lines: [Line];
  note: string;
  priority: int = 0;
  payment: Payment;
}
root_type OrderApproved;
file_identifier "ORDA";
)";

std::string Edit(std::string schema, const std::string& from, const std::string& to) {
  const size_t at = schema.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) schema.replace(at, from.size(), to);
  return schema;
}

BinarySchema Parse(const std::string& source) {
  auto schema = ParseSchemaSource(source, {}, "test.fbs");
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return std::move(*schema);
}

std::string ViolationsText(const std::string& prev, const std::string& next) {
  std::string text;
  for (const std::string& line : CompatibilityViolations(Parse(prev), Parse(next))) text += line + "\n";
  return text;
}

TEST(SchemaCompatTest, AllowedEvolutionsPass) {
  const std::string base = kBase;
  struct Case {
    const char* what;
    std::string next;
  };
  const std::vector<Case> allowed = {
      {"the same schema", base},
      {"a field added at the end", Edit(base, "  payment: Payment;\n", "  payment: Payment;\n  tags: [string];\n")},
      {"a field deprecated", Edit(base, "note: string;", "note: string (deprecated);")},
      {"an enum value added", Edit(base, "Store = 1 }", "Store = 1, Phone = 2 }")},
      {"a union member added at the end",
       Edit(Edit(base, "union Payment { Card, Cash }", "union Payment { Card, Cash, Voucher }"), "table Unused",
            "table Voucher { code: string; }\ntable Unused")},
      {"a table added", Edit(base, "table Unused", "table Extra { y: int; }\ntable Unused")},
  };
  for (const Case& c : allowed) EXPECT_EQ(ViolationsText(base, c.next), "") << c.what;
}

TEST(SchemaCompatTest, EachBreakingChangeIsNamed) {
  const std::string base = kBase;
  struct Case {
    const char* what;
    std::string next;
    const char* expected;  // a part of the line that names it
  };
  const std::vector<Case> breaking = {
      {"the last field removed", Edit(base, "  payment: Payment;\n", ""), "OrderApproved.payment (id 7) was removed"},
      {"a middle field removed", Edit(base, "  note: string;\n", ""), "OrderApproved.note (id 4) was renamed"},
      {"a field inserted in the middle", Edit(base, "  note: string;\n", "  extra: int;\n  note: string;\n"),
       "OrderApproved.note (id 4) was renamed to extra"},
      {"a field's type", Edit(base, "priority: int = 0", "priority: long = 0"),
       "OrderApproved.priority changed type from Int to Long"},
      {"a field's default", Edit(base, "priority: int = 0", "priority: int = 5"),
       "OrderApproved.priority changed its default from 0 to 5"},
      {"a field made optional", Edit(base, "priority: int = 0", "priority: int = null"),
       "changed its default from 0 to null"},
      {"a field made required", Edit(base, "note: string;", "note: string (required);"),
       "OrderApproved.note became required"},
      {"a field no longer required", Edit(base, "order_id: string (required);", "order_id: string;"),
       "OrderApproved.order_id is no longer required"},
      {"a required field deprecated",
       Edit(base, "order_id: string (required);", "order_id: string (required, deprecated);"),
       "OrderApproved.order_id was required and is now deprecated"},
      {"a required field deprecated and no longer required",
       Edit(base, "order_id: string (required);", "order_id: string (deprecated);"),
       "OrderApproved.order_id was required and is now deprecated"},
      {"a new required field",
       Edit(base, "  payment: Payment;\n", "  payment: Payment;\n  extra: string (required);\n"),
       "OrderApproved.extra is new and required"},
      {"a field renamed", Edit(base, "note: string;", "remark: string;"), "note (id 4) was renamed to remark"},
      {"a struct grown", Edit(base, "cents: int; }", "cents: int; scale: int; }"), "struct orders.Money changed"},
      {"a struct field retyped", Edit(base, "cents: int; }", "cents: uint; }"), "struct orders.Money changed"},
      {"an enum value renumbered", Edit(base, "Store = 1 }", "Store = 2 }"),
       "enum value orders.Channel.Store changed from 1 to 2"},
      {"an enum value removed", Edit(base, ", Store = 1 }", " }"), "enum value orders.Channel.Store was removed"},
      {"an enum's underlying type", Edit(base, "enum Channel : byte", "enum Channel : short"),
       "changed its underlying type from Byte to Short"},
      {"a union member inserted before the end",
       Edit(Edit(base, "union Payment { Card, Cash }", "union Payment { Voucher, Card, Cash }"), "table Unused",
            "table Voucher { code: string; }\ntable Unused"),
       "union value orders.Payment.Card changed from 1 to 2"},
      {"a table deleted", Edit(base, "table Unused { x: int; }\n", ""), "table orders.Unused was deleted"},
      {"the root table", Edit(base, "root_type OrderApproved;", "root_type Line;"),
       "the root table changed from orders.OrderApproved to orders.Line"},
      {"the file identifier", Edit(base, "\"ORDA\"", "\"ORDB\""),
       "the file identifier changed from \"ORDA\" to \"ORDB\""},
      {"the namespace", Edit(base, "namespace orders;", "namespace sales;"),
       "the root table changed from orders.OrderApproved to sales.OrderApproved"},
  };
  for (const Case& c : breaking) {
    const std::string text = ViolationsText(base, c.next);
    EXPECT_NE(text.find(c.expected), std::string::npos) << c.what << ": got\n" << text;
  }
}

// Each version checked only against the one before would let a field come
// back with another type: v2 drops `extra` (refused against v1 already,
// but a check against v2 alone would never know), v3 adds it as a string.
// Against v2 alone v3 looks like an added field; against v1 it is a type
// change. The registry checks a new version against every version before.
TEST(SchemaCompatTest, OnlyATransitiveCheckSeesAFieldComeBackRetyped) {
  const std::string v1 = Edit(kBase, "  payment: Payment;\n", "  payment: Payment;\n  extra: int;\n");
  const std::string v2 = kBase;
  const std::string v3 = Edit(kBase, "  payment: Payment;\n", "  payment: Payment;\n  extra: string;\n");
  EXPECT_NE(ViolationsText(v1, v2).find("OrderApproved.extra (id 8) was removed"), std::string::npos);
  EXPECT_EQ(ViolationsText(v2, v3), "");
  EXPECT_NE(ViolationsText(v1, v3).find("OrderApproved.extra changed type from Int to String"), std::string::npos);
}

TEST(SchemaCompatTest, BadSchemasAreRefusedBeforeReflectionReadsThem) {
  EXPECT_TRUE(BinarySchema::FromBytes("").status().IsInvalidArgument());
  EXPECT_TRUE(BinarySchema::FromBytes("definitely not a schema").status().IsInvalidArgument());
  const BinarySchema good = Parse(kBase);
  for (size_t cut : {size_t{8}, good.bytes().size() / 2}) {
    EXPECT_TRUE(BinarySchema::FromBytes(good.bytes().substr(0, cut)).status().IsInvalidArgument()) << cut;
  }
  std::string wild = good.bytes();
  wild.replace(0, 4, "\xff\xff\xff\x7f");  // the root offset points far outside
  EXPECT_TRUE(BinarySchema::FromBytes(wild).status().IsInvalidArgument());
  auto copy = BinarySchema::FromBytes(good.bytes());
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->RootName(), "orders.OrderApproved");
  auto no_root = ParseSchemaSource("table T { x: int; }", {}, "no_root.fbs");
  ASSERT_FALSE(no_root.ok());
  EXPECT_NE(no_root.status().message().find("no root_type"), std::string::npos);
  auto broken = ParseSchemaSource("table T { x: nosuchtype; }\nroot_type T;", {}, "broken.fbs");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("broken.fbs"), std::string::npos) << broken.status().ToString();
}

// Corrupted bytes of a real schema (one to four bytes changed at random,
// seeded): each is refused, or read without leaving the buffer, and is
// compatible with itself. The fuzz target goes further; this runs in every
// build.
TEST(SchemaCompatTest, CorruptedSchemasAreRefusedOrReadSafely) {
  const BinarySchema good = Parse(kBase);
  std::mt19937 rng(20261202);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = good.bytes();
    for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    auto schema = BinarySchema::FromBytes(bytes);
    if (!schema.ok()) continue;
    ++accepted;
    ASSERT_EQ(CompatibilityViolations(*schema, *schema), std::vector<std::string>{}) << "round " << round;
    (void)CompatibilityViolations(good, *schema);
    (void)CompatibilityViolations(*schema, good);
  }
  EXPECT_GT(accepted, 0) << "no corruption was accepted: the comparison of odd schemas went untested";
}

}  // namespace
}  // namespace walbus::internal
