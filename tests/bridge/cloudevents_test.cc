// bridge/cloudevents.cc: the CloudEvents NATS binary-mode mapping, the
// signature and the subject mapping, without a server.
#include "bridge/cloudevents.h"

#include <gtest/gtest.h>

namespace walbus::bridge {
namespace {

using namespace std::chrono_literals;

Event Sample() {
  Event e;
  e.id = EventId::Generate();
  e.type = "orders.order-approved.v1";
  e.source = "device-7/orders";
  e.subject = "order-9";
  e.subject_version = 3;
  e.time = std::chrono::system_clock::time_point(std::chrono::microseconds(1796000000123456));
  e.content_type = "application/json";
  e.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  e.correlation_id = EventId::Generate();
  e.causation_id = EventId::Generate();
  e.data = "{\"total\":12}";
  return e;
}

TEST(CloudEventsTest, HeadersRoundTripEveryAttribute) {
  const Event in = Sample();
  Headers h = ToHeaders(in);
  EXPECT_EQ(h["ce-specversion"], "1.0");
  EXPECT_EQ(h["ce-id"], in.id.ToString());
  EXPECT_EQ(h["Nats-Msg-Id"], in.id.ToString()) << "the stream deduplicates by event id";
  Event out;
  ASSERT_TRUE(FromHeaders(h, in.data, &out).ok());
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.type, in.type);
  EXPECT_EQ(out.source, in.source);
  EXPECT_EQ(out.subject, in.subject);
  EXPECT_EQ(out.subject_version, in.subject_version);
  EXPECT_EQ(out.time, in.time);
  EXPECT_EQ(out.content_type, in.content_type);
  EXPECT_EQ(out.traceparent, in.traceparent);
  EXPECT_EQ(out.correlation_id, in.correlation_id);
  EXPECT_EQ(out.causation_id, in.causation_id);
  EXPECT_EQ(out.data, in.data);
}

TEST(CloudEventsTest, HeaderValuesArePercentEncodedAndEveryByteComesBack) {
  for (const std::string subject : {"pct%41x", "caf\xc3\xa9-\xe2\x82\xac", "with space", "quote\"d",
                                    "evil\r\nce-type: forged.thing.v1", "tab\there"}) {
    Event in = Sample();
    in.subject = subject;
    in.content_type = "text/plain; charset=utf-8";
    const Headers h = ToHeaders(in);
    for (char c : h.at("ce-subject")) {
      EXPECT_TRUE(c > 0x20 && c < 0x7f && c != '"')
          << "raw byte " << int(static_cast<unsigned char>(c)) << " in " << h.at("ce-subject");
    }
    Event out;
    ASSERT_TRUE(FromHeaders(h, in.data, &out).ok()) << subject;
    EXPECT_EQ(out.subject, subject) << "the ordering key arrives as sent";
    EXPECT_EQ(out.content_type, in.content_type);
  }
  Event in = Sample();
  in.subject = "pct%41x with space";
  EXPECT_EQ(ToHeaders(in).at("ce-subject"), "pct%2541x%20with%20space");
  EXPECT_EQ(ToHeaders(Sample()).at("ce-source"), "device-7/orders") << "printable ASCII stays as it is";
  EXPECT_EQ(*PercentDecode("a%20b%C3%A9"), "a b\xc3\xa9");
  for (const char* bad : {"%", "%4", "%G1", "x%zz"}) {
    EXPECT_EQ(PercentDecode(bad).status().code(), Status::Code::kInvalidArgument) << bad;
  }
}

TEST(CloudEventsTest, WhatTheSdkSendsIsTaken) {
  // As the CloudEvents SDK's binary mode writes it: names in another case,
  // the media type as content-type, no subject.
  const Event sample = Sample();
  Headers h = {{"Ce-Specversion", "1.0"},
               {"Ce-Id", sample.id.ToString()},
               {"Ce-Source", "cloud/orders"},
               {"Ce-Type", "orders.order-approved.v1"},
               {"Ce-Time", "2026-12-01T10:00:00.000Z"},
               {"content-type", "application/json"}};
  Event out;
  Status s = FromHeaders(h, "{}", &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.id, sample.id);
  EXPECT_EQ(out.source, "cloud/orders");
  EXPECT_EQ(out.subject, "cloud/orders") << "without a subject, the source orders it";
  EXPECT_EQ(out.content_type, "application/json");
  h["ce-datacontenttype"] = "text/plain";
  ASSERT_TRUE(FromHeaders(h, "{}", &out).ok());
  EXPECT_EQ(out.content_type, "text/plain") << "ce-datacontenttype wins over content-type";
  EXPECT_EQ(*FindHeader(h, "CE-ID"), sample.id.ToString());
  EXPECT_EQ(FindHeader(h, "ce-missing"), nullptr);
}

TEST(CloudEventsTest, MalformedHeadersAreRefusedWithTheReason) {
  const Headers good = ToHeaders(Sample());
  struct Case {
    const char* header;
    const char* value;  // nullptr: removed
    const char* reason;
  } cases[] = {
      {"ce-specversion", nullptr, "ce-specversion"},
      {"ce-specversion", "0.3", "unsupported"},
      {"ce-id", nullptr, "ce-id"},
      {"ce-id", "not-a-uuid", "not a UUID"},
      {"ce-type", nullptr, "ce-type"},
      {"ce-source", "", "ce-source"},
      {"ce-time", "yesterday", "RFC 3339"},
      {"ce-subjectversion", "12x", "not a number"},
      {"ce-causationid", "x", "not a UUID"},
      {"ce-subject", "bad%zz", "percent escape"},
  };
  for (const Case& c : cases) {
    Headers h = good;
    if (c.value == nullptr) {
      h.erase(c.header);
    } else {
      h[c.header] = c.value;
    }
    Event out;
    Status s = FromHeaders(h, "", &out);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.header;
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << c.header << ": " << s.message();
  }
}

TEST(CloudEventsTest, SignatureCoversIdentityAndData) {
  const Event e = Sample();
  const std::string sig = Sign(e, "secret-1");
  EXPECT_EQ(sig.size(), 64u);
  EXPECT_TRUE(SignatureMatches(e, "secret-1", sig));
  EXPECT_FALSE(SignatureMatches(e, "secret-2", sig));
  for (auto change : std::vector<void (*)(Event&)>{
           [](Event& x) { x.data += "!"; }, [](Event& x) { x.type = "orders.order-cancelled.v1"; },
           [](Event& x) { x.source = "device-8/orders"; }, [](Event& x) { x.subject = "order-10"; },
           [](Event& x) { x.time += 1s; }, [](Event& x) { x.id = EventId::Generate(); }}) {
    Event forged = e;
    change(forged);
    EXPECT_FALSE(SignatureMatches(forged, "secret-1", sig));
  }
  EXPECT_FALSE(SignatureMatches(e, "secret-1", sig.substr(1)));
}

TEST(CloudEventsTest, DefaultSubjectKeepsSourceOneTokenReversibly) {
  Event e = Sample();
  e.source = "https://fleet.example/dev%207/*>";
  e.type = "orders.order-approved.v1";
  EXPECT_EQ(DefaultSubject("walbus", e), "walbus.https://fleet%2Eexample/dev%25207/%2A%3E.orders.order-approved.v1");
  for (const std::string source : {"urn:dev:7", "fleet.device 7/*", "a%2Eb", "x.y.z", "caf\xc3\xa9", ">"}) {
    const std::string token = SubjectToken(source);
    EXPECT_EQ(token.find_first_of(".*> \t"), std::string::npos) << token;
    Result<std::string> back = PercentDecode(token);
    ASSERT_TRUE(back.ok()) << token;
    EXPECT_EQ(*back, source);
  }
  EXPECT_NE(SubjectToken("a.b"), SubjectToken("a_b")) << "distinct sources, distinct tokens";
}

TEST(CloudEventsTest, AFilterCoversAPrefixOnlyWithEveryTokenAfterIt) {
  for (const char* filter : {">", "walbus.>", "*.>", "fleet.walbus.>", "fleet.*.>", "fleet.walbus.*.>"}) {
    EXPECT_TRUE(FilterCoversPrefix(filter, filter[0] == 'f' ? "fleet.walbus" : "walbus")) << filter;
  }
  for (const char* filter :
       {"walbus", "walbus.*", "walbus.*.*", "other.>", "walbus.dev.>", "walbus.>.x", "walbus>", ""}) {
    EXPECT_FALSE(FilterCoversPrefix(filter, "walbus")) << filter;
  }
  EXPECT_FALSE(FilterCoversPrefix("fleet.>", "walbus")) << "another first token";
}

}  // namespace
}  // namespace walbus::bridge
