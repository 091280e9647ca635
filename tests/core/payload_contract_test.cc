// bus/core/payload_contract.cc: payloads checked against their type's
// schema: what passes (every kind of field, older and newer producers,
// unknown union members) and what is refused (another table, missing
// required fields, truncations, corruption, nesting and step bounds).
#include "bus/core/payload_contract.h"

#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/flexbuffers.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/payload_json.h"
#include "tools/walbus/schema_source.h"

namespace walbus::internal {
namespace {

constexpr const char* kType = "orders.order-approved.v1";

// Every kind of field a table holds: scalars, strings, structs, tables,
// vectors of each, unions of tables, strings and structs, vectors of
// unions, and recursion.
constexpr const char* kSchema = R"(
namespace orders;
struct Money { units: long; nanos: int; }
table Line { sku: string (required); quantity: int; price: Money; }
table Note { text: string; }
table Node { child: Node; }
union Extra { Note, Money, label: string }
table OrderApproved {
  order_id: string (required);
  priority: int = 3;
  total: Money;
  lines: [Line];
  tags: [string];
  weights: [double];
  extra: Extra;
  extras: [Extra];
  tree: Node;
}
root_type OrderApproved;
file_identifier "ORDA";
)";

constexpr const char* kFullPayload = R"({
  order_id: "o-1", priority: 7, total: { units: 12, nanos: 5 },
  lines: [ { sku: "A-1", quantity: 2, price: { units: 6, nanos: 0 } }, { sku: "B-2" } ],
  tags: ["new", "rush"], weights: [1.5, 2.5],
  extra_type: Note, extra: { text: "leave at door" },
  extras_type: [Money, label, Note], extras: [ { units: 1, nanos: 2 }, "gift", { text: "x" } ],
  tree: { child: { child: {} } }
})";

BinarySchema Schema(const std::string& source) {
  auto schema = ParseSchemaSource(source, {}, "orders.fbs");
  if (!schema.ok()) {
    ADD_FAILURE() << schema.status().ToString();
    std::abort();
  }
  return std::move(*schema);
}

PayloadContract Contract(const std::string& source) {
  auto contract = PayloadContract::Make(kType, 1, Schema(source));
  EXPECT_TRUE(contract.ok()) << contract.status().ToString();
  return std::move(*contract);
}

std::string Payload(const std::string& source, const std::string& json) {
  std::string error;
  std::string payload = testing::PayloadFromJson(source, json, &error);
  EXPECT_FALSE(payload.empty()) << error;
  return payload;
}

TEST(PayloadContractTest, EveryKindOfFieldPasses) {
  const PayloadContract contract = Contract(kSchema);
  EXPECT_TRUE(contract.Verify(Payload(kSchema, kFullPayload)).ok())
      << contract.Verify(Payload(kSchema, kFullPayload)).ToString();
  EXPECT_TRUE(contract.Verify(Payload(kSchema, R"({ order_id: "o-2" })")).ok()) << "absent fields take defaults";
}

TEST(PayloadContractTest, ASchemaWithoutFileIdentifierChecksNoIdentifier) {
  const std::string source = "table T { x: int; s: string (required); } root_type T;";
  auto contract = PayloadContract::Make(kType, 1, Schema(source));
  ASSERT_TRUE(contract.ok()) << contract.status().ToString();
  EXPECT_TRUE(contract->Verify(Payload(source, R"({ x: 3, s: "a" })")).ok());
  // The shape is still checked.
  std::string truncated = Payload(source, R"({ x: 3, s: "a" })");
  truncated.resize(truncated.size() - 4);
  EXPECT_TRUE(contract->Verify(truncated).IsInvalidArgument());
  const Status tiny = contract->Verify("tiny");
  ASSERT_TRUE(tiny.IsInvalidArgument());
  EXPECT_NE(tiny.message().find("a buffer of 4 bytes (at least 12)"), std::string::npos) << tiny.ToString();
}

TEST(PayloadContractTest, AnotherTableIsRefusedByItsIdentifier) {
  const std::string released =
      "namespace stock; table StockReleased { order_id: string; } root_type StockReleased; file_identifier \"STRL\";";
  const Status s = Contract(kSchema).Verify(Payload(released, R"({ order_id: "o-1" })"));
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("payload of orders.order-approved.v1 is not a orders.OrderApproved (schema version 1): "
                             "its file identifier is not \"ORDA\""),
            std::string::npos)
      << s.ToString();
  EXPECT_TRUE(Contract(kSchema).Verify("").IsInvalidArgument()) << "an empty payload is no buffer";
  EXPECT_TRUE(Contract(kSchema).Verify("not a flatbuffer at all").IsInvalidArgument());
}

TEST(PayloadContractTest, AMissingRequiredFieldIsNamedWithItsPath) {
  // Built with a schema in which the fields are optional: flatc itself
  // refuses to build the buffer otherwise.
  std::string lax = kSchema;
  for (size_t at; (at = lax.find(" (required)")) != std::string::npos;) lax.erase(at, 11);
  const Status top = Contract(kSchema).Verify(Payload(lax, R"({ priority: 1 })"));
  ASSERT_TRUE(top.IsInvalidArgument());
  EXPECT_NE(top.message().find("orders.OrderApproved.order_id: a required field is missing"), std::string::npos)
      << top.ToString();
  const Status nested = Contract(kSchema).Verify(Payload(lax, R"({ order_id: "o", lines: [ { sku: "a" }, {} ] })"));
  ASSERT_TRUE(nested.IsInvalidArgument());
  EXPECT_NE(nested.message().find("orders.OrderApproved.lines[1].sku: a required field is missing"), std::string::npos)
      << nested.ToString();
}

TEST(PayloadContractTest, OlderAndNewerProducersPass) {
  const std::string v1 = "namespace o; table T { a: int; } root_type T; file_identifier \"OTTT\";";
  const std::string v2 =
      "namespace o; table X { y: int; } union U { X } table T { a: int; b: string; c: [int]; u: U; } root_type T; "
      "file_identifier \"OTTT\";";
  const std::string v3 =
      "namespace o; table X { y: int; } table Z { z: string; } union U { X, Z } "
      "table T { a: int; b: string; c: [int]; u: U; } root_type T; file_identifier \"OTTT\";";
  EXPECT_TRUE(Contract(v2).Verify(Payload(v1, "{ a: 1 }")).ok()) << "an older payload: the new fields are absent";
  EXPECT_TRUE(Contract(v1).Verify(Payload(v2, R"({ a: 1, b: "x", c: [1, 2], u_type: X, u: { y: 2 } })")).ok())
      << "a newer payload: fields the schema does not know are skipped";
  EXPECT_TRUE(Contract(v2).Verify(Payload(v3, R"({ a: 1, u_type: Z, u: { z: "new" } })")).ok())
      << "a union member the schema does not know is skipped";
}

TEST(PayloadContractTest, EveryTruncationIsRefused) {
  const PayloadContract contract = Contract(kSchema);
  const std::string full = Payload(kSchema, kFullPayload);
  for (size_t size = 0; size < full.size(); ++size) {
    EXPECT_TRUE(contract.Verify(full.substr(0, size)).IsInvalidArgument()) << "a prefix of " << size << " bytes";
  }
}

TEST(PayloadContractTest, CorruptedPayloadsAreReadSafely) {
  // Run under ASan and UBSan: no corruption may make the walk read out of
  // bounds. Most are refused; a flip in a scalar's value is still a valid
  // payload.
  const PayloadContract contract = Contract(kSchema);
  const std::string full = Payload(kSchema, kFullPayload);
  std::mt19937 random(20261202);
  size_t refused = 0;
  constexpr int kRuns = 20000;
  for (int run = 0; run < kRuns; ++run) {
    std::string bytes = full;
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < flips; ++i) bytes[random() % bytes.size()] = static_cast<char>(random());
    if (!contract.Verify(bytes).ok()) ++refused;
  }
  EXPECT_GT(refused, static_cast<size_t>(kRuns / 10)) << "the corruptions reach the offsets and the vtables";
}

TEST(PayloadContractTest, NestingIsBounded) {
  // Built by hand: flatc's JSON parser stops at the same depth.
  flatbuffers::FlatBufferBuilder b;
  flatbuffers::uoffset_t start = b.StartTable();
  flatbuffers::Offset<flatbuffers::Table> node(b.EndTable(start));
  for (uint32_t i = 0; i < kMaxPayloadDepth; ++i) {
    start = b.StartTable();
    b.AddOffset(4, node);  // Node.child
    node = flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start));
  }
  const auto order_id = b.CreateString("o");
  start = b.StartTable();
  b.AddOffset(4, order_id);  // OrderApproved.order_id, field 0
  b.AddOffset(24, node);     // OrderApproved.tree, field 10
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start)), "ORDA");
  const Status s =
      Contract(kSchema).Verify(std::string_view(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()));
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("orders.OrderApproved.tree.child.child"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("nested deeper than 64"), std::string::npos) << s.ToString();
}

// A union value stored without its type: FlatBuffers' JSON printer takes
// the tag from whichever field was stored before it and follows the
// value's offset as that member, where this walk would have checked
// nothing. Built by hand: flatc writes the tag whenever it writes a value.
std::string UnionValueTagged(const uint8_t* tag) {
  flatbuffers::FlatBufferBuilder b;
  const auto text = b.CreateString("leave at door");
  flatbuffers::uoffset_t start = b.StartTable();
  b.AddOffset(4, text);  // Note.text
  const flatbuffers::Offset<flatbuffers::Table> note(b.EndTable(start));
  const auto order_id = b.CreateString("o");
  start = b.StartTable();
  b.AddOffset(4, order_id);                             // OrderApproved.order_id, field 0
  b.AddElement<int32_t>(6, 7, 3);                       // priority, field 1: a present field before the union
  if (tag != nullptr) b.AddElement<uint8_t>(16, *tag);  // extra_type, field 6, stored even when NONE
  b.AddOffset(18, note);                                // extra, field 7
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start)), "ORDA");
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

TEST(PayloadContractTest, AUnionValueWithoutItsTypeIsRefused) {
  const PayloadContract contract = Contract(kSchema);
  const uint8_t note = 1;
  EXPECT_TRUE(contract.Verify(UnionValueTagged(&note)).ok()) << contract.Verify(UnionValueTagged(&note)).ToString();
  const uint8_t none = 0;
  for (const uint8_t* tag : {static_cast<const uint8_t*>(nullptr), &none}) {
    const Status s = contract.Verify(UnionValueTagged(tag));
    ASSERT_TRUE(s.IsInvalidArgument()) << (tag == nullptr ? "absent" : "NONE");
    EXPECT_NE(s.message().find("orders.OrderApproved.extra: a union value without its type"), std::string::npos)
        << s.ToString();
  }
}

TEST(PayloadContractTest, OffsetsSharedManyTimesAreBounded) {
  // 3000 lines that all point at one table whose every sku points at one
  // string is small; a vector of 3000 such tables pointing at one table
  // of 3000 lines takes 3000 x 3000 steps: refused, quickly.
  const std::string source =
      "table Leaf { s: string; } table Mid { leaves: [Leaf]; } table Top { mids: [Mid]; } root_type Top; "
      "file_identifier \"TOPS\";";
  constexpr int kFan = 3000;
  // Built by hand: a Leaf, a Mid of kFan copies of its offset, a Top of
  // kFan copies of the Mid's.
  flatbuffers::FlatBufferBuilder b;
  const auto text = b.CreateString("x");
  const flatbuffers::uoffset_t leaf_start = b.StartTable();
  b.AddOffset(4, text);
  const flatbuffers::Offset<flatbuffers::Table> one_leaf(b.EndTable(leaf_start));
  const auto leaves = b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::Table>>(kFan, one_leaf));
  const flatbuffers::uoffset_t mid_start = b.StartTable();
  b.AddOffset(4, leaves);
  const flatbuffers::Offset<flatbuffers::Table> one_mid(b.EndTable(mid_start));
  const auto mids = b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::Table>>(kFan, one_mid));
  const flatbuffers::uoffset_t top_start = b.StartTable();
  b.AddOffset(4, mids);
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(top_start)), "TOPS");
  const std::string payload(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  auto contract = PayloadContract::Make("t.top.v1", 1, Schema(source));
  ASSERT_TRUE(contract.ok());
  const Status verdict = contract->Verify(payload);
  ASSERT_TRUE(verdict.IsInvalidArgument()) << payload.size() << " bytes";
  EXPECT_NE(verdict.message().find("more than 4 steps per byte to check"), std::string::npos) << verdict.ToString();
}

TEST(PayloadContractTest, APayloadAtAnOddAddressIsChecked) {
  const std::string full = Payload(kSchema, kFullPayload);
  const std::string shifted = "x" + full;
  EXPECT_TRUE(Contract(kSchema).Verify(std::string_view(shifted).substr(1)).ok());
}

// Nested FlatBuffers and FlexBuffers, built by hand: the outer table holds
// their bytes as flatc's builders store them.
constexpr const char* kHolderSchema = R"(
namespace box;
table Inner { id: ulong; note: string (required); }
table Holder { nested: [ubyte] (nested_flatbuffer: "Inner"); flex: [ubyte] (flexbuffer); weights: [double]; }
root_type Holder;
file_identifier "HOLD";
)";

std::string Bytes(const flatbuffers::FlatBufferBuilder& b) {
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

std::string InnerBuffer(bool with_note) {
  flatbuffers::FlatBufferBuilder b;
  const auto note = b.CreateString("n");
  const flatbuffers::uoffset_t start = b.StartTable();
  b.AddElement<uint64_t>(4, 7, 0);      // Inner.id
  if (with_note) b.AddOffset(6, note);  // Inner.note
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start)));
  return Bytes(b);
}

std::string Holder(const std::string& nested, const std::vector<uint8_t>& flex) {
  flatbuffers::FlatBufferBuilder b;
  const auto nested_bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(nested.data()), nested.size());
  const auto flex_bytes = b.CreateVector(flex);
  const flatbuffers::uoffset_t start = b.StartTable();
  if (!nested.empty()) b.AddOffset(4, nested_bytes);  // Holder.nested
  if (!flex.empty()) b.AddOffset(6, flex_bytes);      // Holder.flex
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start)), "HOLD");
  return Bytes(b);
}

std::vector<uint8_t> FlexMap() {
  flexbuffers::Builder flex;
  flex.Map([&] {
    flex.Int("count", 3);
    flex.String("name", "valve");
  });
  flex.Finish();
  return flex.GetBuffer();
}

TEST(PayloadContractTest, ANestedFlatBufferIsCheckedAsItsRootTable) {
  const PayloadContract contract = Contract(kHolderSchema);
  EXPECT_TRUE(contract.Verify(Holder(InnerBuffer(true), {})).ok());

  const Status missing = contract.Verify(Holder(InnerBuffer(false), {}));
  ASSERT_TRUE(missing.IsInvalidArgument());
  EXPECT_NE(missing.message().find("box.Holder.nested.note: a required field is missing"), std::string::npos)
      << missing.ToString();

  // Its root offset far outside the inner buffer: the generated reader's
  // nested_root() would follow it.
  std::string broken = InnerBuffer(true);
  const uint32_t far = 0x7fffffff;
  std::memcpy(broken.data(), &far, sizeof(far));
  const Status outside = contract.Verify(Holder(broken, {}));
  ASSERT_TRUE(outside.IsInvalidArgument());
  EXPECT_NE(outside.message().find("box.Holder.nested: the root offset points outside the payload"), std::string::npos)
      << outside.ToString();

  const Status small = contract.Verify(Holder("abcd", {}));
  ASSERT_TRUE(small.IsInvalidArgument());
  EXPECT_NE(small.message().find("a nested FlatBuffer of 4 bytes (at least 12)"), std::string::npos)
      << small.ToString();
}

TEST(PayloadContractTest, AFlexBufferIsVerified) {
  const PayloadContract contract = Contract(kHolderSchema);
  const std::vector<uint8_t> flex = FlexMap();
  EXPECT_TRUE(contract.Verify(Holder("", flex)).ok());
  // Every single-byte corruption of the FlexBuffer either verifies or is
  // refused naming the field; none reads outside it (ASan).
  size_t refused = 0;
  for (size_t i = 0; i < flex.size(); ++i) {
    for (const uint8_t value : {uint8_t{0x20}, uint8_t{0xff}, uint8_t{0x7f}}) {
      std::vector<uint8_t> corrupt = flex;
      corrupt[i] = value;
      const Status s = contract.Verify(Holder("", corrupt));
      if (s.ok()) continue;
      ++refused;
      EXPECT_NE(s.message().find("box.Holder.flex: a FlexBuffer"), std::string::npos) << s.ToString();
    }
  }
  EXPECT_GT(refused, flex.size()) << "corruptions reach the offsets and widths";
}

TEST(PayloadContractTest, AFlexBufferThatContainsItselfIsRefused) {
  // A one-element untyped vector (width 1) whose element refers back to
  // the vector: its size byte, the element, its type byte, then the root.
  const std::vector<uint8_t> cycle = {
      0x01,           // size: one element
      0x01,           // element: an offset one back, to the vector's start
      (10 << 2) | 0,  // element type: FBT_VECTOR, width 1
      0x02,           // root: an offset two back, to the vector
      (10 << 2) | 0,  // root type: FBT_VECTOR, width 1
      0x01,           // root width
  };
  const Status s = Contract(kHolderSchema).Verify(Holder("", cycle));
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("box.Holder.flex: a FlexBuffer"), std::string::npos) << s.ToString();
}

TEST(PayloadContractTest, MisalignedVectorElementsAreRefused) {
  // A [double] whose length is 8-aligned, so its element is not: no
  // FlatBuffers builder writes it, flatc 2.0.8's verifier checks only the
  // length, and a reader loads the element in place. Built by appending a
  // copy of the vector at such a place and pointing the field at it.
  flatbuffers::FlatBufferBuilder b;
  const auto weights = b.CreateVector(std::vector<double>{2.5});
  const flatbuffers::uoffset_t start = b.StartTable();
  b.AddOffset(8, weights);  // Holder.weights
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start)), "HOLD");
  const std::string aligned = Bytes(b);
  const PayloadContract contract = Contract(kHolderSchema);
  ASSERT_TRUE(contract.Verify(aligned).ok());

  const auto* root = flatbuffers::GetRoot<flatbuffers::Table>(aligned.data());
  const size_t slot =
      static_cast<size_t>(reinterpret_cast<const char*>(root) - aligned.data()) + root->GetOptionalFieldOffset(8);
  const size_t length_at = (aligned.size() + 7) / 8 * 8;
  std::string moved = aligned;
  moved.resize(length_at + sizeof(uint32_t) + sizeof(double));
  const uint32_t one = 1;
  const double value = 2.5;
  std::memcpy(moved.data() + length_at, &one, sizeof(one));
  std::memcpy(moved.data() + length_at + sizeof(one), &value, sizeof(value));
  const auto offset = static_cast<uint32_t>(length_at - slot);
  std::memcpy(moved.data() + slot, &offset, sizeof(offset));
  const Status s = contract.Verify(moved);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("box.Holder.weights: a vector whose elements are misaligned"), std::string::npos)
      << s.ToString();
}

TEST(PayloadContractTest, AZeroOffsetIsNamed) {
  const std::string full = Payload(kSchema, kFullPayload);
  const auto* root = flatbuffers::GetRoot<flatbuffers::Table>(full.data());
  const auto at = static_cast<size_t>(reinterpret_cast<const char*>(root) - full.data()) +
                  root->GetOptionalFieldOffset(10);  // OrderApproved.lines, field 3
  std::string zero = full;
  std::memset(zero.data() + at, 0, sizeof(uint32_t));
  const Status s = Contract(kSchema).Verify(zero);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("orders.OrderApproved.lines: an offset is zero (an offset to itself)"), std::string::npos)
      << s.ToString();
}

TEST(PayloadContractTest, AVectorOfManySmallTablesPasses) {
  // 150,000 tables in about 1.2 MB: the work allowed follows the size.
  const std::string source =
      "table Reading { v: int; } table Batch { readings: [Reading]; } root_type Batch; file_identifier \"BTCH\";";
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<flatbuffers::Table>> readings;
  for (int i = 0; i < 150000; ++i) {
    const flatbuffers::uoffset_t start = b.StartTable();
    b.AddElement<int32_t>(4, i + 1, 0);
    readings.emplace_back(b.EndTable(start));
  }
  const auto vector = b.CreateVector(readings);
  const flatbuffers::uoffset_t start = b.StartTable();
  b.AddOffset(4, vector);
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start)), "BTCH");
  auto contract = PayloadContract::Make("t.batch.v1", 1, Schema(source));
  ASSERT_TRUE(contract.ok());
  EXPECT_TRUE(contract->Verify(Bytes(b)).ok()) << contract->Verify(Bytes(b)).ToString();
}

}  // namespace
}  // namespace walbus::internal
