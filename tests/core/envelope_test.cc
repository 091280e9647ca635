#include "bus/core/envelope.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "bus/core/schema_compat.h"
#include "tools/walbus/schema_source.h"

namespace walbus::internal {
namespace {

Event SampleEvent() {
  Event e;
  e.id = EventId::Generate();
  e.type = "orders.order-approved.v1";
  e.source = "test";
  e.subject = "order-42";
  e.subject_version = 4;
  e.time = std::chrono::system_clock::now();
  e.content_type = "application/json";
  e.correlation_id = EventId::Generate();
  e.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  e.data = std::string("{\"total\":12}\0binary", 19);
  return e;
}

TEST(EnvelopeTest, RoundTripKeepsEveryAttribute) {
  Event in = SampleEvent();
  std::string bytes = EncodeEnvelope(in);
  Event out;
  ASSERT_TRUE(DecodeEnvelope(bytes, 1 << 20, &out).ok());
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.type, in.type);
  EXPECT_EQ(out.source, in.source);
  EXPECT_EQ(out.subject, in.subject);
  EXPECT_EQ(out.subject_version, 4u);
  EXPECT_EQ(out.time, in.time);
  EXPECT_EQ(out.content_type, in.content_type);
  EXPECT_EQ(out.correlation_id, in.correlation_id);
  EXPECT_FALSE(out.causation_id.has_value());
  EXPECT_EQ(out.traceparent, in.traceparent);
  EXPECT_EQ(out.data, in.data);
  EXPECT_EQ(out.schema_version, 0u);
  in.schema_version = 3;
  ASSERT_TRUE(DecodeEnvelope(EncodeEnvelope(in), 1 << 20, &out).ok());
  EXPECT_EQ(out.schema_version, 3u);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Envelopes outlive builds: every one the first release wrote must read
// (schemas/envelope.fbs says how the schema may change).
TEST(EnvelopeTest, TheEnvelopeSchemaIsACompatibleEvolutionOfItsPin) {
  const std::string dir = WALBUS_SCHEMAS_DIR;
  auto pinned = ParseSchemaSource(ReadFile(dir + "/pinned/envelope.v1.fbs"), {}, "envelope.v1.fbs");
  auto current = ParseSchemaSource(ReadFile(dir + "/envelope.fbs"), {}, "envelope.fbs");
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  for (const std::string& line : CompatibilityViolations(*pinned, *current)) ADD_FAILURE() << line;
}

TEST(EnvelopeTest, EveryTruncationIsRefusedWithoutCrashing) {
  std::string bytes = EncodeEnvelope(SampleEvent());
  for (size_t len = 0; len < bytes.size(); ++len) {
    Event out;
    EXPECT_FALSE(DecodeEnvelope(std::string_view(bytes.data(), len), 1 << 20, &out).ok()) << len;
  }
}

TEST(EnvelopeTest, FlippedBytesNeverCrashTheDecoder) {
  const std::string bytes = EncodeEnvelope(SampleEvent());
  size_t refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0xff);
    Event out;
    refused += DecodeEnvelope(damaged, 1 << 20, &out).ok() ? 0 : 1;
  }
  EXPECT_GT(refused, 0u);
}

TEST(EnvelopeTest, OversizedEnvelopeIsRefused) {
  Event e = SampleEvent();
  e.data.assign(2000, 'x');
  Event out;
  Status s = DecodeEnvelope(EncodeEnvelope(e), 1000, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

TEST(EnvelopeTest, TypeRules) {
  EXPECT_TRUE(ValidateEventType("orders.order-approved.v1").ok());
  EXPECT_TRUE(ValidateEventType("a.b.c.v12").ok());
  for (const char* bad : {"", "orders.v1", "Orders.order-approved.v1", "orders.order-approved",
                          "orders.order-approved.v0", "orders.order-approved.v01", "orders..x.v1",
                          "orders.order_approved.v1", "orders.-x.v1", "orders.x.vx", ".orders.x.v1"}) {
    EXPECT_TRUE(ValidateEventType(bad).IsInvalidArgument()) << bad;
  }
}

TEST(EnvelopeTest, CloudEventStringRules) {
  for (std::string_view ok : {"order-42", "caf\xc3\xa9 \xe2\x82\xac", "quo\"te %41 \\", "\xf0\x9f\x98\x80", ""}) {
    EXPECT_TRUE(ValidateCloudEventString("subject", ok).ok()) << ok;
  }
  for (std::string_view bad : {std::string_view("a\r\nb"), std::string_view("tab\there"), std::string_view("\x7f"),
                               std::string_view("c1 \xc2\x85"), std::string_view("\xff"), std::string_view("\xc0\xa0"),
                               std::string_view("\xed\xa0\x80"), std::string_view("\xef\xbf\xbe"),
                               std::string_view("cut \xe2\x82"), std::string_view("nul\0", 4)}) {
    const Status s = ValidateCloudEventString("subject", bad);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_TRUE(s.message().starts_with("subject ")) << s.ToString();
  }
}

// Accepted and refused as the CloudEvents SDK's uri-reference check does
// (tests/bridge/cloudevents_sdk_test.cc has the SDK validate what is accepted).
TEST(EnvelopeTest, SourcesAreUriReferences) {
  for (std::string_view ok : {"https://example.com/dev/7", "dev-7", "/a/b", "urn:dev:7", "urn:dev/7%20b%C3%A4r",
                              "walbus", "//host:8080/x?y=1#z", "mailto:ops@example.com", "a+b.c-d:x", "./x:y"}) {
    EXPECT_TRUE(ValidateUriReference("source", ok).ok()) << ok;
  }
  for (std::string_view bad : {"urn:dev/7 b\xc3\xa4r", "a b", "%zz", "%4", "b\xc3\xa4r", "a\r\nb", "", "1:x", "a_b:c",
                               "quo\"te", "back\\slash", "<x>", "{x}"}) {
    const Status s = ValidateUriReference("source", bad);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("is not a URI-reference"), std::string::npos) << s.ToString();
  }
}

TEST(EnvelopeTest, EventIdsAreTimeOrderedAndParse) {
  EventId a = EventId::Generate();
  EventId b = EventId::Generate();
  EXPECT_LT(a, b);
  EXPECT_EQ(a.bytes[6] >> 4, 7) << "version 7";
  EXPECT_EQ(a.bytes[8] >> 6, 2) << "RFC variant";
  auto parsed = EventId::Parse(a.ToString());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, a);
  EXPECT_FALSE(EventId::Parse("not-a-uuid").has_value());
  EXPECT_NEAR(static_cast<double>(a.UnixMillis()),
              static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count()),
              5000.0);
}

}  // namespace
}  // namespace walbus::internal
