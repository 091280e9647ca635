// A binary schema written back as source: parsed again, it is the schema.
#include "tools/walbus/schema_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/walbus/schema_source.h"

namespace walbus::internal {
namespace {

// Every kind of declaration, field, default and attribute a binary schema
// keeps: a struct inside a struct whose name sorts after it (reflection
// lists objects by name; flatc needs a struct declared before it is held),
// field ids out of declaration order, two namespaces.
constexpr const char* kEverySchemaFeature = R"(
attribute "walbus_event";
attribute "unit";
namespace common;
struct Money { units: long; nanos: int; }
enum Level : ushort { Low = 1, High = 40, Top = 41 }
namespace orders;
struct Point { x: short; y: short; }
struct Box (force_align: 16) { corner: Point; sizes: [float:3]; }
enum Flags : ubyte (bit_flags) { Fast, Fragile, Cold }
table Note { text: string (key); }
table Gift { from: string; }
union Extra { Note, common.Money, label: string, present: Gift }
table OrderApproved (walbus_event: "orders.order-approved.v1") {
  order_id: string (id: 0, required);
  amount: common.Money (id: 3);
  level: common.Level = High (id: 1);
  flags: Flags = "Fast Cold" (id: 2);
  old_note: string (id: 4, deprecated);
  weight: double = -inf (id: 5, unit: "kg");
  ratio: float = 0.5 (id: 6);
  spare: double = nan (id: 7);
  big: ulong = 9223372036854775807 (id: 8);
  delta: byte = -7 (id: 9);
  rush: bool = true (id: 10);
  maybe: int = null (id: 11);
  extra: Extra (id: 13);
  extras: [Extra] (id: 15);
  box: Box (id: 16);
  notes: [Note] (id: 17);
  levels: [common.Level] (id: 18);
  bytes: [ubyte] (id: 19);
}
root_type OrderApproved;
file_identifier "ORDA";
file_extension "ord";
)";

TEST(SchemaTextTest, ReadsBackAsTheSameSchema) {
  auto original = ParseSchemaSource(kEverySchemaFeature, {}, "orders.fbs");
  ASSERT_TRUE(original.ok()) << original.status().ToString();
  const std::string text = SchemaSourceText(*original);
  auto again = ParseSchemaSource(text, {}, "shown.fbs");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  for (const std::string& line : CheckEvolution(*original, *again)) ADD_FAILURE() << line << "\n" << text;
  for (const std::string& line : CheckEvolution(*again, *original)) ADD_FAILURE() << line << "\n" << text;
  // Written again, the text is the same: nothing drifts across rounds.
  EXPECT_EQ(SchemaSourceText(*again), text);
  // What a reader looks for is there as written.
  EXPECT_NE(text.find("table OrderApproved (walbus_event: \"orders.order-approved.v1\") {"), std::string::npos) << text;
  EXPECT_NE(text.find("  old_note: string (deprecated);"), std::string::npos) << text;
  EXPECT_NE(text.find("  maybe: int = null;"), std::string::npos) << text;
  EXPECT_NE(text.find("  weight: double = -inf (unit: \"kg\");"), std::string::npos) << text;
  EXPECT_NE(text.find("root_type orders.OrderApproved;\nfile_identifier \"ORDA\";\nfile_extension \"ord\";\n"),
            std::string::npos)
      << text;
}

TEST(SchemaTextTest, WritesASchemaInTheRootNamespace) {
  auto original = ParseSchemaSource("table Ping { at: long; }\nroot_type Ping;\nfile_identifier \"PING\";\n", {}, "p");
  ASSERT_TRUE(original.ok());
  EXPECT_EQ(SchemaSourceText(*original),
            "table Ping {\n  at: long;\n}\n\nroot_type Ping;\nfile_identifier \"PING\";\n");
}

TEST(SchemaTextTest, SaysWhereANearerTypeHidesTheOneMeant) {
  // flatc resolves `orders.Line` in Order to the outer type: shop.orders.Line
  // is declared only after Order. Written back with Line first, or in any
  // order, the same words would name shop.orders.Line.
  auto original = ParseSchemaSource(
      "namespace orders; table Line { sku: string; }\n"
      "namespace shop.orders; table Order { lines: [orders.Line]; } table Line { qty: int; }\n"
      "root_type Order; file_identifier \"SHOP\";\n",
      {}, "shop.fbs");
  ASSERT_TRUE(original.ok()) << original.status().ToString();
  std::vector<std::string> hidden;
  const std::string text = SchemaSourceText(*original, &hidden);
  EXPECT_EQ(hidden, std::vector<std::string>{"orders.Line from namespace shop.orders"}) << text;
  EXPECT_NE(text.find("  // orders.Line is meant: a nearer type of that name hides it in namespace shop.orders, so "
                      "this line reads back as that type\n  lines: [orders.Line];\n"),
            std::string::npos)
      << text;
  std::vector<std::string> none;
  (void)SchemaSourceText(*ParseSchemaSource(kEverySchemaFeature, {}, "orders.fbs"), &none);
  EXPECT_TRUE(none.empty()) << none.front();
}

}  // namespace
}  // namespace walbus::internal
