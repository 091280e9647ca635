// The group commit (bus/core/committer.cc) through the public API, against a
// real RocksDB in a temporary directory: many threads committing at once,
// synced and not, each get their own transaction written exactly once, in
// one sequence, and a synced write that waits for its group to fill never
// holds a lone committer back for good, also when a group splits a
// caller's requests. Counters stay exact across groups, failed writes and
// restarts.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bus/api/bus_impl.h"
#include "bus/core/committer.h"
#include "storage/db.h"
#include "storage/testing/fault_fs.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

// Commits one transaction: a domain row and one event. Returns its seq.
uint64_t CommitOne(Bus& bus, const std::string& key) {
  Transaction tx = bus.Begin();
  EXPECT_TRUE(tx.Put("orders", key, "approved").ok());
  EventSpec e;
  e.type = kType;
  e.subject = key;
  e.data = "x";
  EXPECT_TRUE(tx.Publish(e).ok());
  Result<Receipt> r = tx.Commit();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->first_seq : 0;
}

// Runs `threads` threads, each committing `per_thread` transactions, and
// returns every seq they were given.
std::vector<uint64_t> CommitFromThreads(Bus& bus, int threads, int per_thread, const std::string& tag) {
  std::mutex mu;
  std::vector<uint64_t> seqs;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const uint64_t seq = CommitOne(bus, tag + "-" + std::to_string(t) + "-" + std::to_string(i));
        std::lock_guard<std::mutex> lock(mu);
        seqs.push_back(seq);
      }
    });
  }
  for (auto& w : workers) w.join();
  return seqs;
}

// Every seq from `first` on, once each, with no gap.
void ExpectDense(std::vector<uint64_t> seqs, uint64_t first) {
  std::sort(seqs.begin(), seqs.end());
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], first + i);
}

TEST(CommitterTest, ConcurrentSyncedCommitsShareWritesAndEachLandsOnce) {
  TempDir dir;
  std::unique_ptr<Bus> bus = testing::OpenBus(testing::TestOptions(dir, Durability::kSync));
  ASSERT_NE(bus, nullptr);
  constexpr int kThreads = 16;
  constexpr int kPerThread = 40;
  const std::vector<uint64_t> seqs = CommitFromThreads(*bus, kThreads, kPerThread, "crowd");
  ASSERT_EQ(seqs.size(), size_t{kThreads * kPerThread});
  ExpectDense(seqs, 1);
  const BusStats stats = bus->Stats();
  EXPECT_EQ(stats.commits, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(stats.last_seq, uint64_t{kThreads * kPerThread});
  // Group commit: sixteen threads committing at once share fsyncs.
  EXPECT_LT(stats.commit_groups, stats.commits);
  ASSERT_TRUE(bus->Close().ok());

  // All of it is there after a reopen, domain rows included.
  bus = testing::OpenBus(testing::TestOptions(dir, Durability::kSync));
  ASSERT_NE(bus, nullptr);
  EXPECT_EQ(bus->Stats().last_seq, uint64_t{kThreads * kPerThread});
  Transaction reader = bus->Begin();
  for (int t = 0; t < kThreads; ++t) {
    Result<std::optional<std::string>> v =
        reader.Get("orders", "crowd-" + std::to_string(t) + "-" + std::to_string(kPerThread - 1));
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->value_or(""), "approved");
  }
}

TEST(CommitterTest, ALoneCommitterAfterACrowdIsNotHeldBackForGood) {
  TempDir dir;
  std::unique_ptr<Bus> bus = testing::OpenBus(testing::TestOptions(dir, Durability::kSync));
  ASSERT_NE(bus, nullptr);
  // A crowd teaches the committer to wait for large synced groups...
  std::vector<uint64_t> seqs = CommitFromThreads(*bus, 16, 5, "crowd");
  // ...then one thread commits alone, each commit waiting for the last: the
  // crowd it waits for never comes, and every commit still lands.
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) seqs.push_back(CommitOne(*bus, "alone-" + std::to_string(i)));
  const auto took = std::chrono::steady_clock::now() - started;
  ExpectDense(seqs, 1);
  // A liveness bound, not a speed claim: waiting for a group is bounded
  // (at most 1 ms per write) and shrinks as soon as fewer come.
  EXPECT_LT(took, std::chrono::seconds(30));
  const BusStats stats = bus->Stats();
  EXPECT_EQ(stats.commits, seqs.size());
}

// Eight threads of producers' commits (fsynced under kSync) beside a
// handler whose completions (no follow-up events) do not fsync: both wait
// in the same queue and groups mix them. Every commit gets one seq, with
// no gap, and every event is handled once.
void CommitBesideAHandler(const Options& options) {
  std::unique_ptr<Bus> bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  std::mutex mu;
  std::multiset<std::string> handled;
  SubscriberOptions sub;
  sub.name = "effects";
  sub.handler = [&](const Event& e, HandlerContext& ctx) {
    if (!ctx.Put("effects", e.subject, "done").ok()) return Outcome::RetryAfter(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(mu);
    handled.insert(e.subject);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(sub)).ok());
  ASSERT_TRUE(bus->Start().ok());
  const std::vector<uint64_t> seqs = CommitFromThreads(*bus, 8, 30, "mixed");
  ASSERT_EQ(seqs.size(), 240u);
  ExpectDense(seqs, 1);
  ASSERT_TRUE(bus->WaitIdle(std::chrono::seconds(60)).ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(handled.size(), 240u);
  for (const std::string& subject : handled) EXPECT_EQ(handled.count(subject), 1u) << subject;
}

TEST(CommitterTest, SyncedCommitsAndHandlerCompletionsShareOneSequence) {
  TempDir dir;
  CommitBesideAHandler(testing::TestOptions(dir, Durability::kSync));
}

TEST(CommitterTest, GroupsSmallerThanAWorkersBatchSplitIt) {
  // A worker commits its batch of completions in one call; groups of two
  // split it across writes, with producers' commits queued between and
  // behind, and the next leader may be the worker itself.
  TempDir dir;
  Options options = testing::TestOptions(dir, Durability::kSync);
  options.max_group_commits = 2;
  CommitBesideAHandler(options);
}

// Commits nothing to the dispatcher: a committer on its own database.
struct NoListener : internal::CommitListener {
  void OnCommitted(std::vector<std::shared_ptr<const Event>>&) override {}
  void OnTimersChanged(const std::vector<internal::TimerChange>&) override {}
};

// The dispatcher's records lead groups of their own: a synced request
// queued right behind one is not taken into its group (it gets a group,
// and an fsync, of its own), while a plain unsynced request's group takes
// it in. Both calls queue [unsynced, synced] in one go, so the leader is
// the same thread either way and the group count tells.
TEST(CommitterTest, AnUnsyncedGroupTakesNoSyncedRequestIn) {
  TempDir dir;
  storage::OpenOptions so;
  so.dir = dir.path();
  std::unique_ptr<storage::Db> db;
  ASSERT_TRUE(storage::Db::Open(so, &db).ok());
  NoListener listener;
  internal::Committer committer(db.get(), internal::CommitLimits{.max_group_commits = 64, .max_group_bytes = 1 << 20},
                                0, &listener);
  auto record = [&](const std::string& key) {
    internal::WriteSet writes;
    writes.AddOp(internal::Op{internal::Op::Kind::kPut, db->cf(storage::Cf::kCheckpoints), key, "v"});
    return writes;
  };
  for (bool dispatcher_record : {false, true}) {
    internal::WriteSet first = record("first"), second = record("second");
    internal::CommitRequest unsynced, synced;
    unsynced.writes = &first;
    unsynced.unsynced_group = dispatcher_record;
    synced.writes = &second;
    synced.sync = true;
    internal::CommitRequest* both[] = {&unsynced, &synced};
    const uint64_t groups_before = committer.groups();
    committer.Commit(both);
    ASSERT_TRUE(unsynced.status.ok()) << unsynced.status.ToString();
    ASSERT_TRUE(synced.status.ok()) << synced.status.ToString();
    EXPECT_EQ(committer.groups() - groups_before, dispatcher_record ? 2u : 1u)
        << (dispatcher_record ? "the dispatcher's record" : "a plain unsynced request");
  }
  EXPECT_EQ(committer.commits(), 4u);
}

// The committer writes each counter's new value (one put per group, from
// the value it keeps) rather than merging a delta per commit. The stored
// counter of pending scheduled events stays exact across groups of many
// threads' commits, a full disk that fails some of them (after which the
// kept values are read again), and a restart.
TEST(CommitterTest, CountersStayExactAcrossFailedWritesAndARestart) {
  TempDir dir;
  auto fs = std::make_shared<storage::FaultFs>();
  std::unique_ptr<rocksdb::Env> env = storage::FaultFs::NewEnv(fs);
  const Options options = testing::TestOptions(dir, Durability::kSync);
  auto schedule = [](Bus& bus, const std::string& subject) {
    Transaction tx = bus.Begin();
    EventSpec e;
    e.type = kType;
    e.subject = subject;
    e.data = "x";
    e.deliver_after = std::chrono::hours(1);
    if (auto id = tx.Publish(e); !id.ok()) return id.status();
    return tx.Commit().status();
  };
  uint64_t acked = 0;
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(internal::BusImpl::OpenWithEnv(options, env.get(), &bus).ok());
    std::atomic<uint64_t> committed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          if (schedule(*bus, "s-" + std::to_string(t)).ok()) committed.fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
    acked = committed.load();
    ASSERT_EQ(acked, 800u);
    fs->SetNoSpace(true);
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(schedule(*bus, "refused").ok());
    fs->SetNoSpace(false);
    ASSERT_TRUE(testing::Eventually(
        [&] {
          if (!schedule(*bus, "after").ok()) return false;
          ++acked;
          return true;
        },
        std::chrono::seconds(60)));
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(schedule(*bus, "after").ok());
      ++acked;
    }
    EXPECT_EQ(bus->Stats().scheduled_pending, acked);
    ASSERT_TRUE(bus->Close().ok());
  }
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(internal::BusImpl::OpenWithEnv(options, env.get(), &bus).ok());
  EXPECT_EQ(bus->Stats().scheduled_pending, acked) << "the stored counter, as the next open reads it";
}

}  // namespace
}  // namespace walbus
