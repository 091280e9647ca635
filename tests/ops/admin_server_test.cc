// bus/ops/admin_server.cc: the admin socket (Options::admin_socket), its request
// format, and the walbus tool's actions through it or on a stopped
// database.
#include "bus/ops/admin_server.h"
#include "tools/walbus/admin_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "storage/db.h"
#include "tests/test_util.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/inspect_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using Fields = std::vector<std::pair<std::string, std::string>>;

std::string SocketPath(const TempDir& dir) { return internal::AdminSocketPath(dir.path()); }

sockaddr_un Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof addr.sun_path - 1));
  return addr;
}

// Sends `request` as is to the socket at `path` and returns the whole
// reply; empty when nobody listens. With `half_close`, the sending side is
// shut down after the request (a client that says it is done).
std::string Exchange(const std::string& path, std::string_view request, bool half_close = false) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  const sockaddr_un addr = Address(path);
  std::string reply;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    if (half_close) ::shutdown(fd, SHUT_WR);
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

std::string Request(std::string_view verb, const Fields& fields) { return internal::FormatAdminRequest(verb, fields); }

size_t DeadLetters(const TempDir& dir, const std::string& subscriber) {
  std::vector<internal::DeadLetterEntry> entries;
  Status s = internal::ListDeadLetters(dir.path(), subscriber, &entries, SIZE_MAX);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return entries.size();
}

// Operator action records (walbus.replays), read as the walbus tool reads.
size_t ActionRecords(const TempDir& dir) {
  internal::inspect_util::SecondaryView view;
  Status s = internal::inspect_util::OpenSecondary(dir.path(), &view);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return SIZE_MAX;
  size_t n = 0;
  s = view.db->Scan(storage::Cf::kReplays, {}, SIZE_MAX, [&](std::string_view, std::string_view) {
    ++n;
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return n;
}

void Publish(Bus& bus, const std::string& subject, const std::string& data) {
  Transaction tx = bus.Begin();
  EventSpec e;
  e.type = "orders.order-placed.v1";
  e.subject = subject;
  e.data = data;
  ASSERT_TRUE(tx.Publish(e).ok());
  ASSERT_TRUE(tx.Commit().ok());
}

Options AdminOptions(const TempDir& dir) {
  Options o = testing::TestOptions(dir);
  o.admin_socket = true;
  return o;
}

// A subscriber that rejects every event (each becomes a dead letter).
SubscriberOptions Rejecting(const std::string& name) {
  SubscriberOptions s;
  s.name = name;
  s.retry.max_attempts = 1;
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Reject("refused on purpose"); };
  return s;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(AdminTest, SocketIsPrivateAnswersPingAndGoesAwayOnClose) {
  TempDir dir;
  auto bus = testing::OpenBus(AdminOptions(dir));
  ASSERT_NE(bus, nullptr);
  struct stat st;
  ASSERT_EQ(::lstat(SocketPath(dir).c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".a")) << "the private bind directory is gone";
  }

  EXPECT_EQ(Exchange(SocketPath(dir), "ping\n\n"), "ok\n{\"pong\":true,\"pid\":" + std::to_string(::getpid()) + "}\n");
  std::string reply;
  bool listening = false;
  ASSERT_TRUE(internal::CallAdminSocket(dir.path(), Request("ping", {}), &reply, &listening).ok());
  EXPECT_TRUE(listening);
  internal::AdminReply parsed;
  ASSERT_TRUE(internal::ParseAdminReply(reply, &parsed).ok()) << reply;
  EXPECT_TRUE(parsed.status.ok());
  EXPECT_TRUE(parsed.body.starts_with("{\"pong\":true")) << parsed.body;

  ASSERT_TRUE(bus->Close().ok());
  EXPECT_NE(::lstat(SocketPath(dir).c_str(), &st), 0) << "the socket file goes with the bus";
  EXPECT_TRUE(internal::CallAdminSocket(dir.path(), Request("ping", {}), &reply, &listening).ok());
  EXPECT_FALSE(listening) << "nobody listens once the bus is closed";
}

TEST(AdminTest, StaleSocketIsReplacedButALiveOneOrAnotherFileIsNot) {
  TempDir dir;
  ASSERT_NE(testing::OpenBus(testing::TestOptions(dir)), nullptr);  // the database, closed again
  const std::string path = SocketPath(dir);
  const sockaddr_un addr = Address(path);

  // Left by a process that was killed: bound, never unlinked, nobody home.
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
  {
    auto bus = testing::OpenBus(AdminOptions(dir));
    ASSERT_NE(bus, nullptr) << "a stale socket file is replaced";
    EXPECT_TRUE(Exchange(path, "ping\n\n").starts_with("ok\n"));
  }

  // Somebody answers there: the bus does not take the path from it.
  fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  struct stat before, after;
  ASSERT_EQ(::lstat(path.c_str(), &before), 0);
  std::unique_ptr<Bus> bus;
  Status s = Bus::Open(AdminOptions(dir), &bus);
  EXPECT_EQ(s.code(), Status::Code::kBusy) << s.ToString();
  ASSERT_EQ(::lstat(path.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "the live socket is left alone";
  ::close(fd);
  ::unlink(path.c_str());

  // Not a socket at all: refused, and kept.
  {
    std::ofstream f(path);
    f << "notes";
  }
  s = Bus::Open(AdminOptions(dir), &bus);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not a socket")) << s.ToString();
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
  ::unlink(path.c_str());

  // A path longer than a socket address holds.
  Options deep = AdminOptions(dir);
  deep.dir = dir.root() + "/" + std::string(120, 'd');
  s = Bus::Open(deep, &bus);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "Unix socket path holds at most")) << s.ToString();
}

TEST(AdminTest, MalformedRequestsGetAnErrorAndChangeNothing) {
  TempDir dir;
  auto bus = testing::OpenBus(AdminOptions(dir));
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->Subscribe(Rejecting("invoicing")).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "a");
  Publish(*bus, "order-2", "b");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  ASSERT_EQ(DeadLetters(dir, "invoicing"), 2u);
  ASSERT_EQ(ActionRecords(dir), 0u);

  // Each is a purge of every dead letter, or a replay, spoiled in one way.
  const std::string head = "dlq-purge\nsubscriber=invoicing\n";
  const std::string tail = "operator=alice\nreason=cleanup\n\n";
  const std::string purge_all = head + "all=true\n" + tail;
  const std::string replay = "replay\nsubscriber=invoicing\noperator=alice\nreason=rerun\n";
  struct Malformed {
    std::string what, request, says;  // `says`: a part of the error message
  };
  const std::vector<Malformed> malformed = {
      {"unknown verb", "dlq-purge-all\nsubscriber=invoicing\nall=true\n" + tail, "unknown verb 'dlq-purge-all'"},
      {"verb in capitals", "DLQ-PURGE\nsubscriber=invoicing\nall=true\n" + tail, "unknown verb 'DLQ-PURGE'"},
      {"empty verb line", "\n\n", "unknown verb ''"},
      {"unknown key", head + "all=true\ncolor=red\n" + tail, "unknown key 'color' for dlq-purge"},
      {"key of another verb", head + "all=true\nmode=same-inbox\n" + tail, "unknown key 'mode' for dlq-purge"},
      {"not key=value", head + "all\n" + tail, "'all' is not key=value"},
      {"duplicate subscriber", head + "subscriber=invoicing\nall=true\n" + tail, "subscriber is given twice"},
      {"duplicate all", head + "all=true\nall=true\n" + tail, "all is given twice"},
      {"duplicate operator", head + "all=true\noperator=bob\n" + tail, "operator is given twice"},
      {"letters in a number", head + "seq=1x\n" + tail, "seq '1x' is not a number"},
      {"negative number", head + "seq=-1\n" + tail, "seq '-1' is not a number"},
      {"signed number", head + "seq=+1\n" + tail, "seq '+1' is not a number"},
      {"space in a number", head + "seq= 1\n" + tail, "seq ' 1' is not a number"},
      {"hex number", head + "seq=0x1\n" + tail, "seq '0x1' is not a number"},
      {"number out of range", head + "seq=99999999999999999999999\n" + tail, "is not a number"},
      {"seq 0", head + "seq=0\n" + tail, "seq 0 is no event"},
      {"oversized request", head + "all=true\noperator=alice\nreason=" + std::string(70 << 10, 'x') + "\n\n",
       "larger than 65536 bytes"},
      {"oversized value", head + "all=true\noperator=alice\nreason=" + std::string(2000, 'x') + "\n\n",
       "reason is longer than 1024 bytes"},
      {"missing operator", head + "all=true\nreason=cleanup\n\n", "operator and reason are required"},
      {"missing reason", head + "all=true\noperator=alice\n\n", "operator and reason are required"},
      {"control character in operator", head + "all=true\noperator=al%0Aice\nreason=cleanup\n\n",
       "without control characters"},
      {"subscriber with a space", "dlq-purge\nsubscriber=in voicing\nall=true\n" + tail, "not a subscriber name"},
      {"subscriber with a slash", "dlq-purge\nsubscriber=../invoicing\nall=true\n" + tail, "not a subscriber name"},
      {"subscriber too long", "dlq-purge\nsubscriber=" + std::string(129, 'a') + "\nall=true\n" + tail,
       "not a subscriber name"},
      {"no subscriber", "dlq-purge\nall=true\n" + tail, "subscriber is required"},
      {"no selection", head + tail, "a selection is required"},
      {"all and seq", head + "all=true\nseq=1\n" + tail, "give no seq, type or subject"},
      {"seq and subject", head + "seq=1\nsubject=order-1\n" + tail, "give no type or subject with it"},
      {"all=false", head + "all=false\n" + tail, "all must be true"},
      {"bad type", head + "type=Orders\n" + tail, "type 'Orders' is not an event type"},
      {"empty value", head + "subject=\n" + tail, "subject is empty"},
      {"dry-run=yes", head + "all=true\ndry-run=yes\n" + tail, "dry-run must be true or false"},
      {"bad escape", head + "all=true\noperator=alice\nreason=100%\n\n", "bad escape in reason"},
      {"CRLF line ends", "dlq-purge\r\nsubscriber=invoicing\r\nall=true\r\noperator=alice\r\nreason=x\r\n\n",
       "not \\r\\n"},
      {"raw CR in a value", head + "all=true\noperator=alice\nreason=a\rb\n\n", "no raw CR"},
      {"bytes after the empty line", purge_all + "dlq-purge\n", "bytes follow the request's empty line"},
      {"bad event id", replay + "id=not-an-event-id\n\n", "id 'not-an-event-id' is not an event id"},
      {"nil event id", replay + "id=00000000-0000-0000-0000-000000000000\n\n", "is not an event id"},
      {"bad time", replay + "since=yesterday\n\n", "since 'yesterday' is not an RFC 3339 time"},
      {"impossible date", replay + "until=2026-13-01T00:00:00Z\n\n", "is not an RFC 3339 time"},
      {"since after until", replay + "since=2026-02-01T00:00:00Z\nuntil=2026-01-01T00:00:00Z\n\n",
       "since is not before until"},
      {"unknown mode", replay + "mode=sideways\n\n", "mode must be same-inbox or fresh-scope"},
      {"from-seq above to-seq", replay + "from-seq=9\nto-seq=3\n\n", "from-seq is above to-seq"},
      {"negative max", replay + "max=-1\n\n", "max '-1' is not a number"},
      {"duplicate subject", replay + "subject=a\nsubject=b\n\n", "subject is given twice"},
      {"replay without operator", "replay\nsubscriber=invoicing\nreason=rerun\n\n", "operator and reason are required"},
      {"cancel without reason", "replay-cancel\nreplay=1\noperator=alice\n\n", "operator and reason are required"},
      {"status of replay 0", "replay-status\nreplay=0\n\n", "replay 0 is no replay"},
      {"status of a word", "replay-status\nreplay=last\n\n", "replay 'last' is not a number"},
      {"ping with a key", "ping\nx=1\n\n", "unknown key 'x' for ping"},
  };
  for (const Malformed& m : malformed) {
    const std::string reply = Exchange(SocketPath(dir), m.request);
    EXPECT_TRUE(reply.starts_with("error InvalidArgument\n")) << m.what << ": " << reply.substr(0, 200);
    EXPECT_TRUE(Contains(reply, m.says)) << m.what << ": " << reply.substr(0, 200);
    internal::AdminRequest parsed;
    EXPECT_TRUE(internal::ParseAdminRequest(m.request, &parsed).IsInvalidArgument()) << m.what;
  }
  // Cut short: the client says it is done before the empty line.
  EXPECT_EQ(Exchange(SocketPath(dir), head + "all=true\n" + "operator=alice\nreason=x\n", /*half_close=*/true),
            "error InvalidArgument\nthe request ends before its empty line\n");

  EXPECT_EQ(DeadLetters(dir, "invoicing"), 2u) << "no malformed request purged anything";
  EXPECT_EQ(ActionRecords(dir), 0u) << "nor recorded an action";

  // The same request, well formed, does what the spoiled ones did not.
  EXPECT_TRUE(Exchange(SocketPath(dir), purge_all).starts_with("ok\n"));
  EXPECT_EQ(DeadLetters(dir, "invoicing"), 0u);
  EXPECT_EQ(ActionRecords(dir), 1u);
}

TEST(AdminTest, RedriveThroughTheSocketRunsTheDeadLetterAgain) {
  TempDir dir;
  auto bus = testing::OpenBus(AdminOptions(dir));
  ASSERT_NE(bus, nullptr);
  std::atomic<int> handled{0};
  std::mutex mu;
  std::set<EventId> refused;  // each event is refused once, then handled
  SubscriberOptions s;
  s.name = "billing";
  s.retry.max_attempts = 1;
  s.handler = [&](const Event& e, HandlerContext&) {
    std::lock_guard<std::mutex> lock(mu);
    if (refused.insert(e.id).second) return Outcome::Reject("the rate table is missing");
    ++handled;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "order-1", "100");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  ASSERT_EQ(DeadLetters(dir, "billing"), 1u);
  EXPECT_EQ(handled.load(), 0);

  const Fields who = {{"operator", "alice"}, {"reason", "rate table restored\n(ticket 12, 100% sure)"}};
  Fields dry = {{"subscriber", "billing"}, {"seq", "1"}};
  dry.insert(dry.end(), who.begin(), who.end());
  dry.emplace_back("dry-run", "true");
  EXPECT_EQ(Exchange(SocketPath(dir), Request("dlq-redrive", dry)),
            "ok\n{\"action\":\"redrive\",\"subscriber\":\"billing\",\"dry_run\":true,\"action_id\":0,\"seqs\":[1],"
            "\"released_subjects\":[]}\n");
  EXPECT_EQ(DeadLetters(dir, "billing"), 1u) << "a dry run changes nothing";
  EXPECT_EQ(ActionRecords(dir), 0u);

  Fields real = {{"subscriber", "billing"}, {"seq", "1"}};
  real.insert(real.end(), who.begin(), who.end());
  const std::string reply = Exchange(SocketPath(dir), Request("dlq-redrive", real));
  EXPECT_EQ(reply,
            "ok\n{\"action\":\"redrive\",\"subscriber\":\"billing\",\"dry_run\":false,\"action_id\":1,\"seqs\":[1],"
            "\"released_subjects\":[]}\n");
  ASSERT_TRUE(testing::Eventually([&] { return handled.load() == 1; }, 10s)) << "the dead letter ran again";
  ASSERT_TRUE(testing::Eventually([&] { return DeadLetters(dir, "billing") == 0; }, 10s));
  EXPECT_EQ(ActionRecords(dir), 1u);
  EXPECT_EQ(bus->Stats().subscribers[0].handled, 1u);

  // The bus's own refusals come back with their code.
  real[0].second = "nobody";
  EXPECT_EQ(Exchange(SocketPath(dir), Request("dlq-redrive", real)),
            "error InvalidArgument\nno subscriber named nobody\n");
}

TEST(AdminTest, SkipAndPurgeThroughTheSocket) {
  TempDir dir;
  auto bus = testing::OpenBus(AdminOptions(dir));
  ASSERT_NE(bus, nullptr);
  std::mutex mu;
  std::vector<std::string> done;
  SubscriberOptions s;
  s.name = "ledger";
  s.retry.max_attempts = 1;
  s.on_poison = PoisonPolicy::kParkKey;
  s.handler = [&](const Event& e, HandlerContext&) {
    if (e.data == "poison") return Outcome::Reject("cannot parse");
    std::lock_guard<std::mutex> lock(mu);
    done.push_back(e.subject + ":" + e.data);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, "acct-1", "poison");
  Publish(*bus, "acct-1", "held");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  ASSERT_EQ(DeadLetters(dir, "ledger"), 2u) << "the poison and the event parked behind it";

  const Fields who = {{"operator", "bob"}, {"reason", "account closed"}};
  Fields skip = {{"subscriber", "ledger"}, {"subject", "acct-1"}};
  skip.insert(skip.end(), who.begin(), who.end());
  EXPECT_EQ(Exchange(SocketPath(dir), Request("dlq-skip", skip)),
            "ok\n{\"action\":\"skip\",\"subscriber\":\"ledger\",\"dry_run\":false,\"action_id\":1,\"seqs\":[1,2],"
            "\"released_subjects\":[\"acct-1\"]}\n");
  Publish(*bus, "acct-1", "after");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(done, std::vector<std::string>{"acct-1:after"}) << "released, and the skipped ones did not run";
  }
  EXPECT_EQ(DeadLetters(dir, "ledger"), 2u) << "skipped dead letters stay";

  Fields purge = {{"subscriber", "ledger"}, {"seq", "2"}, {"seq", "1"}};
  purge.insert(purge.end(), who.begin(), who.end());
  EXPECT_EQ(Exchange(SocketPath(dir), Request("dlq-purge", purge)),
            "ok\n{\"action\":\"purge\",\"subscriber\":\"ledger\",\"dry_run\":false,\"action_id\":2,\"seqs\":[1,2],"
            "\"released_subjects\":[]}\n");
  EXPECT_EQ(DeadLetters(dir, "ledger"), 0u);
  EXPECT_EQ(ActionRecords(dir), 2u);
}

TEST(AdminTest, RequestTextAndRepliesRoundTrip) {
  // Values keep '%', line breaks and '=' through the escapes.
  const std::string reason = "50% done\r\nsee a=b";
  internal::AdminRequest r;
  ASSERT_TRUE(internal::ParseAdminRequest(Request("dlq-skip", {{"subscriber", "s.1_x-y"},
                                                               {"type", "orders.order-placed.v2"},
                                                               {"subject", "order=7"},
                                                               {"operator", "ops team"},
                                                               {"reason", reason}}),
                                          &r)
                  .ok());
  EXPECT_EQ(r.verb, internal::AdminVerb::kDlqSkip);
  EXPECT_EQ(r.selection.subscriber, "s.1_x-y");
  EXPECT_EQ(r.selection.type, "orders.order-placed.v2");
  EXPECT_EQ(r.selection.subject, "order=7");
  EXPECT_TRUE(r.selection.seqs.empty());
  EXPECT_EQ(r.action.operator_name, "ops team");
  EXPECT_EQ(r.action.reason, reason);
  EXPECT_FALSE(r.action.dry_run);

  internal::AdminReply reply;
  ASSERT_TRUE(internal::ParseAdminReply("ok\n{\"a\":1}\n", &reply).ok());
  EXPECT_TRUE(reply.status.ok());
  EXPECT_EQ(reply.body, "{\"a\":1}");
  ASSERT_TRUE(internal::ParseAdminReply("error NotFound\nno replay 7\n", &reply).ok());
  EXPECT_EQ(reply.status.code(), Status::Code::kNotFound);
  EXPECT_EQ(reply.status.message(), "no replay 7");
  EXPECT_FALSE(internal::ParseAdminReply("error Teapot\nshort and stout\n", &reply).ok());
  EXPECT_FALSE(internal::ParseAdminReply("HTTP/1.1 200 OK\r\n", &reply).ok());

  EXPECT_EQ(internal::AdminReplyText("{\"action_id\":3,\"seqs\":[1,2],\"released_subjects\":[],"
                                     "\"error\":\"line\\nbreak\",\"ended\":null}"),
            "action id        3\n"
            "seqs             1, 2\n"
            "released subjects  none\n"
            "error            line\\nbreak\n"
            "ended            -\n");
}

TEST(AdminTest, ReplayRequestsAreParsedIntoTheirFields) {
  internal::AdminRequest r;
  const std::string id1 = EventId::Generate().ToString(), id2 = EventId::Generate().ToString();
  ASSERT_TRUE(internal::ParseAdminRequest(Request("replay", {{"subscriber", "projections"},
                                                             {"mode", "fresh-scope"},
                                                             {"from-seq", "10"},
                                                             {"to-seq", "0020"},
                                                             {"since", "2026-01-01T00:00:00Z"},
                                                             {"until", "2026-01-02T01:00:00+01:00"},
                                                             {"type", "orders.order-placed.v1"},
                                                             {"type", "orders.order-paid.v1"},
                                                             {"subject", "order-9"},
                                                             {"id", id1},
                                                             {"id", id2},
                                                             {"max", "500"},
                                                             {"clear", "order-view"},
                                                             {"clear", "order-totals"},
                                                             {"operator", "carol"},
                                                             {"reason", "projection schema changed"},
                                                             {"dry-run", "true"}}),
                                          &r)
                  .ok());
  ASSERT_EQ(r.verb, internal::AdminVerb::kReplay);
  const ReplayRequest& q = r.replay;
  EXPECT_EQ(q.subscriber, "projections");
  EXPECT_EQ(q.mode, ReplayMode::kFreshScope);
  EXPECT_EQ(q.from_seq, 10u);
  EXPECT_EQ(q.to_seq, 20u);
  EXPECT_EQ(q.until - q.since, std::chrono::hours(24));
  EXPECT_EQ(q.types, (std::vector<std::string>{"orders.order-placed.v1", "orders.order-paid.v1"}));
  EXPECT_EQ(q.subject, "order-9");
  ASSERT_EQ(q.ids.size(), 2u);
  EXPECT_EQ(q.ids[0].ToString(), id1);
  EXPECT_EQ(q.ids[1].ToString(), id2);
  EXPECT_EQ(q.max_events, 500u);
  EXPECT_EQ(q.clear_column_families, (std::vector<std::string>{"order-view", "order-totals"}));
  EXPECT_EQ(q.action.operator_name, "carol");
  EXPECT_TRUE(q.action.dry_run);

  ASSERT_TRUE(internal::ParseAdminRequest(
                  Request("replay-cancel", {{"replay", "4"}, {"operator", "carol"}, {"reason", "wrong range"}}), &r)
                  .ok());
  EXPECT_EQ(r.verb, internal::AdminVerb::kReplayCancel);
  EXPECT_EQ(r.replay_id, 4u);
  EXPECT_EQ(r.action.operator_name, "carol") << "recorded with the cancelled replay";
  EXPECT_EQ(r.action.reason, "wrong range");
  ASSERT_TRUE(internal::ParseAdminRequest(Request("replay-status", {{"replay", "4"}}), &r).ok());
  EXPECT_EQ(r.verb, internal::AdminVerb::kReplayStatus);
  EXPECT_EQ(r.replay_id, 4u);
}

// The walbus tool. Returns its exit code; *out gets its standard output,
// and its standard error too with `with_stderr`.
int Cli(const std::string& args, std::string* out, bool with_stderr = false) {
  out->clear();
  FILE* p = popen((std::string(WALBUS_CLI) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int rc = pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(AdminTest, CliActsThroughTheSocketAndOnAStoppedDatabase) {
  TempDir dir;
  const std::string who = " --operator alice --reason 'duplicate orders'";
  std::string out;
  {
    auto bus = testing::OpenBus(AdminOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Rejecting("invoicing")).ok());
    ASSERT_TRUE(bus->Start().ok());
    for (const char* subject : {"order-1", "order-2", "order-3"}) Publish(*bus, subject, "x");
    ASSERT_TRUE(bus->WaitIdle(10s).ok());
    ASSERT_EQ(DeadLetters(dir, "invoicing"), 3u);

    // The database is locked by this process: only the socket reaches it.
    EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber invoicing --all --dry-run --json" + who, &out), 0);
    EXPECT_EQ(out,
              "{\"action\":\"purge\",\"subscriber\":\"invoicing\",\"dry_run\":true,\"action_id\":0,\"seqs\":[1,2,3],"
              "\"released_subjects\":[]}\n");
    EXPECT_EQ(DeadLetters(dir, "invoicing"), 3u);

    EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber invoicing --seq 1 --json" + who, &out), 0);
    EXPECT_TRUE(Contains(out, "\"action_id\":1,\"seqs\":[1]")) << out;
    EXPECT_EQ(DeadLetters(dir, "invoicing"), 2u);

    EXPECT_EQ(Cli("dlq skip " + dir.path() + " --subscriber invoicing --subject order-2" + who, &out), 0);
    EXPECT_TRUE(Contains(out, "action id        2\n")) << out;
    EXPECT_TRUE(Contains(out, "seqs             2\n")) << out;

    EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber invoicing" + who, &out, true), 2) << out;
    EXPECT_TRUE(Contains(out, "choose the dead letters")) << out;
    EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber invoicing --seq 2x" + who, &out, true), 2) << out;
    EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber nobody --all" + who, &out, true), 1) << out;
    EXPECT_TRUE(Contains(out, "no subscriber named nobody")) << out;
    ASSERT_TRUE(bus->Close().ok());
  }

  // Nobody holds the database: the tool opens it itself.
  EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber invoicing --all --json" + who, &out), 0);
  EXPECT_TRUE(Contains(out, "\"action_id\":3,\"seqs\":[2,3]")) << out;
  EXPECT_EQ(DeadLetters(dir, "invoicing"), 0u);
  EXPECT_EQ(ActionRecords(dir), 3u);
  // A selection of nothing is no action: said so, and nothing recorded.
  EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber invoicing --all" + who, &out), 0) << out;
  EXPECT_TRUE(Contains(out, "nothing selected; nothing recorded")) << out;
  EXPECT_TRUE(Contains(out, "action id        0\n")) << out;
  EXPECT_EQ(ActionRecords(dir), 3u);
  EXPECT_EQ(Cli("dlq redrive " + dir.path() + " --subscriber invoicing --all" + who, &out, true), 1) << out;
  EXPECT_TRUE(Contains(out, "not active")) << out;

  // Held by a process without the socket: said plainly.
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    EXPECT_EQ(Cli("dlq purge " + dir.path() + " --subscriber invoicing --all" + who, &out, true), 2) << out;
    EXPECT_TRUE(Contains(out, "held by a running process")) << out;
    EXPECT_TRUE(Contains(out, "Options::admin_socket")) << out;
  }
  EXPECT_EQ(Cli("dlq purge " + dir.root() + "/missing --subscriber invoicing --all" + who, &out), 2);
  EXPECT_FALSE(std::filesystem::exists(dir.root() + "/missing")) << "no database is created";
}

TEST(AdminTest, ReplayThroughTheSocketAndTheCli) {
  TempDir dir;
  Options o = AdminOptions(dir);
  o.retain_events = 100;
  auto bus = testing::OpenBus(o);
  ASSERT_NE(bus, nullptr);
  std::atomic<int> runs{0};
  SubscriberOptions s;
  s.name = "projections";
  s.handler = [&](const Event&, HandlerContext&) {
    ++runs;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (const char* subject : {"order-1", "order-2", "order-3"}) Publish(*bus, subject, "x");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  ASSERT_TRUE(testing::Eventually([&] { return bus->Stats().subscribers[0].checkpoint == 3; }, 10s));
  const Fields who = {{"operator", "carol"}, {"reason", "check the projection"}};
  auto with_who = [&](Fields f) {
    f.insert(f.end(), who.begin(), who.end());
    return f;
  };

  const std::string dry =
      Exchange(SocketPath(dir), Request("replay", with_who({{"subscriber", "projections"}, {"dry-run", "true"}})));
  ASSERT_TRUE(dry.starts_with("ok\n{\"replay_id\":0,\"subscriber\":\"projections\",\"mode\":\"same-inbox\"")) << dry;
  EXPECT_TRUE(Contains(dry, "\"operator\":\"carol\",\"reason\":\"check the projection\"")) << dry;
  EXPECT_TRUE(Contains(dry, "\"selected\":3,")) << dry;
  EXPECT_TRUE(Contains(dry, "\"seqs\":[1,2,3]}\n")) << dry;
  EXPECT_EQ(ActionRecords(dir), 0u) << "a dry run records nothing";

  EXPECT_TRUE(
      Exchange(SocketPath(dir), Request("replay", with_who({{"subscriber", "projections"}, {"mode", "fresh-scope"}})))
          .starts_with("error NotSupported\n"))
      << "fresh-scope needs a side-effect-safe subscriber";
  EXPECT_EQ(Exchange(SocketPath(dir), Request("replay-status", {{"replay", "999"}})),
            "error NotFound\nno replay 999\n");

  // Same inbox: every event was handled, so all are skipped, none runs.
  std::string out;
  ASSERT_EQ(Cli("replay " + dir.path() +
                    " --subscriber projections --from-seq 2 --json --operator carol "
                    "--reason 'check the projection'",
                &out),
            0);
  EXPECT_TRUE(out.starts_with("{\"replay_id\":1,\"subscriber\":\"projections\"")) << out;
  EXPECT_TRUE(Contains(out, "\"started\":\"20")) << "an RFC 3339 time: " << out;
  ReplayReport report;
  ASSERT_TRUE(testing::Eventually(
      [&] {
        Result<ReplayReport> r = bus->Operator().Replay(1);
        if (r.ok()) report = *r;
        return r.ok() && report.state != ReplayState::kRunning;
      },
      10s));
  EXPECT_EQ(report.state, ReplayState::kDone);
  EXPECT_EQ(runs.load(), 3) << "handled events are not run again by a same-inbox replay";

  ASSERT_EQ(Cli("replay " + dir.path() + " --status 1", &out), 0);
  EXPECT_TRUE(Contains(out, "replay id        1\n")) << out;
  EXPECT_TRUE(Contains(out, "state            done\n")) << out;
  EXPECT_TRUE(Contains(out, "skipped          2\n")) << out;
  EXPECT_EQ(Cli("replay " + dir.path() + " --cancel 1 --operator carol --reason done --json", &out), 0)
      << "cancelling an ended replay changes nothing";
  EXPECT_TRUE(Contains(out, "\"state\":\"done\"")) << out;
  EXPECT_EQ(Cli("replay " + dir.path() + " --status 7", &out, true), 1) << out;
  EXPECT_TRUE(Contains(out, "NotFound: no replay 7")) << out;
  EXPECT_EQ(Cli("replay " + dir.path() + " --status 1 --subscriber projections", &out, true), 2) << out;
  EXPECT_EQ(
      Cli("replay " + dir.path() + " --subscriber projections --since yesterday --operator c --reason r", &out, true),
      2)
      << out;
  EXPECT_EQ(ActionRecords(dir), 1u);
}

}  // namespace
}  // namespace walbus
