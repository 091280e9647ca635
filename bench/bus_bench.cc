// walbus against raw RocksDB writing the same bytes.
//
//   BM_Publish / BM_RawRocksDbPublish: one transaction = a 100-byte domain
//     write + one event (200 bytes of data; the raw baseline writes a
//     ~230-byte outbox value under be64(seq)), by 1 or 16 threads, buffered
//     or synced.
//   BM_EndToEnd / BM_RawRocksDbEndToEnd: publish a batch of events from one
//     thread and have one consumer write one effect per event (the raw
//     baseline: an iterator over the outbox, inbox key + effect + checkpoint
//     in one batch per event, one DeleteRange at the end).
//
// The raw baselines use RocksDB's default options. Absolute figures depend
// on the machine and its disk: read them as ratios between benchmarks of
// one run.
#include <benchmark/benchmark.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/write_batch.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "walbus/bus.h"
#include "walbus/event.h"
#include "walbus/options.h"
#include "walbus/status.h"

namespace {

namespace fs = std::filesystem;

constexpr size_t kDomainBytes = 100;
constexpr size_t kEventDataBytes = 200;
constexpr size_t kOutboxValueBytes = 230;  // About an envelope around 200 bytes of data.
constexpr int64_t kEndToEndEvents = 20000;
constexpr int64_t kEndToEndSubjects = 1000;
constexpr auto kIdleTimeout = std::chrono::minutes(5);
const std::string kEventType = "bench.item-recorded.v1";

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

const std::string& DomainValue() {
  static const std::string v = RandomBytes(kDomainBytes, 1);
  return v;
}
const std::string& EventData() {
  static const std::string v = RandomBytes(kEventDataBytes, 2);
  return v;
}
const std::string& OutboxValue() {
  static const std::string v = RandomBytes(kOutboxValueBytes, 3);
  return v;
}

std::string Be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return s;
}
std::string Be32(uint32_t v) { return Be64(v).substr(4); }

std::string DomainKey(int thread, int64_t n) {
  return "d-" + std::to_string(thread) + "-" + std::to_string(n);
}
std::string SubjectOf(int64_t n) { return "k-" + std::to_string(n % kEndToEndSubjects); }

// A fresh directory under the system temp dir; the database goes in
// path(), which does not exist yet. Removed on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<uint64_t> counter{0};
    root_ = fs::temp_directory_path() /
            ("walbus-bench-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path() const { return (root_ / "db").string(); }

 private:
  fs::path root_;
};

// ---- walbus ----

// The bus shared by the threads of one benchmark run, made by Setup and
// destroyed by Teardown (both run once per run, outside the threads).
struct WalbusRun {
  TempDir dir;
  std::unique_ptr<walbus::Bus> bus;
  std::string error;  // Set when opening failed; every thread then skips.
};
std::unique_ptr<WalbusRun> g_walbus;

void OpenWalbus(walbus::Durability durability, std::vector<walbus::SubscriberOptions> subscribers) {
  g_walbus = std::make_unique<WalbusRun>();
  walbus::Options opt;
  opt.dir = g_walbus->dir.path();
  opt.durability = durability;
  opt.column_families = {"domain", "effects"};
  walbus::Status s = walbus::Bus::Open(opt, &g_walbus->bus);
  for (walbus::SubscriberOptions& sub : subscribers) {
    if (s.ok()) s = g_walbus->bus->Subscribe(std::move(sub));
  }
  if (s.ok()) s = g_walbus->bus->Start();
  if (!s.ok()) {
    g_walbus->error = s.ToString();
    g_walbus->bus.reset();
  }
}

void CloseWalbus(const benchmark::State&) {
  if (g_walbus && g_walbus->bus) g_walbus->bus->Close().IgnoreError();
  g_walbus.reset();
}

walbus::Durability DurabilityArg(const benchmark::State& state) {
  return state.range(0) != 0 ? walbus::Durability::kSync : walbus::Durability::kBuffered;
}

void SetUpPublish(const benchmark::State& state) { OpenWalbus(DurabilityArg(state), {}); }

walbus::Outcome WriteOneEffect(const walbus::Event& e, walbus::HandlerContext& ctx) {
  if (!ctx.Put("effects", e.subject + "/" + std::to_string(e.seq), "1").ok()) {
    return walbus::Outcome::RetryAfter(std::chrono::milliseconds(1));
  }
  return walbus::Outcome::Done();
}

void SetUpEndToEnd(const benchmark::State&) {
  std::vector<walbus::SubscriberOptions> subs(1);
  subs[0].name = "effects-writer";
  subs[0].types = {kEventType};
  subs[0].handler = WriteOneEffect;
  OpenWalbus(walbus::Durability::kBuffered, std::move(subs));
}

// One domain write and one event, committed.
walbus::Status CommitOne(walbus::Bus& bus, const std::string& key, const std::string& subject) {
  walbus::Transaction tx = bus.Begin();
  if (walbus::Status s = tx.Put("domain", key, DomainValue()); !s.ok()) return s;
  walbus::EventSpec event;
  event.type = kEventType;
  event.subject = subject;
  event.data = EventData();
  if (auto id = tx.Publish(event); !id.ok()) return id.status();
  walbus::Result<walbus::Receipt> receipt = tx.Commit();
  return receipt.status();
}

bool WalbusReady(benchmark::State& state) {
  if (g_walbus && g_walbus->bus) return true;
  state.SkipWithError(g_walbus ? g_walbus->error.c_str() : "bus not set up");
  return false;
}

void BM_Publish(benchmark::State& state) {
  if (!WalbusReady(state)) return;
  walbus::Bus& bus = *g_walbus->bus;
  int64_t n = 0;
  for (auto _ : state) {
    const std::string key = DomainKey(state.thread_index(), n++);
    if (walbus::Status s = CommitOne(bus, key, key); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.counters["events_per_second"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

void BM_EndToEnd(benchmark::State& state) {
  if (!WalbusReady(state)) return;
  walbus::Bus& bus = *g_walbus->bus;
  int64_t n = 0;
  for (auto _ : state) {
    walbus::Status s;
    for (int64_t i = 0; s.ok() && i < kEndToEndEvents; ++i, ++n) {
      s = CommitOne(bus, DomainKey(0, n), SubjectOf(n));
    }
    if (s.ok()) s = bus.WaitIdle(kIdleTimeout);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.counters["events_per_second"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

// ---- raw RocksDB ----

enum RawCf : size_t { kDomain, kOutbox, kInbox, kEffects, kCheckpoints, kRawCfCount };

struct RawRun {
  TempDir dir;
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;  // Indexed by RawCf.
  rocksdb::WriteOptions write;
  std::atomic<uint64_t> next_seq{1};
  std::string error;

  rocksdb::ColumnFamilyHandle* cf(RawCf c) const { return cfs[c]; }
  ~RawRun() {
    for (rocksdb::ColumnFamilyHandle* h : cfs) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    delete db;
  }
};
std::unique_ptr<RawRun> g_raw;

void OpenRaw(bool sync) {
  g_raw = std::make_unique<RawRun>();
  g_raw->write.sync = sync;
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = {
      {rocksdb::kDefaultColumnFamilyName, {}}, {"domain", {}},  {"outbox", {}},
      {"inbox", {}},                           {"effects", {}}, {"checkpoints", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(options, g_raw->dir.path(), descriptors, &handles, &g_raw->db);
  if (!s.ok()) {
    g_raw->error = s.ToString();
    return;
  }
  g_raw->db->DestroyColumnFamilyHandle(handles[0]).PermitUncheckedError();  // "default"
  g_raw->cfs.assign(handles.begin() + 1, handles.end());
}

void SetUpRawPublish(const benchmark::State& state) { OpenRaw(state.range(0) != 0); }
void SetUpRawEndToEnd(const benchmark::State&) { OpenRaw(false); }
void CloseRaw(const benchmark::State&) { g_raw.reset(); }

bool RawReady(benchmark::State& state) {
  if (g_raw && g_raw->db) return true;
  state.SkipWithError(g_raw ? g_raw->error.c_str() : "database not set up");
  return false;
}

// The raw equivalent of CommitOne: domain row and outbox entry, one batch.
rocksdb::Status RawCommitOne(RawRun& raw, const std::string& key, uint64_t* seq) {
  *seq = raw.next_seq.fetch_add(1, std::memory_order_relaxed);
  rocksdb::WriteBatch batch;
  batch.Put(raw.cf(kDomain), key, DomainValue());
  batch.Put(raw.cf(kOutbox), Be64(*seq), OutboxValue());
  return raw.db->Write(raw.write, &batch);
}

void BM_RawRocksDbPublish(benchmark::State& state) {
  if (!RawReady(state)) return;
  int64_t n = 0;
  for (auto _ : state) {
    uint64_t seq = 0;
    rocksdb::Status s = RawCommitOne(*g_raw, DomainKey(state.thread_index(), n++), &seq);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.counters["events_per_second"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

// The raw consumer: reads outbox entries [first, last] as the producer makes
// them visible through `published`, one batch per event (inbox key + effect
// + checkpoint), then deletes the consumed range with one DeleteRange.
rocksdb::Status RawConsume(RawRun& raw, uint64_t first, uint64_t last,
                           const std::atomic<uint64_t>& published) {
  const std::string inbox_prefix = Be32(1);
  uint64_t next = first;
  while (next <= last) {
    const uint64_t visible = published.load(std::memory_order_acquire);
    if (visible < next) {
      std::this_thread::yield();
      continue;
    }
    const std::string lower = Be64(next);
    const std::string upper = Be64(visible + 1);
    rocksdb::Slice lower_slice(lower), upper_slice(upper);
    rocksdb::ReadOptions read;
    read.iterate_lower_bound = &lower_slice;
    read.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(raw.db->NewIterator(read, raw.cf(kOutbox)));
    for (it->Seek(lower_slice); it->Valid(); it->Next(), ++next) {
      const std::string seq_key = it->key().ToString();
      const std::string event_id = it->value().ToString().substr(0, 8) + seq_key;  // 16 bytes, unique.
      rocksdb::WriteBatch batch;
      batch.Put(raw.cf(kInbox), inbox_prefix + event_id, seq_key);
      batch.Put(raw.cf(kEffects), SubjectOf(static_cast<int64_t>(next)) + "/" + std::to_string(next), "1");
      batch.Put(raw.cf(kCheckpoints), inbox_prefix, seq_key);
      if (rocksdb::Status s = raw.db->Write(raw.write, &batch); !s.ok()) return s;
    }
    if (!it->status().ok()) return it->status();
  }
  return raw.db->DeleteRange(raw.write, raw.cf(kOutbox), Be64(first), Be64(last + 1));
}

void BM_RawRocksDbEndToEnd(benchmark::State& state) {
  if (!RawReady(state)) return;
  RawRun& raw = *g_raw;
  int64_t n = 0;
  for (auto _ : state) {
    const uint64_t first = raw.next_seq.load();
    const uint64_t last = first + kEndToEndEvents - 1;
    std::atomic<uint64_t> published{first - 1};
    rocksdb::Status consumed;
    std::thread consumer([&] { consumed = RawConsume(raw, first, last, published); });
    rocksdb::Status s;
    for (int64_t i = 0; s.ok() && i < kEndToEndEvents; ++i, ++n) {
      uint64_t seq = 0;
      s = RawCommitOne(raw, DomainKey(0, n), &seq);
      if (s.ok()) published.store(seq, std::memory_order_release);
    }
    if (!s.ok()) published.store(last, std::memory_order_release);  // Let the consumer finish.
    consumer.join();
    if (s.ok()) s = consumed;
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.counters["events_per_second"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_Publish)
    ->Setup(SetUpPublish)
    ->Teardown(CloseWalbus)
    ->ArgName("sync")
    ->Arg(0)
    ->Arg(1)
    ->Threads(1)
    ->Threads(16)
    ->MinTime(0.5)
    ->UseRealTime();

BENCHMARK(BM_RawRocksDbPublish)
    ->Setup(SetUpRawPublish)
    ->Teardown(CloseRaw)
    ->ArgName("sync")
    ->Arg(0)
    ->Arg(1)
    ->Threads(1)
    ->Threads(16)
    ->MinTime(0.5)
    ->UseRealTime();

BENCHMARK(BM_EndToEnd)
    ->Setup(SetUpEndToEnd)
    ->Teardown(CloseWalbus)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_RawRocksDbEndToEnd)
    ->Setup(SetUpRawEndToEnd)
    ->Teardown(CloseRaw)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
