// Crash tests: a child process runs the bus and is killed with SIGKILL at a
// chosen or random moment; the parent reopens the directory and checks what
// survived against what the child had acknowledged.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "bus/core/envelope.h"
#include "storage/db.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

Options CrashOptions(const TempDir& dir, Durability d) {
  Options o;
  o.dir = dir.path();
  o.durability = d;
  o.column_families = {"orders", "effects"};
  return o;
}

// Writes a line to the pipe in one write(2): lines up to PIPE_BUF bytes
// never interleave between threads.
void Report(int fd, const std::string& line) {
  std::string l = line + "\n";
  ssize_t n = write(fd, l.data(), l.size());
  if (n != static_cast<ssize_t>(l.size())) _exit(3);
}

// Reads every line until EOF (the writer died).
std::vector<std::string> ReadLines(int fd) {
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) all.append(buf, static_cast<size_t>(n));
  std::vector<std::string> lines;
  std::istringstream in(all);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

SubscriberOptions EffectCounter(std::atomic<int>* calls) {
  SubscriberOptions s;
  s.name = "counter";
  s.types = {kType};
  s.handler = [calls](const Event& e, HandlerContext& ctx) {
    ++*calls;
    auto cur = ctx.Get("effects", e.subject);
    if (!cur.ok()) return Outcome::RetryAfter(1ms);
    int n = cur->has_value() ? std::stoi(**cur) : 0;
    if (!ctx.Put("effects", e.subject, std::to_string(n + 1)).ok()) return Outcome::RetryAfter(1ms);
    return Outcome::Done();
  };
  return s;
}

EventSpec Approved(const std::string& subject) {
  EventSpec e;
  e.type = kType;
  e.subject = subject;
  e.data = subject;
  return e;
}

// Child: producers commit "Put orders/<key> + publish subject <key>" and
// report each acknowledged key; the parent kills it at a random moment.
[[noreturn]] void RunProducersUntilKilled(const Options& options, int fd) {
  std::unique_ptr<Bus> bus;
  if (!Bus::Open(options, &bus).ok()) _exit(2);
  SubscriberOptions idle;  // registered, never started: keeps the outbox
  idle.name = "checker";
  idle.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  if (!bus->Subscribe(std::move(idle)).ok()) _exit(2);
  Report(fd, "ready");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        const std::string key = "k-" + std::to_string(t) + "-" + std::to_string(i);
        Transaction tx = bus->Begin();
        if (!tx.Put("orders", key, key).ok() || !tx.Publish(Approved(key)).ok()) _exit(4);
        if (!tx.Commit().ok()) _exit(5);
        Report(fd, key);
      }
    });
  }
  for (auto& th : threads) th.join();
  _exit(0);
}

void CheckNoAcknowledgedCommitLost(Durability durability, uint32_t seed) {
  TempDir dir;
  const Options options = CrashOptions(dir, durability);
  std::mt19937 rng(seed);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    RunProducersUntilKilled(options, fds[1]);
  }
  close(fds[1]);
  char c;
  ASSERT_EQ(read(fds[0], &c, 1), 1) << "child failed to open";  // "ready\n" starts
  std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 300));
  KillAndReap(pid);
  std::vector<std::string> acked = ReadLines(fds[0]);
  close(fds[0]);
  ASSERT_FALSE(acked.empty());
  acked.erase(acked.begin());  // the rest of "ready"
  ASSERT_GT(acked.size(), 10u) << "seed " << seed;

  storage::OpenOptions so;
  so.dir = dir.path();
  so.create_if_missing = false;
  std::unique_ptr<storage::Db> db;
  ASSERT_TRUE(storage::Db::Open(so, &db).ok());
  std::set<std::string> event_subjects;
  uint64_t expected_seq = 1;
  Status scan = db->ScanOutbox(0, SIZE_MAX, [&](uint64_t seq, std::string_view bytes) {
    Event e;
    EXPECT_TRUE(internal::DecodeEnvelope(bytes, 1 << 20, &e).ok()) << "seq " << seq;
    EXPECT_EQ(seq, expected_seq++) << "sequence numbers have no holes";
    event_subjects.insert(e.subject);
    return true;
  });
  ASSERT_TRUE(scan.ok());
  for (const std::string& key : acked) {
    std::string v;
    bool found = false;
    ASSERT_TRUE(db->Get(db->AppCf("orders"), key, &v, &found).ok());
    EXPECT_TRUE(found) << "acknowledged commit lost: " << key << " (seed " << seed << ")";
    EXPECT_TRUE(event_subjects.count(key)) << "acknowledged event lost: " << key;
  }
  // No half commit: every event has its domain write and the reverse.
  for (const std::string& key : event_subjects) {
    std::string v;
    bool found = false;
    ASSERT_TRUE(db->Get(db->AppCf("orders"), key, &v, &found).ok());
    EXPECT_TRUE(found) << "event without its domain write: " << key;
  }
  size_t domain_rows = 0;
  // Count domain rows through the same keys space as the producers used.
  for (int t = 0; t < 4; ++t) {
    for (int i = 0;; ++i) {
      std::string v;
      bool found = false;
      ASSERT_TRUE(db->Get(db->AppCf("orders"), "k-" + std::to_string(t) + "-" + std::to_string(i), &v, &found).ok());
      if (!found) break;
      ++domain_rows;
    }
  }
  EXPECT_EQ(domain_rows, event_subjects.size()) << "domain write without its event";
}

TEST(CrashTest, KilledProducersLoseNoAcknowledgedCommitUnderSync) {
  for (uint32_t seed : {1u, 2u, 3u}) CheckNoAcknowledgedCommitLost(Durability::kSync, seed);
}

TEST(CrashTest, KilledProducersLoseNoAcknowledgedCommitUnderBuffered) {
  for (uint32_t seed : {4u, 5u, 6u}) CheckNoAcknowledgedCommitLost(Durability::kBuffered, seed);
}

TEST(CrashTest, ConsumerKilledBetweenEffectAndCheckpointHasOneEffect) {
  TempDir dir;
  Options options = CrashOptions(dir, Durability::kBuffered);
  constexpr int kEvents = 200;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    // The checkpoint never gets written in the child: every effect commits,
    // then the process dies before its checkpoint moves.
    Options child = options;
    child.checkpoint_interval = std::chrono::hours(1);
    child.trim_interval = std::chrono::hours(1);
    std::unique_ptr<Bus> bus;
    if (!Bus::Open(child, &bus).ok()) _exit(2);
    std::atomic<int> calls{0};
    if (!bus->Subscribe(EffectCounter(&calls)).ok() || !bus->Start().ok()) _exit(2);
    for (int i = 0; i < kEvents; ++i) {
      Transaction tx = bus->Begin();
      if (!tx.Publish(Approved("order-" + std::to_string(i))).ok() || !tx.Commit().ok()) _exit(4);
    }
    if (!bus->WaitIdle(60s).ok()) _exit(5);
    Report(fds[1], "handled " + std::to_string(calls.load()));
    pause();
    _exit(0);
  }
  close(fds[1]);
  char buf[64] = {};
  ASSERT_GT(read(fds[0], buf, sizeof(buf) - 1), 0);
  KillAndReap(pid);
  close(fds[0]);
  EXPECT_EQ(std::string(buf), "handled " + std::to_string(kEvents) + "\n");

  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(options, &bus).ok());
  std::atomic<int> calls{0};
  ASSERT_TRUE(bus->Subscribe(EffectCounter(&calls)).ok());
  BusStats before = bus->Stats();
  EXPECT_EQ(before.subscribers[0].checkpoint, 0u) << "the child must have died before checkpointing";
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  EXPECT_EQ(calls.load(), 0) << "redelivered events must be skipped by the inbox";
  BusStats after = bus->Stats();
  EXPECT_EQ(after.subscribers[0].duplicates, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(after.subscribers[0].handled, static_cast<uint64_t>(kEvents)) << "the handled counter is durable";
  Transaction reader = bus->Begin();
  for (int i = 0; i < kEvents; ++i) {
    EXPECT_EQ(reader.Get("effects", "order-" + std::to_string(i)).value(), std::optional<std::string>("1"));
  }
}

}  // namespace
}  // namespace walbus
