// Power loss and a full disk, simulated under a real bus by FaultFs
// (storage/testing/fault_fs.h): what survives is what was fsynced before the cut,
// and a commit is all there or not there at all.
#include "storage/testing/fault_fs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bus/api/bus_impl.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

// A FaultFs and the Env that sends a database's files through it. One disk
// outlives every bus opened on it in a test.
struct FaultyDisk {
  std::shared_ptr<storage::FaultFs> fs = std::make_shared<storage::FaultFs>();
  std::unique_ptr<rocksdb::Env> env = storage::FaultFs::NewEnv(fs);
};

Options MakeOptions(const TempDir& dir, Durability d) { return testing::TestOptions(dir, d); }

std::unique_ptr<Bus> OpenOn(FaultyDisk& disk, const Options& o) {
  std::unique_ptr<Bus> bus;
  Status s = internal::BusImpl::OpenWithEnv(o, disk.env.get(), &bus);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return bus;
}

std::string Key(int thread, int i) { return "k-" + std::to_string(thread) + "-" + std::to_string(i); }

// One transaction: the domain row orders/<key> and the event about it.
Result<Receipt> CommitOrder(Bus& bus, const std::string& key, const CommitOptions& commit = {}) {
  Transaction tx = bus.Begin();
  if (Status s = tx.Put("orders", key, "approved:" + key); !s.ok()) return s;
  EventSpec e;
  e.type = kType;
  e.subject = key;
  e.data = key;
  if (auto id = tx.Publish(e); !id.ok()) return id.status();
  return tx.Commit(commit);
}

// What a recording subscriber was handed.
struct EventLog {
  std::mutex mu;
  std::map<std::string, EventId> by_subject;
  std::vector<uint64_t> seqs;
};

// A subscriber that records every event into `log` (when given). Registered
// and left inactive, it holds the outbox, so that a later run can read
// every event back through it.
SubscriberOptions Recorder(EventLog* log) {
  SubscriberOptions s;
  s.name = "checker";
  s.handler = [log](const Event& e, HandlerContext&) {
    if (log != nullptr) {
      std::lock_guard<std::mutex> lock(log->mu);
      log->seqs.push_back(e.seq);
      log->by_subject.emplace(e.subject, e.id);
    }
    return Outcome::Done();
  };
  return s;
}

// Counts its handling of each event in effects/<subject>; any effect
// committed twice shows as "2".
SubscriberOptions EffectCounter() {
  SubscriberOptions s;
  s.name = "effects";
  s.types = {kType};
  s.handler = [](const Event& e, HandlerContext& ctx) {
    auto cur = ctx.Get("effects", e.subject);
    if (!cur.ok()) return Outcome::RetryAfter(1ms);
    int n = cur->has_value() ? std::stoi(**cur) : 0;
    if (!ctx.Put("effects", e.subject, std::to_string(n + 1)).ok()) return Outcome::RetryAfter(1ms);
    return Outcome::Done();
  };
  return s;
}

std::optional<std::string> Row(Bus& bus, const std::string& cf, const std::string& key) {
  Transaction reader = bus.Begin();
  auto v = reader.Get(cf, key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : std::nullopt;
}

// Reopened bus: every attempted commit has both its row and its event or
// neither, and the outbox has no holes. Returns the keys that survived.
std::set<std::string> CheckAllOrNothing(Bus& bus, EventLog& log, const std::vector<std::string>& attempted) {
  std::lock_guard<std::mutex> lock(log.mu);
  std::set<std::string> survived;
  for (const std::string& key : attempted) {
    const bool row = Row(bus, "orders", key).has_value();
    const bool event = log.by_subject.count(key) > 0;
    EXPECT_EQ(row, event) << key << ": a half commit (row " << row << ", event " << event << ")";
    if (row && event) survived.insert(key);
  }
  EXPECT_EQ(log.by_subject.size(), survived.size()) << "events nobody committed";
  std::vector<uint64_t> seqs = log.seqs;
  std::sort(seqs.begin(), seqs.end());
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1) << "the outbox has a hole or a repeat";
  EXPECT_EQ(bus.Stats().last_seq, seqs.size());
  return survived;
}

// After a power cut: the power back on (what was not synced dropped),
// the database reopened, `log`'s recorder (and `also`) run to idle, and
// every attempted commit checked whole or absent. *survived gets the keys
// that survived. Returns the reopened bus; null when it did not open.
std::unique_ptr<Bus> ReopenAfterPowerCut(FaultyDisk& disk, const Options& options,
                                         const std::vector<std::string>& attempted, EventLog* log,
                                         std::set<std::string>* survived, std::vector<SubscriberOptions> also = {}) {
  Status dropped = disk.fs->DropUnsyncedData();
  EXPECT_TRUE(dropped.ok()) << dropped.ToString();
  auto bus = OpenOn(disk, options);
  if (bus == nullptr) return nullptr;  // the database must open after a power cut
  EXPECT_TRUE(bus->Subscribe(Recorder(log)).ok());
  for (SubscriberOptions& s : also) EXPECT_TRUE(bus->Subscribe(std::move(s)).ok());
  EXPECT_TRUE(bus->Start().ok());
  EXPECT_TRUE(bus->WaitIdle(60s).ok());
  *survived = CheckAllOrNothing(*bus, *log, attempted);
  return bus;
}

// Commits that returned before a power cut began must survive it. The flag
// goes up before the disk freezes, so a producer that still sees it down
// after its commit returned knows that the commit's fsync came first.
class PowerSwitch {
 public:
  explicit PowerSwitch(storage::FaultFs* fs) : fs_(fs) {}
  void Cut() {
    cutting_.store(true);
    fs_->CutPower();
  }
  bool cutting() const { return cutting_.load(); }

 private:
  storage::FaultFs* const fs_;
  std::atomic<bool> cutting_{false};
};

// Producer threads commit orders until the power is cut (or they are
// destroyed). `acked` gets the commits that returned before the cut;
// `attempted` every key tried.
class Producers {
 public:
  Producers(Bus& bus, const PowerSwitch& power, int threads) : attempted_(threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, &bus, &power, t] {
        for (int i = 0; !power.cutting() && !stop_.load(); ++i) {
          const std::string key = Key(t, i);
          attempted_[t].push_back(key);
          auto r = CommitOrder(bus, key);
          // After the cut the disk drops writes silently: commits still
          // return OK, but nothing is promised about them.
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          if (!power.cutting()) {
            std::lock_guard<std::mutex> lock(mu_);
            acked_.emplace(key, r->event_ids.at(0));
          }
        }
      });
    }
  }
  ~Producers() {
    stop_.store(true);
    Join();
  }

  void Join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  size_t acked_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.size();
  }
  std::map<std::string, EventId> acked() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }
  // REQUIRES: joined.
  std::vector<std::string> attempted() const {
    std::vector<std::string> all;
    for (const auto& keys : attempted_) all.insert(all.end(), keys.begin(), keys.end());
    return all;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, EventId> acked_;
  std::vector<std::vector<std::string>> attempted_;  // one per thread, written only by it
  std::vector<std::thread> threads_;
};

// RocksDB reopens the last write-ahead log at open; what it held before
// was durable, and a power cut loses only what is appended after.
TEST(FaultFsTest, AReopenedFileKeepsWhatItHeldBefore) {
  TempDir dir;
  std::filesystem::create_directories(dir.path());
  const std::string name = dir.path() + "/000001.log";
  std::ofstream(name) << "0123456789";
  auto fs = std::make_shared<storage::FaultFs>();
  std::unique_ptr<rocksdb::FSWritableFile> file;
  ASSERT_TRUE(fs->ReopenWritableFile(name, rocksdb::FileOptions(), &file, nullptr).ok());
  ASSERT_TRUE(file->Append("abcde", rocksdb::IOOptions(), nullptr).ok());
  fs->CutPower();
  ASSERT_TRUE(file->Close(rocksdb::IOOptions(), nullptr).ok());
  file.reset();
  ASSERT_TRUE(fs->DropUnsyncedData().ok());
  EXPECT_EQ(std::filesystem::file_size(name), 10u) << "the unsynced append goes, what was there stays";
}

TEST(FaultFsTest, SyncCommitsSurvivePowerLoss) {
  TempDir dir;
  FaultyDisk disk;
  const Options options = MakeOptions(dir, Durability::kSync);
  std::map<std::string, EventId> acked;
  std::vector<std::string> attempted;
  {
    auto bus = OpenOn(disk, options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Recorder(nullptr)).ok());  // never started here
    PowerSwitch power(disk.fs.get());
    Producers producers(*bus, power, 4);
    ASSERT_TRUE(testing::Eventually([&] { return producers.acked_count() >= 200; }, 60s));
    power.Cut();  // while commits are in flight
    producers.Join();
    acked = producers.acked();
    attempted = producers.attempted();
  }  // destroying the bus closes it; nothing it writes now reaches the disk
  EventLog log;
  std::set<std::string> survived;
  auto bus = ReopenAfterPowerCut(disk, options, attempted, &log, &survived);
  ASSERT_NE(bus, nullptr);
  std::lock_guard<std::mutex> lock(log.mu);
  for (const auto& [key, id] : acked) {
    EXPECT_TRUE(survived.count(key)) << "acknowledged kSync commit lost: " << key;
    auto it = log.by_subject.find(key);
    if (it != log.by_subject.end()) {
      EXPECT_EQ(it->second, id) << key;
    }
  }
  EXPECT_GE(survived.size(), acked.size());
}

TEST(FaultFsTest, BufferedCommitsStayAtomicAfterPowerLoss) {
  TempDir dir;
  FaultyDisk disk;
  const Options options = MakeOptions(dir, Durability::kBuffered);
  {
    auto bus = OpenOn(disk, options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Recorder(nullptr)).ok());  // registered, then left inactive
  }
  std::mt19937 rng(std::random_device{}());
  std::set<std::string> durable_floor;  // acknowledged before a later fsync
  std::vector<std::string> attempted;
  {
    auto bus = OpenOn(disk, options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(EffectCounter()).ok());
    ASSERT_TRUE(bus->Start().ok());
    PowerSwitch power(disk.fs.get());
    Producers producers(*bus, power, 2);
    // kBuffered commits are never fsynced themselves, but a subscriber's
    // registration is, and an fsync of the log covers everything written
    // before it. Registering a few idle subscribers at random moments makes
    // some prefix of the commits durable; the cut comes later, at a random
    // moment too.
    for (int m = 0; m < 3; ++m) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 15));
      std::map<std::string, EventId> before = producers.acked();
      SubscriberOptions marker;
      marker.name = "marker-" + std::to_string(m);
      marker.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
      ASSERT_TRUE(bus->Subscribe(std::move(marker)).ok());
      for (const auto& [key, id] : before) durable_floor.insert(key);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 20));
    power.Cut();  // producers and the handler are both busy
    producers.Join();
    attempted = producers.attempted();
    ASSERT_FALSE(durable_floor.empty()) << "no commit before the first fsync; nothing is tested";
  }
  EventLog log;
  std::set<std::string> survived;
  auto bus = ReopenAfterPowerCut(disk, options, attempted, &log, &survived, {EffectCounter()});
  ASSERT_NE(bus, nullptr) << "the database must open after a power cut";
  for (const std::string& key : durable_floor) {
    EXPECT_TRUE(survived.count(key)) << "commit made durable by a later fsync was lost: " << key;
  }
  // Effects commit with their inbox record: an effect that outlived its
  // record would be applied again on redelivery and read "2".
  for (const std::string& key : attempted) {
    std::optional<std::string> effect = Row(*bus, "effects", key);
    if (survived.count(key)) {
      EXPECT_EQ(effect, std::optional<std::string>("1")) << key;
    } else {
      EXPECT_FALSE(effect.has_value()) << "effect of an event that was lost: " << key;
    }
  }
  BusStats stats = bus->Stats();
  for (const SubscriberStats& s : stats.subscribers) {
    if (s.name == "effects") {
      EXPECT_EQ(s.handled, survived.size()) << "the handled counter commits with the effects";
    }
  }
}

// Under kBuffered, every commit acknowledged more than the sync interval
// before a power cut (plus a margin for one fsync and the scheduler)
// survives it: the background sync made it durable. Nothing else syncs the
// log meanwhile (no registration, no memtable flush at this size), so
// without that sync every one of them would be lost.
TEST(FaultFsTest, BufferedCommitsOlderThanTheSyncIntervalSurvivePowerLoss) {
  TempDir dir;
  FaultyDisk disk;
  Options options = MakeOptions(dir, Durability::kBuffered);
  options.buffered_sync_interval = 100ms;
  constexpr auto kMargin = 900ms;
  std::mt19937 rng(std::random_device{}());
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, Clock::time_point>> acked;
  std::vector<std::string> attempted;
  Clock::time_point cut;
  {
    auto bus = OpenOn(disk, options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Recorder(nullptr)).ok());  // registered (synced) before any commit
    PowerSwitch power(disk.fs.get());
    std::thread producer([&, jitter = std::minstd_rand(rng())]() mutable {
      for (int i = 0; !power.cutting(); ++i) {
        const std::string key = Key(0, i);
        attempted.push_back(key);
        auto r = CommitOrder(*bus, key);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (!power.cutting()) acked.emplace_back(key, Clock::now());
        std::this_thread::sleep_for(std::chrono::microseconds(200 + jitter() % 800));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2000 + rng() % 1000));
    cut = Clock::now();
    power.Cut();
    producer.join();
  }
  EventLog log;
  std::set<std::string> survived;
  ASSERT_NE(ReopenAfterPowerCut(disk, options, attempted, &log, &survived), nullptr);
  size_t promised = 0;
  for (const auto& [key, at] : acked) {
    if (at >= cut - options.buffered_sync_interval - kMargin) continue;
    ++promised;
    EXPECT_TRUE(survived.count(key)) << key << ", acknowledged "
                                     << std::chrono::duration_cast<std::chrono::milliseconds>(cut - at).count()
                                     << " ms before the cut, was lost";
  }
  EXPECT_GE(promised, 100u) << "too few commits older than the bound: nothing is tested";
}

// CommitOptions::sync on a kBuffered bus whose own fsync is an hour away:
// the synced commit survives a power cut, and so does what was written
// before it; a buffered commit after it does not.
TEST(FaultFsTest, ASyncedCommitOnABufferedBusSurvivesPowerLoss) {
  TempDir dir;
  FaultyDisk disk;
  Options options = MakeOptions(dir, Durability::kBuffered);
  options.buffered_sync_interval = std::chrono::hours(1);
  const std::vector<std::string> attempted = {"before", "synced", "after"};
  {
    auto bus = OpenOn(disk, options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Recorder(nullptr)).ok());  // registered (synced) before any commit
    ASSERT_TRUE(CommitOrder(*bus, "before").ok());
    ASSERT_TRUE(CommitOrder(*bus, "synced", CommitOptions{.sync = true}).ok());
    ASSERT_TRUE(CommitOrder(*bus, "after").ok());
    PowerSwitch power(disk.fs.get());
    power.Cut();
  }
  EventLog log;
  std::set<std::string> survived;
  ASSERT_NE(ReopenAfterPowerCut(disk, options, attempted, &log, &survived), nullptr);
  EXPECT_EQ(survived, (std::set<std::string>{"before", "synced"}));
}

// A full disk fails commits (and handler commits) with ResourceExhausted
// and nothing half-done; once the disk has room again the same bus resumes
// by itself: RocksDB's recovery from a full disk polls the free space
// (every few seconds) and then clears its background error.
TEST(FaultFsTest, DiskFullFailsCommitsCleanlyAndResumesWithoutReopening) {
  TempDir dir;
  FaultyDisk disk;
  const Options options = MakeOptions(dir, Durability::kSync);
  std::map<std::string, EventId> acked;
  std::vector<std::string> refused;
  EventLog log;
  {
    auto bus = OpenOn(disk, options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Recorder(&log)).ok());
    ASSERT_TRUE(bus->Subscribe(EffectCounter()).ok());
    ASSERT_TRUE(bus->Start().ok());
    for (int i = 0; i < 50; ++i) {
      const std::string key = Key(0, i);
      auto r = CommitOrder(*bus, key);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      acked.emplace(key, r->event_ids.at(0));
    }
    ASSERT_TRUE(bus->WaitIdle(60s).ok());

    disk.fs->SetNoSpace(true);
    for (int i = 0; i < 3; ++i) {
      const std::string key = "refused-" + std::to_string(i);
      auto r = CommitOrder(*bus, key);
      ASSERT_FALSE(r.ok()) << "a commit on a full disk must fail: " << key;
      EXPECT_TRUE(r.status().IsResourceExhausted()) << r.status().ToString();
      refused.push_back(key);
    }
    EXPECT_GE(disk.fs->injected_failures(), 1u);
    for (const std::string& key : refused) {
      EXPECT_FALSE(Row(*bus, "orders", key).has_value()) << "a refused commit left its row: " << key;
    }
    EXPECT_EQ(bus->Stats().last_seq, acked.size()) << "a refused commit used a sequence number";
    EXPECT_TRUE(bus->Stats().writes_failing);
    EXPECT_GE(bus->Stats().write_failures_no_space, 1u);
    EXPECT_NE(bus->MetricsText().find("walbus_storage_writes_failing 1"), std::string::npos);
    // Keep the disk full a while, as a real one would stay.
    std::this_thread::sleep_for(200ms);
    disk.fs->SetNoSpace(false);

    // The same bus takes commits again once RocksDB has seen the room.
    int attempt = 0;
    const bool resumed = testing::Eventually(
        [&] {
          const std::string key = "after-space-" + std::to_string(attempt++);
          auto r = CommitOrder(*bus, key);
          if (r.ok()) {
            acked.emplace(key, r->event_ids.at(0));
            return true;
          }
          EXPECT_TRUE(r.status().IsResourceExhausted()) << r.status().ToString();
          refused.push_back(key);
          return false;
        },
        60s);
    ASSERT_TRUE(resumed) << "the bus did not resume after the disk had room again";
    EXPECT_FALSE(bus->Stats().writes_failing);
    for (int i = 0; i < 20; ++i) {
      const std::string key = Key(1, i);
      auto r = CommitOrder(*bus, key);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      acked.emplace(key, r->event_ids.at(0));
    }
    ASSERT_TRUE(bus->WaitIdle(60s).ok()) << "handlers did not catch up after the disk had room";
    for (const auto& [key, id] : acked) {
      EXPECT_EQ(Row(*bus, "effects", key), std::optional<std::string>("1")) << key;
    }
    for (const std::string& key : refused) {
      EXPECT_FALSE(Row(*bus, "orders", key).has_value()) << "refused commit applied: " << key;
    }
    EXPECT_TRUE(bus->Close().ok());
  }

  // And what was acknowledged is on disk.
  auto bus = OpenOn(disk, options);
  ASSERT_NE(bus, nullptr);
  {
    std::lock_guard<std::mutex> lock(log.mu);
    EXPECT_EQ(log.by_subject.size(), acked.size()) << "every acknowledged event handled once";
    for (const auto& [key, id] : acked) EXPECT_EQ(log.by_subject[key], id) << key;
  }
  for (const auto& [key, id] : acked) {
    EXPECT_EQ(Row(*bus, "effects", key), std::optional<std::string>("1")) << key;
  }
  for (const std::string& key : refused) EXPECT_FALSE(Row(*bus, "orders", key).has_value()) << key;
}

}  // namespace
}  // namespace walbus
