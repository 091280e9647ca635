// storage/keys.cc: each key space's bytes. These are the bytes databases
// hold, so a change here is a change of the on-disk format (a format
// version bump, and code that still reads the databases of the old one),
// never a refactoring.
#include "storage/keys.h"

#include <gtest/gtest.h>

#include <string>

namespace walbus::storage {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

EventId SomeId() {
  EventId id;
  for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<uint8_t>(0xA0 + i);
  return id;
}

TEST(KeysTest, NumberKeysAreEightBytesBigEndian) {
  const std::string seven = Bytes({0, 0, 0, 0, 0, 0, 0, 7});
  EXPECT_EQ(OutboxKey(7), seven);
  EXPECT_EQ(ActionKey(7), seven);
  EXPECT_EQ(QuarantineKey(7), seven);
  EXPECT_EQ(OutboxKey(0x0102030405060708ull), Bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  uint64_t n = 0;
  EXPECT_TRUE(ParseActionKey(seven, &n));
  EXPECT_EQ(n, 7u);
  EXPECT_FALSE(ParseActionKey(seven.substr(1), &n)) << "a key of another size is not an action";
  EXPECT_FALSE(ParseQuarantineKey(seven + "x", &n));
  EXPECT_LT(OutboxKey(255), OutboxKey(256)) << "lexical order is numeric order";
}

TEST(KeysTest, InboxKeysKeepTheLayoutOfTheirDatabasesFormat) {
  const std::string id(reinterpret_cast<const char*>(SomeId().bytes.data()), 16);
  const std::string subscriber = Bytes({0, 0, 1, 2});
  EXPECT_EQ(InboxKey(InboxLayout::kEventFirst, 0x0102, id), id + subscriber) << "format 2";
  EXPECT_EQ(InboxKey(InboxLayout::kSubscriberFirst, 0x0102, id), subscriber + id) << "format 1";
  for (const InboxLayout layout : {InboxLayout::kEventFirst, InboxLayout::kSubscriberFirst}) {
    uint32_t parsed = 0;
    EXPECT_TRUE(ParseInboxKey(layout, InboxKey(layout, 0x0102, id), &parsed));
    EXPECT_EQ(parsed, 0x0102u);
    EXPECT_FALSE(ParseInboxKey(layout, id, &parsed)) << "a key of another size is not an inbox key";
  }
}

TEST(KeysTest, AnInboxKeyIsRelaidInTheOtherLayout) {
  const std::string id(reinterpret_cast<const char*>(SomeId().bytes.data()), 16);
  const std::string format1 = InboxKey(InboxLayout::kSubscriberFirst, 0x0102, id);
  const std::string format2 = InboxKey(InboxLayout::kEventFirst, 0x0102, id);
  std::string out;
  EXPECT_TRUE(RelayInboxKey(InboxLayout::kSubscriberFirst, format1, InboxLayout::kEventFirst, &out));
  EXPECT_EQ(out, format2);
  EXPECT_TRUE(RelayInboxKey(InboxLayout::kEventFirst, format2, InboxLayout::kSubscriberFirst, &out));
  EXPECT_EQ(out, format1);
  EXPECT_FALSE(RelayInboxKey(InboxLayout::kSubscriberFirst, id, InboxLayout::kEventFirst, &out));
}

TEST(KeysTest, IngestKeysAreTaggedVersionKeysOfTheirScope) {
  const EventId id = SomeId();
  const std::string id16(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size());
  EXPECT_EQ(IngestDedupKey("cloud-in", id), Bytes({0xFF, 0xFF, 0xFF, 0xFF}) + std::string("cloud-in\0", 9) + id16);
  EXPECT_EQ(IngestOrderKey("cloud-in", "device-7/order-1"),
            Bytes({0xFF, 0xFF, 0xFF, 0xFE}) + std::string("cloud-in\0", 9) + "device-7/order-1");
  // No column family's version key can fall in either space: ids count
  // up from 1 and stay far below the tags.
  EXPECT_LT(VersionKey(1u << 20, "k"), IngestOrderKey("", ""));
  EXPECT_LT(IngestOrderKey("a", "b"), IngestDedupKey("", id));
}

}  // namespace
}  // namespace walbus::storage
