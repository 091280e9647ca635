// tools/walbus/inspect_events.cc and the walbus tool's event commands: the outbox
// with filters, one event's story, the inbox check, the subscribers' waiting
// work, and the CloudEvents export, checked by the official CloudEvents
// JavaScript SDK.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "bus/util/rfc3339.h"
#include "tests/payload_json.h"
#include "tests/test_util.h"
#include "tools/walbus/inspect.h"
#include "walbus/bus.h"

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;
using walbus::testing::TempDir;

constexpr char kPlaced[] = "orders.order-placed.v1";
constexpr char kConfirmed[] = "orders.order-confirmed.v1";
constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// A database with a story to tell: "confirm" handles every placed order and
// publishes a confirmation caused by it (on the same subject); "ledger"
// fails the front event of each of the four subjects (one retry record
// each), holds the rest behind them, and so keeps everything in the outbox.
struct Fixture {
  TempDir dir;
  EventId placed_json, placed_text, placed_binary, traced;
  std::chrono::system_clock::time_point before_text;

  Fixture() {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    SubscriberOptions confirm;
    confirm.name = "confirm";
    confirm.types = {kPlaced};
    confirm.handler = [](const Event& e, HandlerContext& ctx) {
      EventSpec c;
      c.type = kConfirmed;
      c.subject = e.subject;
      c.content_type = "application/json";
      c.data = "{\"confirmed\":true}";
      return ctx.Publish(c).ok() ? Outcome::Done() : Outcome::RetryAfter(1ms);
    };
    SubscriberOptions ledger;
    ledger.name = "ledger";
    ledger.retry.max_attempts = 1000;
    ledger.handler = [](const Event&, HandlerContext&) { return Outcome::RetryAfter(std::chrono::hours(1)); };
    EXPECT_TRUE(bus->Subscribe(std::move(confirm)).ok());
    EXPECT_TRUE(bus->Subscribe(std::move(ledger)).ok());
    EXPECT_TRUE(bus->Start().ok());
    placed_json = Publish(*bus, "order-1", "application/json", "{\"total\": 12.5, \"items\": [1, 2, {\"x\": null}]}");
    std::this_thread::sleep_for(5ms);
    before_text = std::chrono::system_clock::now();
    placed_text = Publish(*bus, "order-2", "text/plain", "two widgets, \"quoted\" and \u00fcnicode");
    std::string binary(300, '\0');
    std::mt19937 rng(7);
    for (char& c : binary) c = static_cast<char>(rng());
    placed_binary = Publish(*bus, "order-3", "application/octet-stream", binary);
    traced = Publish(*bus, "order-4", "application/json", "not json at all", kTraceparent, 7);
    // The confirmations are committed, and ledger has failed each event once.
    EXPECT_TRUE(testing::Eventually(
        [&] {
          for (const auto& s : bus->Stats().subscribers)
            if (s.name == "confirm" && s.handled < 4) return false;
          return true;
        },
        30s));
    EXPECT_TRUE(testing::Eventually(
        [&] {
          for (const auto& s : bus->Stats().subscribers)
            if (s.name == "ledger" && s.retries < 4) return false;
          return true;
        },
        30s));
    EXPECT_TRUE(bus->Close().ok());
  }

  static EventId Publish(Bus& bus, const std::string& subject, const std::string& content_type, const std::string& data,
                         const std::string& traceparent = {}, uint64_t subject_version = 0) {
    Transaction tx = bus.Begin();
    EventSpec e;
    e.type = kPlaced;
    e.subject = subject;
    e.content_type = content_type;
    e.data = data;
    e.traceparent = traceparent;
    e.subject_version = subject_version;
    auto id = tx.Publish(e);
    EXPECT_TRUE(id.ok());
    EXPECT_TRUE(tx.Commit().ok());
    return id.ok() ? *id : EventId{};
  }
};

int RunCli(const std::string& args, std::string* out = nullptr) {
  const std::string command = std::string(WALBUS_CLI) + " " + args + " 2>/dev/null";
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
    if (out != nullptr) out->append(buf, n);
  }
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(InspectEventsTest, OutboxListsWithFilters) {
  Fixture f;
  std::vector<OutboxEntry> all;
  ASSERT_TRUE(ListOutbox(f.dir.path(), OutboxFilter{}, &all, SIZE_MAX).ok());
  ASSERT_EQ(all.size(), 8u) << "four placed, four confirmations; ledger holds them all";
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq, i + 1);
    EXPECT_TRUE(all[i].event_ok);
  }
  std::vector<OutboxEntry> got;
  OutboxFilter by_type;
  by_type.type = kConfirmed;
  ASSERT_TRUE(ListOutbox(f.dir.path(), by_type, &got, SIZE_MAX).ok());
  EXPECT_EQ(got.size(), 4u);
  OutboxFilter by_subject;
  by_subject.subject = "order-2";
  ASSERT_TRUE(ListOutbox(f.dir.path(), by_subject, &got, SIZE_MAX).ok());
  EXPECT_EQ(got.size(), 2u) << "the placed event and its confirmation";
  OutboxFilter by_seq;
  by_seq.from_seq = 3;
  by_seq.to_seq = 5;
  ASSERT_TRUE(ListOutbox(f.dir.path(), by_seq, &got, SIZE_MAX).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got.front().seq, 3u);
  OutboxFilter by_time;
  by_time.type = kPlaced;
  by_time.since = f.before_text;
  ASSERT_TRUE(ListOutbox(f.dir.path(), by_time, &got, SIZE_MAX).ok());
  EXPECT_EQ(got.size(), 3u) << "placed events at or after the second";
  by_time.since.reset();
  by_time.until = f.before_text;
  ASSERT_TRUE(ListOutbox(f.dir.path(), by_time, &got, SIZE_MAX).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event.id, f.placed_json);
  ASSERT_TRUE(ListOutbox(f.dir.path(), OutboxFilter{}, &got, 2).ok());
  EXPECT_EQ(got.size(), 2u) << "the limit";

  std::string out;
  EXPECT_EQ(RunCli("outbox ls " + f.dir.path() + " --type " + kConfirmed + " --json", &out), 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4);
  EXPECT_EQ(RunCli("outbox ls " + f.dir.path() + " --since yesterday"), 2) << "a bad time is bad usage";
  out.clear();
  EXPECT_EQ(RunCli("outbox show " + f.dir.path() + " --seq 1", &out), 0);
  EXPECT_NE(out.find(f.placed_json.ToString()), std::string::npos) << out;
  EXPECT_EQ(RunCli("outbox show " + f.dir.path() + " --seq 99"), 1);
}

TEST(InspectEventsTest, EventStoryShowsEachSubscriberAndTheFollowUps) {
  Fixture f;
  EventStory story;
  bool found = false;
  ASSERT_TRUE(FindEventStory(f.dir.path(), f.placed_text, &story, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_TRUE(story.event_known);
  EXPECT_EQ(story.event.subject, "order-2");
  ASSERT_EQ(story.deliveries.size(), 2u);
  for (const DeliveryReport& d : story.deliveries) {
    if (d.subscriber == "confirm") {
      EXPECT_EQ(d.state, "handled");
      EXPECT_TRUE(d.handled_at_ms.has_value());
    } else {
      EXPECT_EQ(d.subscriber, "ledger");
      EXPECT_EQ(d.state, "retrying");
      EXPECT_GE(d.attempts, 1u);
    }
  }
  ASSERT_EQ(story.follow_ups.size(), 1u);
  EXPECT_EQ(story.follow_ups[0].event.type, kConfirmed);
  EXPECT_EQ(story.follow_ups[0].event.causation_id, f.placed_text);

  std::string out;
  EXPECT_EQ(RunCli("event " + f.dir.path() + " " + f.placed_text.ToString() + " --json", &out), 0);
  EXPECT_NE(out.find("\"state\":\"retrying\""), std::string::npos) << out;
  EXPECT_EQ(RunCli("event " + f.dir.path() + " " + EventId::Generate().ToString()), 1) << "an unknown id";
  EXPECT_EQ(RunCli("event " + f.dir.path() + " not-an-id"), 2);
}

// Attempts count handler runs, in the story as in HandlerContext::Attempt():
// one handled on its second run says so, and one retrying says when it
// runs next.
TEST(InspectEventsTest, EventStoryCountsRunsAndSaysWhenTheNextIsDue) {
  TempDir dir;
  std::string handled_id, retrying_id;
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    SubscriberOptions s;
    s.name = "billing";
    s.handler = [](const Event& e, HandlerContext& ctx) {
      if (e.subject == "order-1" && ctx.Attempt() < 2) return Outcome::RetryAfter(std::chrono::milliseconds(1));
      if (e.subject == "order-2") return Outcome::RetryAfter(std::chrono::hours(1));
      return Outcome::Done();
    };
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    ASSERT_TRUE(bus->Start().ok());
    for (const char* subject : {"order-1", "order-2"}) {
      Transaction tx = bus->Begin();
      EventSpec e;
      e.type = "orders.order-placed.v1";
      e.subject = subject;
      Result<EventId> id = tx.Publish(e);
      ASSERT_TRUE(id.ok());
      ASSERT_TRUE(tx.Commit().ok());
      (std::string(subject) == "order-1" ? handled_id : retrying_id) = id->ToString();
    }
    ASSERT_TRUE(testing::Eventually(
        [&] {
          Result<std::vector<DeliveryState>> pending = bus->Pending("billing", 0);
          return pending.ok() && pending->size() == 1 && (*pending)[0].state == Delivery::kRetrying;
        },
        std::chrono::seconds(10)));
    ASSERT_TRUE(bus->Close().ok());
  }
  std::string out;
  ASSERT_EQ(RunCli("event " + dir.path() + " " + handled_id, &out), 0);
  EXPECT_NE(out.find("handled at "), std::string::npos) << out;
  EXPECT_NE(out.find(", 2 attempts"), std::string::npos) << out;
  ASSERT_EQ(RunCli("event " + dir.path() + " " + retrying_id, &out), 0);
  EXPECT_NE(out.find("retrying, 1 attempt, next attempt at "), std::string::npos) << out;
  ASSERT_EQ(RunCli("event " + dir.path() + " " + retrying_id + " --json", &out), 0);
  EXPECT_EQ(out.find("\"next_attempt\":null"), std::string::npos) << out;
}

// A paused subscriber is visible: what it waits at, in Stats(), the
// metrics and `walbus subscribers` (from the stopped database too), with
// the registration it was last subscribed with.
TEST(InspectEventsTest, SubscribersShowAPauseAndTheStoredRegistration) {
  TempDir dir;
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    SubscriberOptions s;
    s.name = "v2-reader";
    s.types = {"orders.order-approved.v2"};
    s.handler_version = "reader-2.1";
    s.on_unknown_version = UnknownVersionPolicy::kPause;
    s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    ASSERT_TRUE(bus->Start().ok());
    Transaction tx = bus->Begin();
    EventSpec e;
    e.type = "orders.order-approved.v1";
    e.subject = "order-1";
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok());
    ASSERT_TRUE(testing::Eventually([&] { return bus->Stats().subscribers[0].paused; }, std::chrono::seconds(10)));
    EXPECT_EQ(bus->Stats().subscribers[0].paused_on, "orders.order-approved.v1");
    EXPECT_NE(bus->MetricsText().find(
                  "walbus_subscriber_paused_on_info{subscriber=\"v2-reader\",type=\"orders.order-approved.v1\"} 1"),
              std::string::npos);
    ASSERT_TRUE(bus->Close().ok());
  }
  std::string out;
  ASSERT_EQ(RunCli("subscribers " + dir.path(), &out), 0);
  EXPECT_NE(out.find("PAUSED ON"), std::string::npos) << out;
  EXPECT_NE(out.find("orders.order-approved.v1 at seq 1"), std::string::npos) << out;
  EXPECT_NE(out.find("v2-reader: types orders.order-approved.v2; handler version reader-2.1; not side-effect-safe"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunCli("subscribers " + dir.path() + " --json", &out), 0);
  EXPECT_NE(out.find("\"paused_on\":{\"seq\":1,\"type\":\"orders.order-approved.v1\"}"), std::string::npos) << out;
  EXPECT_NE(out.find("\"registration\":{\"types\":[\"orders.order-approved.v2\"],\"handler_version\":\"reader-2.1\","
                     "\"side_effect_safe\":false}"),
            std::string::npos)
      << out;
}

TEST(InspectEventsTest, SubscribersNameTypesWithoutASchema) {
  TempDir dir;
  const std::string source =
      "namespace orders; table OrderApproved { order_id: string; } root_type OrderApproved; "
      "file_identifier \"ORDA\";";
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_TRUE(
        bus->Contracts().RegisterSchema("orders.order-approved.v1", testing::BinarySchemaFromSource(source)).ok());
    SubscriberOptions s;
    s.name = "billing";
    s.types = {"orders.order-approved.v1", "orders.order-aproved.v1"};
    s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  std::string out;
  ASSERT_EQ(RunCli("subscribers " + dir.path(), &out), 0);
  EXPECT_NE(out.find("; no schema (nothing can publish it under require_schemas): orders.order-aproved.v1\n"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunCli("subscribers " + dir.path() + " --json", &out), 0);
  EXPECT_NE(out.find("\"types_without_schema\":[\"orders.order-aproved.v1\"]"), std::string::npos) << out;
}

TEST(InspectEventsTest, SubscribersRemoveTakesOneAwayOnAStoppedDatabase) {
  TempDir dir;
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    for (const char* name : {"billing", "biling"}) {
      SubscriberOptions s;
      s.name = name;
      s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
      ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    }
    ASSERT_TRUE(bus->Close().ok());
  }
  const std::string remove = "subscribers remove " + dir.path() + " biling";
  EXPECT_EQ(RunCli(remove), 2) << "an operator action needs who and why";
  EXPECT_EQ(RunCli("subscribers"), 2) << "listing needs DIR";
  std::string out;
  ASSERT_EQ(RunCli(remove + " --operator ann --reason typo --dry-run --json", &out), 0);
  EXPECT_NE(out.find("\"dry_run\":true,\"action_id\":0"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(RunCli(remove + " --operator ann --reason typo --json", &out), 0);
  EXPECT_NE(out.find("\"action\":\"subscriber-remove\",\"subscriber\":\"biling\""), std::string::npos) << out;
  EXPECT_EQ(RunCli(remove + " --operator ann --reason again"), 1) << "no longer there";
  out.clear();
  ASSERT_EQ(RunCli("subscribers " + dir.path() + " --json", &out), 0);
  EXPECT_NE(out.find("\"billing\""), std::string::npos) << out;
  EXPECT_EQ(out.find("\"biling\""), std::string::npos) << out;
}

TEST(InspectEventsTest, InboxCheckSaysWhetherASubscriberCompletedAnEvent) {
  Fixture f;
  bool handled = false;
  uint64_t seq = 0;
  int64_t at = 0;
  ASSERT_TRUE(CheckInbox(f.dir.path(), "confirm", f.placed_json, &handled, &seq, &at).ok());
  EXPECT_TRUE(handled);
  EXPECT_EQ(seq, 1u);
  EXPECT_GT(at, 0);
  ASSERT_TRUE(CheckInbox(f.dir.path(), "ledger", f.placed_json, &handled, &seq, &at).ok());
  EXPECT_FALSE(handled);
  EXPECT_EQ(CheckInbox(f.dir.path(), "nobody", f.placed_json, &handled, &seq, &at).code(),
            Status::Code::kInvalidArgument);
  const std::string id = f.placed_json.ToString();
  EXPECT_EQ(RunCli("inbox check " + f.dir.path() + " --subscriber confirm --event " + id), 0);
  EXPECT_EQ(RunCli("inbox check " + f.dir.path() + " --subscriber ledger --event " + id), 1);
  EXPECT_EQ(RunCli("inbox check " + f.dir.path() + " --subscriber nobody --event " + id), 2);
}

// An event of a type the subscriber does not take is passed, not
// handled: `inbox check` says so with the word `walbus event` uses, exit 0.
TEST(InspectEventsTest, InboxCheckSaysPassedForATypeTheSubscriberDoesNotTake) {
  TempDir dir;
  EventId confirmation;
  {
    // Registered and never run again: it keeps the event in the outbox.
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    SubscriberOptions holder;
    holder.name = "holder";
    holder.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    ASSERT_TRUE(bus->Subscribe(std::move(holder)).ok());
  }
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    SubscriberOptions placed_only;
    placed_only.name = "placed-only";
    placed_only.types = {kPlaced};
    placed_only.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    ASSERT_TRUE(bus->Subscribe(std::move(placed_only)).ok());
    ASSERT_TRUE(bus->Start().ok());
    Transaction tx = bus->Begin();
    auto id = tx.Publish(EventSpec{.type = kConfirmed, .subject = "order-1"});
    ASSERT_TRUE(id.ok());
    confirmation = *id;
    ASSERT_TRUE(tx.Commit().ok());
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  std::string out;
  const std::string args = "inbox check " + dir.path() + " --subscriber placed-only --event " + confirmation.ToString();
  ASSERT_EQ(RunCli(args, &out), 0) << out;
  EXPECT_NE(out.find("placed-only passed event " + confirmation.ToString()), std::string::npos) << out;
  ASSERT_EQ(RunCli(args + " --json", &out), 0) << out;
  EXPECT_NE(out.find("\"state\":\"passed\""), std::string::npos) << out;
  ASSERT_EQ(RunCli("event " + dir.path() + " " + confirmation.ToString(), &out), 0) << out;
  EXPECT_NE(out.find("passed"), std::string::npos) << out;
}

TEST(InspectEventsTest, SubscribersShowTheWorkWaiting) {
  Fixture f;
  std::vector<SubscriberDetail> subscribers;
  ASSERT_TRUE(ListSubscribers(f.dir.path(), &subscribers).ok());
  ASSERT_EQ(subscribers.size(), 2u);
  for (const SubscriberDetail& d : subscribers) {
    if (d.report.name == "ledger") {
      EXPECT_EQ(d.retrying, 4u) << "one retry record per subject's front event";
      EXPECT_EQ(d.report.checkpoint, 0u);
    } else {
      EXPECT_EQ(d.retrying, 0u);
      EXPECT_EQ(d.report.handled, 4u);
    }
  }
  std::string out;
  EXPECT_EQ(RunCli("subscribers " + f.dir.path(), &out), 0);
  EXPECT_NE(out.find("RETRYING"), std::string::npos) << out;
}

TEST(InspectEventsTest, CloudEventJsonCarriesDataInTheRightForm) {
  Event e;
  e.id = EventId::Generate();
  e.type = kPlaced;
  e.source = "device-7";
  e.subject = "order-1";
  e.time = std::chrono::system_clock::now();
  e.seq = 12;
  e.content_type = "application/json";
  e.data = "{\"a\": [1, 2.5e3, true, null, \"x\\u00e9\"]}";
  std::string json = CloudEventJson(e, {}, false);
  EXPECT_NE(json.find(",\"data\":{\"a\": [1, 2.5e3, true, null, \"x\\u00e9\"]}}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"walbusseq\":\"12\""), std::string::npos) << json;
  for (const char* not_json : {"{\"a\":", "[1,]", "01", "\"unterminated", "{} {}", "nul"}) {
    e.data = not_json;
    json = CloudEventJson(e, {}, false);
    EXPECT_NE(json.find("\"data_base64\":"), std::string::npos) << not_json << " -> " << json;
  }
  e.content_type = "text/plain";
  e.data = "plain text";
  EXPECT_NE(CloudEventJson(e, {}, false).find(",\"data\":\"plain text\""), std::string::npos);
  e.data = std::string("\x00\xff", 2);
  EXPECT_NE(CloudEventJson(e, {}, false).find("\"data_base64\":\"AP8=\""), std::string::npos);
  std::chrono::system_clock::time_point t;
  const std::string time =
      CloudEventJson(e, {}, false).substr(CloudEventJson(e, {}, false).find("\"time\":\"") + 8, 27);
  ASSERT_TRUE(ParseRfc3339(time, &t)) << time;
  EXPECT_EQ(std::chrono::floor<std::chrono::microseconds>(t), std::chrono::floor<std::chrono::microseconds>(e.time));
}

// The official CloudEvents JavaScript SDK (npm package `cloudevents`,
// installed by the CloudEventsSdk test fixture) validates every exported
// event and round-trips it through both HTTP modes.
TEST(InspectEventsTest, ExportValidatesWithTheCloudEventsSdk) {
  Fixture f;
  const std::string file = f.dir.root() + "/export.jsonl";
  ASSERT_EQ(RunCli("export " + f.dir.path() + " --format cloudevents-json --limit 0 > " + file), 0);
  const std::string command = "NODE_PATH=" WALBUS_CE_NODE_PATH " node " WALBUS_CE_CHECK " " + file;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("8 events valid and round-tripped (5 JSON data, 1 text, 2 binary)"), std::string::npos) << out;
}

}  // namespace
}  // namespace walbus::internal
