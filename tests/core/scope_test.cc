// Reads inside a unit of work (Transaction, HandlerContext): ordered scans
// with bounds and paging, the scope's own writes laid over committed state,
// one snapshot per scope, values with versions, range deletions (atomic
// with events across SIGKILL), and through ReadView outside a unit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

#include "bus/core/envelope.h"
#include "storage/db.h"
#include "storage/keys.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

using Model = std::map<std::string, std::string>;

std::vector<KeyValue> AllPages(WriteScope& scope, ScanOptions options) {
  std::vector<KeyValue> rows;
  for (int pages = 0; pages < 100000; ++pages) {
    auto page = scope.Scan("orders", options);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    if (options.limit != 0) {
      EXPECT_LE(page->rows.size(), options.limit);
    }
    rows.insert(rows.end(), page->rows.begin(), page->rows.end());
    if (page->resume_after.empty()) break;
    EXPECT_EQ(page->rows.size(), options.limit) << "a page short of its limit says there is more";
    options.resume_after = page->resume_after;
  }
  return rows;
}

std::vector<KeyValue> Expected(const Model& model, const ScanOptions& o) {
  std::vector<KeyValue> rows;
  for (const auto& [key, value] : model) {
    if (!o.start.empty() && key < o.start) continue;
    if (!o.end.empty() && key >= o.end) continue;
    if (key.compare(0, o.prefix.size(), o.prefix) != 0) continue;
    rows.push_back(KeyValue{key, value});
  }
  if (o.reverse) std::reverse(rows.begin(), rows.end());
  return rows;
}

std::string Show(const std::vector<KeyValue>& rows) {
  std::string out;
  for (const auto& r : rows) {
    for (unsigned char c : r.key)
      out += (c >= 'a' && c <= 'z') ? std::string(1, static_cast<char>(c)) : "\\x" + std::to_string(c);
    out += "=" + r.value + " ";
  }
  return out;
}

// Keys of 1-3 bytes from an alphabet with the edges of byte order: zero
// bytes, 0xff bytes, and keys that are prefixes of others.
std::string RandomKey(std::mt19937& rng) {
  static const char kBytes[] = {'\0', '\x01', 'a', 'b', '\xfe', '\xff'};
  std::string key(1 + rng() % 3, ' ');
  for (char& c : key) c = kBytes[rng() % sizeof(kBytes)];
  return key;
}

ScanOptions RandomOptions(std::mt19937& rng) {
  ScanOptions o;
  if (rng() % 3 == 0) o.start = RandomKey(rng);
  if (rng() % 3 == 0) o.end = RandomKey(rng);
  if (rng() % 3 == 0) o.prefix = RandomKey(rng).substr(0, 1 + rng() % 2);
  o.reverse = rng() % 2 == 0;
  o.limit = rng() % 5;
  return o;
}

// Stops and joins a background thread however the test body exits (an
// ASSERT returns early).
class StopAndJoin {
 public:
  StopAndJoin(std::atomic<bool>* stop, std::thread* thread) : stop_(stop), thread_(thread) {}
  ~StopAndJoin() {
    *stop_ = true;
    if (thread_->joinable()) thread_->join();
  }

 private:
  std::atomic<bool>* stop_;
  std::thread* thread_;
};

uint32_t BaseSeed() {
  const char* env = std::getenv("WALBUS_TEST_SEED");
  return env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 20261202u;
}

// Against a model: committed rows, then a transaction's own puts,
// overwrites, deletes, range deletes and clears over them; every scan
// (random bounds, prefix, direction, page size) and every Get agrees with
// the model, before the commit and, through a ReadView, after it.
TEST(ScopeTest, ScansAndGetsMatchAModelOfCommittedAndOwnWrites) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  Model committed;
  for (uint32_t round = 0; round < 60; ++round) {
    const uint32_t seed = BaseSeed() + round;
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    Model model = committed;
    Transaction tx = bus->Begin();
    for (int op = 0; op < 25; ++op) {
      const uint32_t kind = rng() % 10;
      if (kind < 5) {
        const std::string key = RandomKey(rng), value = std::to_string(rng() % 1000);
        ASSERT_TRUE(tx.Put("orders", key, value).ok());
        model[key] = value;
      } else if (kind < 8) {
        const std::string key = RandomKey(rng);
        ASSERT_TRUE(tx.Delete("orders", key).ok());
        model.erase(key);
      } else if (kind < 9 || round % 7 != 0) {
        std::string a = RandomKey(rng), b = RandomKey(rng);
        if (a == b) continue;
        if (b < a) std::swap(a, b);
        ASSERT_TRUE(tx.DeleteRange("orders", a, b).ok());
        model.erase(model.lower_bound(a), model.lower_bound(b));
      } else {
        ASSERT_TRUE(tx.Clear("orders").ok());
        model.clear();
      }
      if (op % 5 == 4) {
        for (int scan = 0; scan < 6; ++scan) {
          const ScanOptions o = RandomOptions(rng);
          const auto got = AllPages(tx, o), want = Expected(model, o);
          ASSERT_EQ(got, want) << "got " << Show(got) << "\nwant " << Show(want);
        }
        for (int get = 0; get < 8; ++get) {
          const std::string key = RandomKey(rng);
          auto value = tx.Get("orders", key);
          ASSERT_TRUE(value.ok());
          auto it = model.find(key);
          ASSERT_EQ(value->has_value(), it != model.end());
          if (it != model.end()) {
            ASSERT_EQ(**value, it->second);
          }
        }
      }
    }
    ASSERT_TRUE(tx.Commit().ok());
    committed = model;
    ReadView view = bus->Read();
    std::vector<KeyValue> all;
    ASSERT_TRUE(view.Scan("orders", ScanOptions{},
                          [&](std::string_view k, std::string_view v) {
                            all.push_back(KeyValue{std::string(k), std::string(v)});
                            return true;
                          })
                    .ok());
    ASSERT_EQ(all, Expected(committed, ScanOptions{})) << "after the commit";
  }
}

TEST(ScopeTest, PagesResumeAcrossBoundsPrefixesAndDirections) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  Transaction fill = bus->Begin();
  for (int i = 0; i < 250; ++i) {
    char key[16];
    snprintf(key, sizeof(key), "sku-%03d", i);
    ASSERT_TRUE(fill.Put("orders", key, std::to_string(i)).ok());
  }
  ASSERT_TRUE(fill.Put("orders", "other", "x").ok());
  ASSERT_TRUE(fill.Commit().ok());

  ScanOptions o;
  o.prefix = "sku-";
  o.limit = 100;
  Transaction tx = bus->Begin();
  auto first = tx.Scan("orders", o);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->rows.size(), 100u);
  EXPECT_EQ(first->rows.front().key, "sku-000");
  EXPECT_EQ(first->resume_after, "sku-099");
  o.resume_after = first->resume_after;
  auto second = tx.Scan("orders", o);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->rows.front().key, "sku-100");
  o.resume_after = second->resume_after;
  auto third = tx.Scan("orders", o);
  ASSERT_TRUE(third.ok());
  ASSERT_EQ(third->rows.size(), 50u);
  EXPECT_EQ(third->rows.back().key, "sku-249");
  EXPECT_TRUE(third->resume_after.empty()) << "the last page says so";

  // Exactly a page's worth left: the page before says there is more, the
  // last one is empty of "more".
  ScanOptions exact;
  exact.start = "sku-200";
  exact.end = "sku-250";
  exact.limit = 50;
  exact.reverse = true;
  auto page = tx.Scan("orders", exact);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->rows.size(), 50u);
  EXPECT_EQ(page->rows.front().key, "sku-249");
  EXPECT_EQ(page->rows.back().key, "sku-200");
  EXPECT_TRUE(page->resume_after.empty());

  // The visitor form stops when told to, and at the limit.
  int seen = 0;
  ASSERT_TRUE(tx.Scan("orders", ScanOptions{}, [&](std::string_view, std::string_view) { return ++seen < 7; }).ok());
  EXPECT_EQ(seen, 7);
  ScanOptions none;
  none.start = "z";
  none.end = "a";  // empty range
  auto empty = tx.Scan("orders", none);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->rows.empty());
  EXPECT_FALSE(tx.Scan("nope", ScanOptions{}).ok());
}

TEST(ScopeTest, KeysWithZeroAndFfBytesSortByBytes) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  const std::vector<std::string> keys = {
      std::string("\0", 1), std::string("\0\0", 2), std::string("a\0", 2), "a", "a\xff", "\xff",
      "\xff\xff",           "\xff\xff\xff"};
  Transaction tx = bus->Begin();
  for (const auto& k : keys) ASSERT_TRUE(tx.Put("orders", k, "v").ok());
  ASSERT_TRUE(tx.Commit().ok());
  ReadView view = bus->Read();
  ScanOptions ff;
  ff.prefix = "\xff";  // a prefix of 0xff bytes only has no end key
  auto rows = view.Scan("orders", ff);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows.size(), 3u);
  EXPECT_EQ(rows->rows.back().key, "\xff\xff\xff");
  ScanOptions zero;
  zero.prefix = std::string("\0", 1);
  rows = view.Scan("orders", zero);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows.size(), 2u);
  ScanOptions a;
  a.prefix = "a";
  a.reverse = true;
  rows = view.Scan("orders", a);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows.size(), 3u);
  EXPECT_EQ(rows->rows[0].key, "a\xff");
  EXPECT_EQ(rows->rows[1].key, std::string("a\0", 2));
  EXPECT_EQ(rows->rows[2].key, "a");

  // Clear reaches the longest key a write takes, all 0xff bytes.
  Transaction longest = bus->Begin();
  ASSERT_TRUE(longest.Put("orders", std::string(kMaxKeyBytes, '\xff'), "v").ok());
  EXPECT_TRUE(longest.Put("orders", std::string(kMaxKeyBytes + 1, 'k'), "v").IsInvalidArgument());
  ASSERT_FALSE(longest.Commit().ok()) << "the refused write fails the unit";
  Transaction put = bus->Begin();
  ASSERT_TRUE(put.Put("orders", std::string(kMaxKeyBytes, '\xff'), "v").ok());
  ASSERT_TRUE(put.Commit().ok());
  Transaction clear = bus->Begin();
  ASSERT_TRUE(clear.Clear("orders").ok());
  ASSERT_TRUE(clear.Commit().ok());
  rows = bus->Read().Scan("orders", ScanOptions{});
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->rows.empty());
}

TEST(ScopeTest, ACommittedTransactionRefusesEveryWrite) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  Transaction schedule = bus->Begin();
  auto pending = schedule.Publish(EventSpec{.type = "orders.order-late.v1", .subject = "o-1", .deliver_after = 1h});
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  ASSERT_TRUE(schedule.Commit().ok());

  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Put("orders", "o-1", "placed").ok());
  ASSERT_TRUE(tx.Commit().ok());
  const auto committed = [](const Status& s) {
    return s.IsInvalidArgument() && s.message().find("already committed") != std::string::npos;
  };
  EXPECT_TRUE(committed(tx.Put("orders", "o-2", "placed")));
  EXPECT_TRUE(committed(tx.Delete("orders", "o-1")));
  EXPECT_TRUE(committed(tx.DeleteRange("orders", "a", "z")));
  EXPECT_TRUE(committed(tx.Clear("orders")));
  EXPECT_TRUE(committed(tx.ExpectVersion("orders", "o-1", 1)));
  EXPECT_TRUE(committed(tx.CancelScheduled(*pending)));
  auto late = tx.Publish(EventSpec{.type = "orders.order-placed.v1", .subject = "o-2"});
  EXPECT_TRUE(committed(late.status())) << "no event id is handed out for an event never written";
  EXPECT_TRUE(committed(tx.Commit().status()));

  ReadView view = bus->Read();
  auto first = view.Get("orders", "o-1");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->value_or(""), "placed") << "the committed write stands";
  auto second = view.Get("orders", "o-2");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->has_value());
  auto timer = bus->Begin().GetScheduled(*pending);
  ASSERT_TRUE(timer.ok());
  EXPECT_EQ(timer->state, ScheduledStatus::State::kPending) << "the refused cancel cancelled nothing";
}

// Options::column_families is what the application may read and write,
// whatever the database holds from earlier runs: a family left out is
// refused as on a fresh database, and kept on disk untouched.
TEST(ScopeTest, AColumnFamilyNoLongerListedIsRefusedAndKept) {
  TempDir dir;
  Options with_extra = testing::TestOptions(dir);
  with_extra.column_families.push_back("extra");
  {
    auto bus = testing::OpenBus(with_extra);
    ASSERT_NE(bus, nullptr);
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("extra", "k", "kept").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  TempDir fresh;
  for (const TempDir* d : {&dir, &fresh}) {  // the same answers with and without the family on disk
    auto bus = testing::OpenBus(testing::TestOptions(*d));
    ASSERT_NE(bus, nullptr);
    Transaction tx = bus->Begin();
    Status put = tx.Put("extra", "k", "new");
    EXPECT_TRUE(put.IsInvalidArgument()) << put.ToString();
    EXPECT_NE(put.message().find("Options::column_families"), std::string::npos) << put.ToString();
    EXPECT_TRUE(tx.Get("extra", "k").status().IsInvalidArgument());
    EXPECT_TRUE(tx.Commit().status().IsInvalidArgument()) << "the refused write fails the unit";
    EXPECT_TRUE(bus->Read().Get("extra", "k").status().IsInvalidArgument());
    EXPECT_TRUE(bus->Read().Scan("extra", ScanOptions{}).status().IsInvalidArgument());
  }
  auto bus = testing::OpenBus(with_extra);
  ASSERT_NE(bus, nullptr);
  auto kept = bus->Read().Get("extra", "k");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->value_or(""), "kept");
}

TEST(ScopeTest, BadRangesAreRefusedAndFailTheUnit) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  for (auto [start, end] :
       std::vector<std::pair<std::string, std::string>>{{"b", "a"}, {"a", "a"}, {"", "a"}, {"a", ""}}) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("orders", "kept", "v").ok());
    EXPECT_TRUE(tx.DeleteRange("orders", start, end).IsInvalidArgument()) << start << ".." << end;
    EXPECT_TRUE(tx.Commit().status().IsInvalidArgument());
  }
  Transaction unknown = bus->Begin();
  EXPECT_TRUE(unknown.Clear("nope").IsInvalidArgument());
  auto kept = bus->Read().Get("orders", "kept");
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->has_value()) << "nothing of a failed unit is written";
}

// Ten keys always sum to 1000 in every commit; readers outside and inside
// units of work, reading key by key while transfers commit, must always
// see 1000: every read of one scope or view sees one snapshot.
TEST(ScopeTest, ReadsOfOneScopeOrViewSeeOneSnapshot) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  constexpr int kKeys = 10;
  auto key = [](int i) { return "acct-" + std::to_string(i); };
  Transaction init = bus->Begin();
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(init.Put("orders", key(i), "100").ok());
  ASSERT_TRUE(init.Commit().ok());
  std::atomic<bool> stop{false};
  std::atomic<int> transfers{0};
  std::thread writer([&] {
    std::mt19937 rng(BaseSeed());
    while (!stop.load()) {
      const int from = static_cast<int>(rng() % kKeys), to = static_cast<int>(rng() % kKeys);
      Transaction tx = bus->Begin();
      auto a = tx.Get("orders", key(from));
      auto b = tx.Get("orders", key(to));
      if (!a.ok() || !b.ok() || from == to) continue;
      ASSERT_TRUE(tx.Put("orders", key(from), std::to_string(std::stoi(**a) - 7)).ok());
      ASSERT_TRUE(tx.Put("orders", key(to), std::to_string(std::stoi(**b) + 7)).ok());
      ASSERT_TRUE(tx.Commit().ok());
      ++transfers;
    }
  });
  StopAndJoin join_writer(&stop, &writer);
  auto sum_by_gets = [&](auto& reader) {
    int sum = 0;
    for (int i = 0; i < kKeys; ++i) {
      std::this_thread::yield();  // lets transfers commit between the reads
      auto v = reader.Get("orders", key(i));
      if (!v.ok() || !v->has_value()) return -1;
      sum += std::stoi(**v);
    }
    return sum;
  };
  auto sum_by_scan = [&](auto& reader) {
    auto page = reader.Scan("orders", ScanOptions{});
    EXPECT_TRUE(page.ok());
    int sum = 0;
    for (const auto& row : page->rows) sum += std::stoi(row.value);
    return sum;
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int round = 0; (round < 400 || transfers.load() < 200) && std::chrono::steady_clock::now() < deadline; ++round) {
    ReadView view = bus->Read();
    ASSERT_EQ(sum_by_gets(view), 1000) << "round " << round;
    ASSERT_EQ(sum_by_scan(view), 1000);
    Transaction tx = bus->Begin();
    ASSERT_EQ(sum_by_gets(tx), 1000) << "round " << round;
    ASSERT_EQ(sum_by_scan(tx), 1000);
  }
  EXPECT_GT(transfers.load(), 100);
}

// A writer keeps value == version on one key through ExpectVersion;
// GetWithVersion, in a view or a transaction, must never see them apart.
TEST(ScopeTest, GetWithVersionReadsValueAndVersionTogether) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> commits{0};
  std::thread writer([&] {
    while (!stop.load()) {
      Transaction tx = bus->Begin();
      auto current = tx.GetWithVersion("orders", "counter");
      ASSERT_TRUE(current.ok());
      ASSERT_TRUE(tx.Put("orders", "counter", std::to_string(current->version + 1)).ok());
      ASSERT_TRUE(tx.ExpectVersion("orders", "counter", current->version).ok());
      ASSERT_TRUE(tx.Commit().ok()) << "the only writer never conflicts";
      ++commits;
    }
  });
  StopAndJoin join_writer(&stop, &writer);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (commits.load() < 1000 && std::chrono::steady_clock::now() < deadline) {
    ReadView view = bus->Read();
    auto seen = view.GetWithVersion("orders", "counter");
    ASSERT_TRUE(seen.ok());
    if (seen->value.has_value()) {
      ASSERT_EQ(*seen->value, std::to_string(seen->version));
    }
    Transaction tx = bus->Begin();
    auto in_tx = tx.GetWithVersion("orders", "counter");
    ASSERT_TRUE(in_tx.ok());
    if (in_tx->value.has_value()) {
      ASSERT_EQ(*in_tx->value, std::to_string(in_tx->version));
    }
  }
  EXPECT_GE(commits.load(), 1000);
}

TEST(ScopeTest, AViewKeepsItsSnapshotAndSaysClosedAfterClose) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Put("orders", "a", "1").ok());
  ASSERT_TRUE(tx.Commit().ok());
  ReadView before = bus->Read();
  Transaction change = bus->Begin();
  ASSERT_TRUE(change.Put("orders", "a", "2").ok());
  ASSERT_TRUE(change.Put("orders", "b", "2").ok());
  ASSERT_TRUE(change.Commit().ok());
  auto a = before.Get("orders", "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(**a, "1");
  auto rows = before.Scan("orders", ScanOptions{});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->rows.size(), 1u);
  EXPECT_EQ(**bus->Read().Get("orders", "a"), "2");
  EXPECT_TRUE(before.Get("nope", "a").status().IsInvalidArgument());
  EXPECT_TRUE(before.Get("orders", "").status().IsInvalidArgument());

  Transaction reading = bus->Begin();
  ASSERT_TRUE(reading.Get("orders", "a").ok());  // holds a snapshot too
  ASSERT_TRUE(bus->Close().ok()) << "open views and transactions do not keep storage open";
  EXPECT_TRUE(before.Get("orders", "a").status().IsClosed());
  EXPECT_TRUE(before.Scan("orders", ScanOptions{}).status().IsClosed());
  EXPECT_TRUE(reading.Scan("orders", ScanOptions{}).status().IsClosed());
  EXPECT_TRUE(bus->Read().GetWithVersion("orders", "a").status().IsClosed());
}

// Several threads read one view at once (its reads are thread-safe).
TEST(ScopeTest, OneViewServesSeveralThreads) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  Transaction tx = bus->Begin();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(tx.Put("orders", "k" + std::to_string(100 + i), "v").ok());
  ASSERT_TRUE(tx.Commit().ok());
  const ReadView view = bus->Read();
  std::vector<std::thread> readers;
  std::atomic<int> rows{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto page = view.Scan("orders", ScanOptions{});
        if (page.ok()) rows += static_cast<int>(page->rows.size());
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(rows.load(), 4 * 50 * 100);
}

// A handler lists what is committed plus what it wrote itself.
TEST(ScopeTest, AHandlerScansItsOwnWritesOverCommittedState) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Put("effects", "line-1", "old").ok());
  ASSERT_TRUE(tx.Put("effects", "line-2", "old").ok());
  ASSERT_TRUE(tx.Commit().ok());
  SubscriberOptions lister;
  lister.name = "lister";
  lister.types = {"orders.order-approved.v1"};
  lister.handler = [](const Event&, HandlerContext& ctx) {
    if (!ctx.Delete("effects", "line-1").ok() || !ctx.Put("effects", "line-3", "new").ok()) {
      return Outcome::Reject("write");
    }
    auto page = ctx.Scan("effects", ScanOptions{});
    if (!page.ok()) return Outcome::Reject("scan");
    std::string listed;
    for (const auto& row : page->rows) listed += row.key + "=" + row.value + ";";
    return ctx.Put("orders", "listed", listed).ok() ? Outcome::Done() : Outcome::Reject("put");
  };
  ASSERT_TRUE(bus->Subscribe(std::move(lister)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction publish = bus->Begin();
  EventSpec e;
  e.type = "orders.order-approved.v1";
  e.subject = "o-1";
  ASSERT_TRUE(publish.Publish(e).ok());
  ASSERT_TRUE(publish.Commit().ok());
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  auto listed = bus->Read().Get("orders", "listed");
  ASSERT_TRUE(listed.ok() && listed->has_value());
  EXPECT_EQ(**listed, "line-2=old;line-3=new;");
}

// ---------------------------------------------------------------------------
// A child commits generations: each clears "orders", writes a generation's
// keys (their number and names change with the generation) and publishes
// the generation's event, in one unit. Killed at a random moment, the
// database holds exactly one generation's keys and its event is the last
// one: never half a range deleted, never the writes without the event.

constexpr const char* kGenType = "orders.generation.v1";

std::string GenKey(uint64_t gen, int i) { return "g" + std::to_string(gen % 13) + "-" + std::to_string(i); }
int GenKeys(uint64_t gen) { return 5 + static_cast<int>(gen % 11); }

[[noreturn]] void CommitGenerationsUntilKilled(const Options& options, int fd) {
  std::unique_ptr<Bus> bus;
  if (!Bus::Open(options, &bus).ok()) _exit(2);
  if (write(fd, "r", 1) != 1) _exit(3);
  for (uint64_t gen = 1;; ++gen) {
    Transaction tx = bus->Begin();
    if (gen % 2 == 0) {
      if (!tx.Clear("orders").ok()) _exit(4);
    } else if (!tx.DeleteRange("orders", "g", "h").ok()) {
      _exit(4);
    }
    for (int i = 0; i < GenKeys(gen); ++i) {
      if (!tx.Put("orders", GenKey(gen, i), std::to_string(gen)).ok()) _exit(4);
    }
    EventSpec e;
    e.type = kGenType;
    e.subject = "generations";
    e.data = std::to_string(gen);
    if (!tx.Publish(e).ok() || !tx.Commit().ok()) _exit(5);
  }
}

TEST(ScopeCrashTest, KilledMidwayRangeDeletionsLandWholeWithTheirEvents) {
  for (int round = 0; round < 6; ++round) {
    const uint32_t seed = BaseSeed() + static_cast<uint32_t>(round);
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    TempDir dir;
    Options options = testing::TestOptions(dir, round % 2 == 0 ? Durability::kSync : Durability::kBuffered);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      CommitGenerationsUntilKilled(options, fds[1]);
    }
    close(fds[1]);
    char c;
    ASSERT_EQ(read(fds[0], &c, 1), 1) << "the child failed to open";
    close(fds[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 250));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);

    storage::OpenOptions so;
    so.dir = dir.path();
    so.create_if_missing = false;
    so.app_column_families = options.column_families;
    std::unique_ptr<storage::Db> db;
    ASSERT_TRUE(storage::Db::Open(so, &db).ok());
    uint64_t last_seq = 0;
    ASSERT_TRUE(db->LastOutboxSeq(&last_seq).ok());
    ASSERT_GT(last_seq, 0u) << "the child committed nothing before it was killed";
    std::string envelope;
    bool found = false;
    ASSERT_TRUE(db->Get(db->cf(storage::Cf::kOutbox), storage::OutboxKey(last_seq), &envelope, &found).ok());
    ASSERT_TRUE(found);
    Event last;
    ASSERT_TRUE(internal::DecodeEnvelope(envelope, options.max_payload_bytes, &last).ok());
    const uint64_t gen = std::stoull(last.data);
    EXPECT_EQ(gen, last_seq) << "one event per generation";
    std::map<std::string, std::string> rows;
    ASSERT_TRUE(db->Scan(db->AppCf("orders"), "", SIZE_MAX, [&](std::string_view k, std::string_view v) {
                    rows.emplace(k, v);
                    return true;
                  }).ok());
    ASSERT_EQ(rows.size(), static_cast<size_t>(GenKeys(gen))) << "generation " << gen;
    for (int i = 0; i < GenKeys(gen); ++i) EXPECT_EQ(rows[GenKey(gen, i)], std::to_string(gen));
  }
}

}  // namespace
}  // namespace walbus
