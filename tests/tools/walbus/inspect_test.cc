#include "tools/walbus/inspect.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "bus/core/envelope.h"
#include "bus/dispatch/recovery.h"
#include "storage/db.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tests/test_util.h"
#include "tests/tools/walbus/cli_runner.h"
#include "walbus/bus.h"

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;
using walbus::testing::Lines;
using walbus::testing::RunCli;
using walbus::testing::RunCliCapture;
using walbus::testing::RunCliErrors;
using walbus::testing::RunCliOutput;
using walbus::testing::TempDir;

// Registers `subscriber` without starting the bus and commits `events`
// events (of `payload_bytes` that do not compress), so that the
// subscriber has a backlog of that many.
void BuildBacklog(Bus& bus, const std::string& subscriber, int events, size_t payload_bytes = 0) {
  SubscriberOptions s;
  s.name = subscriber;
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  ASSERT_TRUE(bus.Subscribe(std::move(s)).ok());
  std::mt19937_64 rng(7);
  for (int i = 0; i < events; ++i) {
    Transaction tx = bus.Begin();
    EventSpec e;
    e.type = "orders.order-approved.v1";
    e.subject = "o" + std::to_string(i);
    e.data.resize(payload_bytes);
    for (char& c : e.data) c = static_cast<char>(rng());
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
}

std::unique_ptr<Bus> OpenBuffered(const TempDir& dir) {
  Options o;
  o.dir = dir.path();
  o.durability = Durability::kBuffered;
  std::unique_ptr<Bus> bus;
  EXPECT_TRUE(Bus::Open(o, &bus).ok());
  return bus;
}

TEST(InspectTest, ReportsALiveDatabaseHeldByAnotherBus) {
  TempDir dir;
  std::unique_ptr<Bus> bus = OpenBuffered(dir);
  ASSERT_NE(bus, nullptr);
  ASSERT_NO_FATAL_FAILURE(BuildBacklog(*bus, "slow", 25));
  std::this_thread::sleep_for(5ms);
  DatabaseReport report;
  Status st = InspectDatabase(dir.path(), &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.last_seq, 25u);
  EXPECT_EQ(report.outbox_backlog, 25u);
  ASSERT_TRUE(report.oldest_backlog_age_ms.has_value());
  EXPECT_GE(*report.oldest_backlog_age_ms, 5);
  ASSERT_EQ(report.subscribers.size(), 1u);
  EXPECT_EQ(report.subscribers[0].name, "slow");
  EXPECT_EQ(report.subscribers[0].lag_events, 25u);
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"last_seq\":25"), std::string::npos) << json;
  EXPECT_NE(json.find("\"lag_events\":25"), std::string::npos) << json;
}

// What Options::disk_budget bounds, by kind, from the database alone: a
// backlog of 200 events of 1 KiB waits in the outbox.
TEST(InspectTest, ReportsWhatTheDiskBudgetBoundsByKind) {
  TempDir dir;
  std::unique_ptr<Bus> bus = OpenBuffered(dir);
  ASSERT_NE(bus, nullptr);
  ASSERT_NO_FATAL_FAILURE(BuildBacklog(*bus, "uplink", 200, 1024));
  ASSERT_TRUE(bus->Close().ok());
  DatabaseReport report;
  Status st = InspectDatabase(dir.path(), &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(report.disk_use.outbox, 200u * 1024) << "payloads and envelopes";
  EXPECT_LT(report.disk_use.outbox, 2u * 200 * 1024);
  EXPECT_LT(report.disk_use.dead_letters + report.disk_use.scheduled, 64u << 10)
      << "nothing of those kinds: empty memtables";
  EXPECT_NE(ReportText(report).find("disk use        " + std::to_string(report.disk_use.total()) + " bytes: outbox "),
            std::string::npos)
      << ReportText(report);
  EXPECT_NE(ReportJson(report).find("\"disk_use\":{\"outbox\":" + std::to_string(report.disk_use.outbox)),
            std::string::npos)
      << ReportJson(report);
  std::string metrics;
  for (const MetricFamily& f : ReportMetrics(report)) metrics += f.name + "\n";
  EXPECT_NE(metrics.find("walbus_disk_use_bytes"), std::string::npos) << metrics;
}

// What the budget dropped (Options::drop_oldest_types), from the database
// alone: by type, and for the subscriber that had not taken it.
TEST(InspectTest, ReportsWhatTheDiskBudgetDropped) {
  TempDir dir;
  Options o;
  o.dir = dir.path();
  o.durability = Durability::kBuffered;
  o.disk_budget = uint64_t{16} << 20;  // the log's bound (4 MiB) leaves room
  o.drop_oldest_types = {"orders.order-approved"};
  // What the held subscriber fetched is never dropped: a small window
  // leaves the budget to the events that may go.
  o.max_in_flight_per_subscriber = 64;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(o, &bus).ok());
  SubscriberOptions held;
  held.name = "uplink";
  held.handler = [](const Event&, HandlerContext&) { return Outcome::Wait(5ms, "offline"); };
  ASSERT_TRUE(bus->Subscribe(std::move(held)).ok());
  ASSERT_TRUE(bus->Start().ok());
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    Transaction tx = bus->Begin();
    EventSpec e{
        .type = "orders.order-approved.v1", .subject = "o" + std::to_string(i % 9), .data = std::string(1024, 0)};
    for (char& c : e.data) c = static_cast<char>(rng());
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok()) << i;
  }
  const uint64_t dropped = bus->Stats().dropped;
  ASSERT_GT(dropped, 0u);
  ASSERT_TRUE(bus->Close().ok());
  DatabaseReport report;
  Status st = InspectDatabase(dir.path(), &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.dropped_by_type, (std::map<std::string, uint64_t>{{"orders.order-approved.v1", dropped}}));
  ASSERT_EQ(report.subscribers.size(), 1u);
  EXPECT_EQ(report.subscribers[0].dropped, dropped);
  const std::string n = std::to_string(dropped);
  EXPECT_NE(ReportText(report).find("dropped         " + n + " events of orders.order-approved.v1"), std::string::npos)
      << ReportText(report);
  EXPECT_NE(ReportText(report).find("dropped before it took them " + n), std::string::npos) << ReportText(report);
  EXPECT_NE(ReportJson(report).find("\"dropped_by_type\":{\"orders.order-approved.v1\":" + n + "}"), std::string::npos)
      << ReportJson(report);
}

// Column families an earlier run listed stay on disk, untouched, and the
// report names them beside those listed now.
TEST(InspectTest, ReportsEveryColumnFamilyOnDisk) {
  TempDir dir;
  Options o;
  o.dir = dir.path();
  o.column_families = {"orders", "old"};
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
  }
  o.column_families = {"orders"};
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(o, &bus).ok());
  DatabaseReport report;
  Status st = InspectDatabase(dir.path(), &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.column_families, (std::vector<std::string>{"old", "orders"}));
  EXPECT_NE(ReportJson(report).find("\"column_families\":[\"old\",\"orders\"]"), std::string::npos)
      << ReportJson(report);
  EXPECT_NE(ReportText(report).find("column families old, orders"), std::string::npos) << ReportText(report);
}

TEST(InspectTest, CliExitCodes) {
  TempDir dir;
  EXPECT_EQ(RunCli("stats " + dir.root() + "/missing"), 2);
  {
    std::ofstream f(dir.root() + "/file");
    f << "x";
  }
  EXPECT_EQ(RunCli("stats " + dir.root()), 2) << "a directory that is not a walbus database";
  EXPECT_EQ(RunCli("frobnicate"), 2);
  Options o;
  o.dir = dir.path();
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
  }
  EXPECT_EQ(RunCli("stats " + dir.path()), 0);
  EXPECT_EQ(RunCli("stats --json " + dir.path()), 0);
}

// A bad value is a usage error that names the option and the value; an
// unknown word is named, with the commands there are; every message has
// the "walbus <command>:" prefix.
TEST(InspectTest, UsageErrorsNameWhatIsWrong) {
  TempDir dir;
  Options o;
  o.dir = dir.path();
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
  }
  const std::string d = " " + dir.path();
  std::string err;
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"outbox show" + d + " --seq -1", "walbus outbox show: --seq: '-1' is not a whole number"},
           {"dlq ls" + d + " --limit -5", "walbus dlq ls: --limit: '-5' is not a whole number"},
           {"outbox ls" + d + " --from-seq 12x", "walbus outbox ls: --from-seq: '12x' is not a whole number"},
           {"quarantine show" + d + " --arrival 1e3", "walbus quarantine show: --arrival: '1e3' is not a whole number"},
           {"dlq redrive" + d + " --subscriber s --seq -3 --operator o --reason r",
            "walbus dlq redrive: --seq: '-3' is not a whole number"},
           {"replay" + d + " --status -1", "walbus replay: --status: '-1' is not a whole number"},
           {"frobnicate" + d, "walbus: unknown command 'frobnicate'; the commands are: stats, metrics,"},
           {"dlq frob" + d, "walbus dlq: unknown command 'frob'; the commands are: ls, show, redrive, skip, purge"},
           {"dlq", "walbus dlq: a command is needed: ls, show,"},
           {"stats", "walbus stats: dir is required"},
       }) {
    EXPECT_EQ(RunCliErrors(args, &err), 2) << args;
    EXPECT_TRUE(err.starts_with(expected)) << args << ": " << err;
  }
  EXPECT_EQ(RunCliOutput("outbox show" + d + " --seq 18446744073709551616", &err), 2) << "too large for 64 bits";
}

TEST(InspectTest, MetricsAsJsonLines) {
  TempDir dir;
  Options o;
  o.dir = dir.path();
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
    SubscriberOptions s;
    s.name = "billing";
    s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  }
  std::string out;
  ASSERT_EQ(RunCliOutput("metrics " + dir.path() + " --json", &out), 0);
  EXPECT_NE(out.find("{\"name\":\"walbus_last_sequence\",\"type\":\"gauge\",\"labels\":{},\"value\":0}\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("{\"name\":\"walbus_subscriber_handled_persisted\",\"type\":\"gauge\",\"labels\":"
                     "{\"subscriber\":\"billing\"},\"value\":0}\n"),
            std::string::npos)
      << out;
  std::string text;
  ASSERT_EQ(RunCliOutput("metrics " + dir.path(), &text), 0);
  size_t samples = 0;
  for (const std::string& line : Lines(text)) samples += !line.starts_with("#");
  EXPECT_EQ(Lines(out).size(), samples) << "one object per sample";
}

// 2024-05-01T12:34:56.789Z
constexpr uint64_t kEventMs = 1714566896789;
const std::string kQuotedSubject = "say \"hi\"\nbye";

std::string Envelope(std::string subject, std::string content_type, std::string data) {
  Event e;
  e.id = EventId::Generate();
  e.type = "orders.order-approved.v1";
  e.source = "orders-service";
  e.subject = std::move(subject);
  e.subject_version = 4;
  e.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(kEventMs));
  e.content_type = std::move(content_type);
  e.data = std::move(data);
  return EncodeEnvelope(e);
}

std::string Bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i & 0xff);
  return s;
}

// A closed database with two registered subscribers, "invoicing" (the
// lower id) and "audit", and records written straight into the failure
// stores:
//   dead letters  invoicing 3: JSON payload, subject with a quote and a newline
//                 invoicing 7: 300 binary bytes
//                 invoicing 9: "JSON" holding a control character
//                 audit 5: a value that is no dead-letter record
//                 audit 6: a record whose envelope is not one
//   quarantine    1: 300 raw bytes of 100000; 2: malformed; 3: "abc"
void SeedFailureStores(const std::string& dir) {
  {
    Options o;
    o.dir = dir;
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
    for (const char* name : {"invoicing", "audit"}) {
      SubscriberOptions s;
      s.name = name;
      s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
      ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    }
    ASSERT_TRUE(bus->Close().ok());
  }
  storage::OpenOptions so;
  so.dir = dir;
  so.create_if_missing = false;
  std::unique_ptr<storage::Db> db;
  Status s = storage::Db::Open(so, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  RecoveredState state;
  ASSERT_TRUE(ReadRecoveredState(*db, &state).ok());
  const uint32_t invoicing = state.subscribers.at("invoicing").id;
  const uint32_t audit = state.subscribers.at("audit").id;
  ASSERT_LT(invoicing, audit);

  storage::Batch batch;
  auto dead = [&](uint32_t id, uint64_t seq, std::string value) {
    batch.Put(db->cf(storage::Cf::kDeadLetters), storage::SubscriberSeqKey(id, seq), value);
  };
  storage::DeadLetterRecord r;
  r.attempts = 5;
  r.first_failure_ms = 1714566900000;  // 12:35:00.000
  r.last_failure_ms = 1714566960000;   // 12:36:00.000
  r.error = "tax service said \"no\"";
  r.handler_version = "v2";
  r.envelope = Envelope(kQuotedSubject, "application/json", "{\"amount\":12,\"note\":\"caf\xc3\xa9\"}");
  dead(invoicing, 3, storage::EncodeDeadLetter(r));
  r.attempts = 3;
  r.envelope = Envelope("order-7", "application/octet-stream", Bytes(300));
  dead(invoicing, 7, storage::EncodeDeadLetter(r));
  r.envelope = Envelope("order-9", "application/json", "{\"a\":\"\x01\"}");
  dead(invoicing, 9, storage::EncodeDeadLetter(r));
  dead(audit, 5, "garbage");
  r.envelope = "not an envelope at all";
  dead(audit, 6, storage::EncodeDeadLetter(r));

  auto quarantine = [&](uint64_t arrival, std::string value) {
    batch.Put(db->cf(storage::Cf::kQuarantine), storage::QuarantineKey(arrival), value);
  };
  storage::QuarantineRecord q;
  q.arrived_ms = kEventMs;
  q.original_bytes = 100000;
  q.source = "bridge:nats";
  q.reason = "envelope fails FlatBuffers verification";
  q.raw = Bytes(300);
  quarantine(1, storage::EncodeQuarantine(q));
  quarantine(2,
             "\x07"
             "bad");
  q.original_bytes = 3;
  q.source = "file";
  q.raw = "abc";
  quarantine(3, storage::EncodeQuarantine(q));
  ASSERT_TRUE(batch.Commit(db.get(), true).ok());
}

// The value of a JSON string field in one rendered object, as written.
std::string JsonField(const std::string& json, const std::string& name) {
  const std::string key = "\"" + name + "\":\"";
  size_t start = json.find(key);
  if (start == std::string::npos) return "<missing>";
  start += key.size();
  size_t end = start;
  while (end < json.size() && json[end] != '"') end += json[end] == '\\' ? 2 : 1;
  return json.substr(start, end - start);
}

TEST(InspectTest, ListsDeadLettersWithMalformedRecordsAsEntries) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(SeedFailureStores(dir.path()));

  std::vector<DeadLetterEntry> all;
  Status s = ListDeadLetters(dir.path(), "", &all, SIZE_MAX);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(all.size(), 5u);
  const std::vector<std::pair<std::string, uint64_t>> order = {
      {"invoicing", 3}, {"invoicing", 7}, {"invoicing", 9}, {"audit", 5}, {"audit", 6}};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(all[i].subscriber, order[i].first) << i;
    EXPECT_EQ(all[i].seq, order[i].second) << i;
  }
  EXPECT_TRUE(all[0].record_ok);
  ASSERT_TRUE(all[0].event_ok) << all[0].event_error;
  EXPECT_EQ(all[0].event.subject, kQuotedSubject);
  EXPECT_EQ(all[0].event.seq, 3u);
  EXPECT_EQ(all[0].record.attempts, 5u);
  EXPECT_EQ(all[0].record.handler_version, "v2");
  EXPECT_FALSE(all[3].record_ok);
  EXPECT_FALSE(all[3].event_ok);
  EXPECT_NE(all[3].event_error.find("malformed"), std::string::npos) << all[3].event_error;
  EXPECT_TRUE(all[4].record_ok);
  EXPECT_FALSE(all[4].event_ok);
  EXPECT_FALSE(all[4].event_error.empty());
  EXPECT_EQ(all[4].record.attempts, 3u);

  std::vector<DeadLetterEntry> some;
  ASSERT_TRUE(ListDeadLetters(dir.path(), "audit", &some, SIZE_MAX).ok());
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].seq, 5u);
  ASSERT_TRUE(ListDeadLetters(dir.path(), "", &some, 2).ok());
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[1].seq, 7u);
  s = ListDeadLetters(dir.path(), "nobody", &some, SIZE_MAX);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("no subscriber named nobody"), std::string::npos) << s.ToString();

  DeadLetterEntry one;
  bool found = false;
  ASSERT_TRUE(FindDeadLetter(dir.path(), "invoicing", 7, &one, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(one.event.subject, "order-7");
  ASSERT_TRUE(FindDeadLetter(dir.path(), "invoicing", 8, &one, &found).ok());
  EXPECT_FALSE(found);
  ASSERT_TRUE(FindDeadLetter(dir.path(), "audit", 7, &one, &found).ok());
  EXPECT_FALSE(found) << "seq 7 belongs to another subscriber";

  std::vector<QuarantineEntry> q;
  s = ListQuarantine(dir.path(), &q, SIZE_MAX);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].arrival, 1u);
  EXPECT_TRUE(q[0].record_ok);
  EXPECT_EQ(q[0].record.source, "bridge:nats");
  EXPECT_EQ(q[0].record.raw.size(), 300u);
  EXPECT_EQ(q[1].arrival, 2u);
  EXPECT_FALSE(q[1].record_ok);
  EXPECT_EQ(q[1].record.raw,
            "\x07"
            "bad");
  EXPECT_TRUE(q[2].record_ok);
  ASSERT_TRUE(ListQuarantine(dir.path(), &q, 1).ok());
  EXPECT_EQ(q.size(), 1u);
  QuarantineEntry qe;
  ASSERT_TRUE(FindQuarantine(dir.path(), 3, &qe, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(qe.record.raw, "abc");
  ASSERT_TRUE(FindQuarantine(dir.path(), 42, &qe, &found).ok());
  EXPECT_FALSE(found);
}

TEST(InspectTest, RendersDeadLettersAndQuarantine) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(SeedFailureStores(dir.path()));
  std::vector<DeadLetterEntry> dl;
  ASSERT_TRUE(ListDeadLetters(dir.path(), "", &dl, SIZE_MAX).ok());
  ASSERT_EQ(dl.size(), 5u);

  // JSON: one line, strings escaped, a JSON payload as text.
  const std::string json = DeadLetterJson(dl[0]);
  EXPECT_EQ(json.find('\n'), std::string::npos) << json;
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(JsonField(json, "subject"), R"(say \"hi\"\nbye)") << json;
  EXPECT_EQ(JsonField(json, "error"), R"(tax service said \"no\")") << json;
  EXPECT_EQ(JsonField(json, "time"), "2024-05-01T12:34:56.789Z") << json;
  EXPECT_EQ(JsonField(json, "first_failure"), "2024-05-01T12:35:00.000Z") << json;
  EXPECT_EQ(JsonField(json, "last_failure"), "2024-05-01T12:36:00.000Z") << json;
  EXPECT_EQ(JsonField(json, "id"), dl[0].event.id.ToString());
  EXPECT_EQ(JsonField(json, "payload_json"), "{\\\"amount\\\":12,\\\"note\\\":\\\"caf\xc3\xa9\\\"}") << json;
  EXPECT_NE(json.find("\"subject_version\":4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"attempts\":5"), std::string::npos) << json;
  EXPECT_EQ(json.find("payload_hex"), std::string::npos) << json;

  // Binary payloads, and JSON holding a control character, as capped hex.
  const std::string bin = DeadLetterJson(dl[1]);
  EXPECT_NE(bin.find("\"payload_size\":300"), std::string::npos) << bin;
  EXPECT_NE(bin.find("\"payload_truncated\":true"), std::string::npos) << bin;
  const std::string hex = JsonField(bin, "payload_hex");
  EXPECT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 8), "00010203");
  EXPECT_EQ(hex.substr(504), "fcfdfeff");
  const std::string ctl = DeadLetterJson(dl[2]);
  EXPECT_EQ(ctl.find("payload_json"), std::string::npos) << ctl;
  EXPECT_EQ(JsonField(ctl, "payload_hex"), "7b2261223a2201227d") << ctl;
  EXPECT_NE(ctl.find("\"payload_truncated\":false"), std::string::npos) << ctl;

  const std::string bad = DeadLetterJson(dl[3]);
  EXPECT_NE(bad.find("\"record_ok\":false"), std::string::npos) << bad;
  EXPECT_NE(bad.find("\"event_ok\":false"), std::string::npos) << bad;
  EXPECT_NE(JsonField(bad, "event_error"), "<missing>") << bad;
  const std::string unreadable = DeadLetterJson(dl[4]);
  EXPECT_NE(unreadable.find("\"record_ok\":true"), std::string::npos) << unreadable;
  EXPECT_NE(unreadable.find("\"event_ok\":false"), std::string::npos) << unreadable;

  // Text: control characters escaped, so one value stays on one line.
  const std::string text = DeadLetterText(dl[0]);
  EXPECT_NE(text.find(R"(say "hi"\nbye)"), std::string::npos) << text;
  EXPECT_NE(text.find("2024-05-01T12:34:56.789Z"), std::string::npos) << text;
  EXPECT_NE(text.find("JSON: {\"amount\":12"), std::string::npos) << text;
  EXPECT_NE(text.find("v2"), std::string::npos) << text;
  EXPECT_NE(DeadLetterText(dl[1]).find("300 bytes, hex (first 256): 00010203"), std::string::npos)
      << DeadLetterText(dl[1]);
  EXPECT_NE(DeadLetterText(dl[3]).find("unreadable"), std::string::npos) << DeadLetterText(dl[3]);

  const auto rows = Lines(DeadLetterTable(dl));
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].rfind("SUBSCRIBER", 0), 0u);
  EXPECT_NE(rows[1].find(R"(say "hi"\nbye)"), std::string::npos) << rows[1];
  EXPECT_NE(rows[1].find("tax service"), std::string::npos) << rows[1];
  EXPECT_EQ(rows[4].rfind("audit", 0), 0u) << rows[4];
  EXPECT_EQ(Lines(DeadLetterTable({})).size(), 1u);

  std::vector<QuarantineEntry> q;
  ASSERT_TRUE(ListQuarantine(dir.path(), &q, SIZE_MAX).ok());
  ASSERT_EQ(q.size(), 3u);
  const std::string qj = QuarantineJson(q[0]);
  EXPECT_EQ(qj.find('\n'), std::string::npos) << qj;
  EXPECT_EQ(JsonField(qj, "source"), "bridge:nats") << qj;
  EXPECT_EQ(JsonField(qj, "time"), "2024-05-01T12:34:56.789Z") << qj;
  EXPECT_NE(qj.find("\"original_size\":100000"), std::string::npos) << qj;
  EXPECT_NE(qj.find("\"raw_size\":300"), std::string::npos) << qj;
  EXPECT_NE(qj.find("\"raw_truncated\":true"), std::string::npos) << qj;
  EXPECT_EQ(JsonField(qj, "raw_hex").size(), 512u);
  const std::string qbad = QuarantineJson(q[1]);
  EXPECT_NE(qbad.find("\"record_ok\":false"), std::string::npos) << qbad;
  EXPECT_EQ(JsonField(qbad, "value_hex"), "07626164") << qbad;
  EXPECT_NE(QuarantineText(q[2]).find("3 bytes, hex: 616263"), std::string::npos) << QuarantineText(q[2]);
  EXPECT_NE(QuarantineText(q[0]).find("100000 bytes"), std::string::npos) << QuarantineText(q[0]);
  EXPECT_EQ(Lines(QuarantineTable(q)).size(), 4u);
}

TEST(InspectTest, CliListsAndShowsFailureStores) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(SeedFailureStores(dir.path()));
  const std::string d = dir.path();
  std::string out;
  EXPECT_EQ(RunCliOutput("dlq ls " + d, &out), 0);
  auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 6u) << out;
  EXPECT_NE(lines[1].find("invoicing"), std::string::npos) << out;
  EXPECT_EQ(RunCliOutput("dlq ls " + d + " --subscriber audit --json", &out), 0);
  lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  for (const auto& l : lines) EXPECT_EQ(l.rfind("{\"subscriber\":\"audit\"", 0), 0u) << l;
  EXPECT_EQ(RunCliOutput("dlq ls " + d + " --limit 2", &out), 0);
  EXPECT_EQ(Lines(out).size(), 3u) << out;
  EXPECT_EQ(RunCliOutput("dlq ls " + d + " --subscriber nobody", &out), 2);

  EXPECT_EQ(RunCliOutput("dlq show " + d + " --subscriber invoicing --seq 3", &out), 0);
  EXPECT_NE(out.find("2024-05-01T12:34:56.789Z"), std::string::npos) << out;
  EXPECT_EQ(RunCliOutput("dlq show " + d + " --subscriber invoicing --seq 3 --json", &out), 0);
  EXPECT_EQ(Lines(out).size(), 1u) << out;
  EXPECT_EQ(RunCliOutput("dlq show " + d + " --subscriber invoicing --seq 99", &out), 1);
  EXPECT_TRUE(out.empty()) << out;
  EXPECT_EQ(RunCliOutput("dlq show " + d + " --seq 3", &out), 2) << "--subscriber is required";
  EXPECT_EQ(RunCliOutput("dlq show " + dir.root() + "/missing --subscriber invoicing --seq 3", &out), 2);

  EXPECT_EQ(RunCliOutput("quarantine ls --json " + d, &out), 0);
  lines = Lines(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  for (const auto& l : lines) EXPECT_EQ(l.rfind("{\"arrival\":", 0), 0u) << l;
  EXPECT_EQ(RunCliOutput("quarantine ls " + d, &out), 0);
  EXPECT_EQ(Lines(out).size(), 4u) << out;
  EXPECT_EQ(RunCliOutput("quarantine show " + d + " --arrival 1", &out), 0);
  EXPECT_NE(out.find("bridge:nats"), std::string::npos) << out;
  EXPECT_EQ(RunCliOutput("quarantine show " + d + " --arrival 42", &out), 1);
  EXPECT_EQ(RunCli("dlq"), 2) << "a subcommand is required";
}

TEST(InspectTest, MetricsFromTheDatabasePassPromtool) {
  TempDir dir;
  Options o;
  o.dir = dir.path();
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(o, &bus).ok());
  ASSERT_NO_FATAL_FAILURE(BuildBacklog(*bus, "reporting", 3));
  DatabaseReport report;
  ASSERT_TRUE(InspectDatabase(dir.path(), &report).ok()) << "live, through a secondary instance";
  const std::string text = PrometheusText(ReportMetrics(report));
  EXPECT_NE(text.find("walbus_outbox_backlog_events 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("walbus_subscriber_lag_events{subscriber=\"reporting\"} 3\n"), std::string::npos) << text;
  ASSERT_TRUE(report.subscribers[0].lag_age_ms.has_value());
  EXPECT_EQ(RunCli("metrics " + dir.path()), 0);
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    EXPECT_EQ(RunCli("metrics " + dir.path() + " | promtool check metrics"), 0);
  }
}

}  // namespace
}  // namespace walbus::internal
