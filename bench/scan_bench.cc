// Group 7, reads of application state: a ReadView's ordered scan and
// point reads against a raw RocksDB iterator and Get over the very same
// column family (the same files, opened by storage::Db with walbus's own
// options once the bus is closed), and a transaction's scan with 1,000 of
// its own writes merged against the same scan without them.
//
// Every run opens the database, reads everything once untimed (so each
// system starts from the same warm block cache), then times one pass.
// Both sides touch every key and value (their sizes are summed), so
// neither can skip the bytes.
#include <rocksdb/db.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "storage/db.h"

namespace bench {
namespace {

constexpr const char* kCf = "items";
constexpr size_t kOwnWrites = 1000;
constexpr size_t kRowsPerFill = 1000;

std::string ItemKey(uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "item-%09llu", static_cast<unsigned long long>(i));
  return buf;
}

walbus::Options ScanOptionsFor(const std::string& dir) {
  walbus::Options o = BusOptions(dir, walbus::Durability::kBuffered);
  o.column_families = {kCf};
  return o;
}

class Fixture;
std::unique_ptr<walbus::storage::Db> OpenRaw(const Fixture& fixture, std::string* error);

// The database every benchmark of the group reads: scan_keys rows of
// kDomainBytes, made once per process.
class Fixture {
 public:
  static Fixture& Get(std::string* error) {
    static Fixture* fixture = new Fixture();
    if (fixture->error_.empty() && !fixture->filled_) fixture->Fill();
    *error = fixture->error_;
    return *fixture;
  }
  std::string dir() const { return dir_.path(); }

 private:
  void Fill() {
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(ScanOptionsFor(dir()), &bus);
    for (uint64_t n = 0; s.ok() && n < CurrentProfile().scan_keys;) {
      walbus::Transaction tx = bus->Begin();
      for (size_t i = 0; i < kRowsPerFill && n < CurrentProfile().scan_keys; ++i, ++n)
        s = tx.Put(kCf, ItemKey(n), DomainValue());
      if (s.ok()) s = tx.Commit().status();
    }
    if (s.ok()) s = bus->Close();
    if (!s.ok()) error_ = ErrorText(s);
    if (error_.empty()) Compact();
    filled_ = true;
  }

  // Flushes and compacts the rows once, so that no run pays for a
  // compaction the fill left behind, and every open finds the same files.
  void Compact();

  TempDir dir_;
  bool filled_ = false;
  std::string error_;
};

void Fixture::Compact() {
  auto db = OpenRaw(*this, &error_);
  if (!error_.empty()) return;
  const rocksdb::Status s = db->raw()->CompactRange(rocksdb::CompactRangeOptions(), db->AppCf(kCf), nullptr, nullptr);
  if (!s.ok()) error_ = "compact the rows: " + s.ToString();
}

// The keys of `n` point reads, spread over the rows in a random order.
std::vector<std::string> RandomKeys(uint64_t rows, uint64_t n) {
  std::mt19937_64 rng(7);
  std::vector<std::string> keys;
  keys.reserve(n);
  for (uint64_t i = 0; i < n; ++i) keys.push_back(ItemKey(rng() % rows));
  return keys;
}

void Report(benchmark::State& state, uint64_t rows, double seconds, uint64_t bytes) {
  state.SetIterationTime(seconds);
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["rows_per_second"] = static_cast<double>(rows) / seconds;
  benchmark::DoNotOptimize(bytes);
}

// One pass over the data: counts the rows it reads into *rows and adds
// their bytes to *bytes; returns what failed, empty when nothing did.
template <typename Store>
using Pass = std::function<std::string(Store& store, uint64_t* rows, uint64_t* bytes)>;

// Runs `pass` twice on the store `open` makes, timing the second, and
// reports it; `expected_rows` (0: any) is checked.
template <typename Store>
void Measure(benchmark::State& state, uint64_t expected_rows,
             const std::function<std::unique_ptr<Store>(const Fixture&, std::string*)>& open, const Pass<Store>& pass) {
  std::string error;
  Fixture& fixture = Fixture::Get(&error);
  if (Failed(state, error)) return;
  for (auto _ : state) {
    std::unique_ptr<Store> store = open(fixture, &error);
    if (Failed(state, error)) return;
    uint64_t rows = 0, bytes = 0;
    if (Failed(state, pass(*store, &rows, &bytes))) return;
    rows = 0;
    const Clock::time_point start = Clock::now();
    if (Failed(state, pass(*store, &rows, &bytes))) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (expected_rows != 0 && Failed(state, rows == expected_rows ? "" : "rows missing")) return;
    Report(state, rows, seconds, bytes);
  }
}

std::unique_ptr<walbus::Bus> OpenBus(const Fixture& fixture, std::string* error) {
  std::unique_ptr<walbus::Bus> bus;
  *error = ErrorText(walbus::Bus::Open(ScanOptionsFor(fixture.dir()), &bus));
  return bus;
}

// storage::Db opens the bus's directory (the bus closed) with walbus's
// options; the raw passes use RocksDB's own calls on its handles.
std::unique_ptr<walbus::storage::Db> OpenRaw(const Fixture& fixture, std::string* error) {
  walbus::storage::OpenOptions so;
  so.dir = fixture.dir();
  so.create_if_missing = false;
  so.app_column_families = {kCf};
  std::unique_ptr<walbus::storage::Db> db;
  *error = ErrorText(walbus::storage::Db::Open(so, &db));
  return db;
}

void MeasureWalbus(benchmark::State& state, uint64_t expected_rows, const Pass<walbus::Bus>& pass) {
  Measure<walbus::Bus>(state, expected_rows, OpenBus, pass);
}

void MeasureRocksDb(benchmark::State& state, uint64_t expected_rows, const Pass<walbus::storage::Db>& pass) {
  Measure<walbus::storage::Db>(state, expected_rows, OpenRaw, pass);
}

uint64_t Rows() { return CurrentProfile().scan_keys; }

// Counts one row of a scan.
bool Count(std::string_view key, std::string_view value, uint64_t* rows, uint64_t* bytes) {
  ++*rows;
  *bytes += key.size() + value.size();
  return true;
}

void ScanView(benchmark::State& state) {
  MeasureWalbus(state, Rows(), [](walbus::Bus& bus, uint64_t* rows, uint64_t* bytes) {
    const walbus::ReadView view = bus.Read();
    return ErrorText(view.Scan(kCf, walbus::ScanOptions{},
                               [&](std::string_view k, std::string_view v) { return Count(k, v, rows, bytes); }));
  });
}

// A transaction's scan, with (own_writes) or without 1,000 buffered puts
// spread over the range: half overwrite rows, half are new keys between.
void ScanTransaction(benchmark::State& state, bool own_writes) {
  const uint64_t step = std::max<uint64_t>(1, Rows() / kOwnWrites);
  MeasureWalbus(
      state, Rows() + (own_writes ? kOwnWrites / 2 : 0), [&](walbus::Bus& bus, uint64_t* rows, uint64_t* bytes) {
        walbus::Transaction tx = bus.Begin();
        for (size_t i = 0; own_writes && i < kOwnWrites; ++i) {
          const std::string key = ItemKey(i * step) + (i % 2 == 0 ? "" : "-new");
          if (walbus::Status s = tx.Put(kCf, key, DomainValue()); !s.ok()) return ErrorText(s);
        }
        return ErrorText(tx.Scan(kCf, walbus::ScanOptions{},
                                 [&](std::string_view k, std::string_view v) { return Count(k, v, rows, bytes); }));
      });
}

void ScanRocksDb(benchmark::State& state) {
  MeasureRocksDb(state, Rows(), [](walbus::storage::Db& db, uint64_t* rows, uint64_t* bytes) {
    std::unique_ptr<rocksdb::Iterator> it(db.raw()->NewIterator(rocksdb::ReadOptions(), db.AppCf(kCf)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      Count(std::string_view(it->key().data(), it->key().size()),
            std::string_view(it->value().data(), it->value().size()), rows, bytes);
    }
    return it->status().ok() ? std::string() : it->status().ToString();
  });
}

void GetView(benchmark::State& state) {
  const std::vector<std::string> keys = RandomKeys(Rows(), CurrentProfile().point_gets);
  MeasureWalbus(state, keys.size(), [&](walbus::Bus& bus, uint64_t* rows, uint64_t* bytes) {
    const walbus::ReadView view = bus.Read();
    for (const std::string& key : keys) {
      auto value = view.Get(kCf, key);
      if (!value.ok()) return ErrorText(value.status());
      ++*rows;
      *bytes += value->has_value() ? (*value)->size() : 0;
    }
    return std::string();
  });
}

void GetRocksDb(benchmark::State& state) {
  const std::vector<std::string> keys = RandomKeys(Rows(), CurrentProfile().point_gets);
  MeasureRocksDb(state, keys.size(), [&](walbus::storage::Db& db, uint64_t* rows, uint64_t* bytes) {
    rocksdb::ColumnFamilyHandle* cf = db.AppCf(kCf);
    std::string value;
    for (const std::string& key : keys) {
      const rocksdb::Status s = db.raw()->Get(rocksdb::ReadOptions(), cf, key, &value);
      if (!s.ok() && !s.IsNotFound()) return s.ToString();
      ++*rows;
      *bytes += s.ok() ? value.size() : 0;
    }
    return std::string();
  });
}

}  // namespace

void RegisterScanBenchmarks() {
  RegisterMeasurement(BenchName("Scan", {{"system", "walbus"}, {"path", "view"}}), ScanView);
  RegisterMeasurement(BenchName("Scan", {{"system", "rocksdb"}, {"path", "iterator"}}), ScanRocksDb);
  RegisterMeasurement(BenchName("Scan", {{"system", "walbus"}, {"path", "transaction"}}),
                      [](benchmark::State& state) { ScanTransaction(state, false); });
  RegisterMeasurement(BenchName("Scan", {{"system", "walbus"}, {"path", "merged"}}),
                      [](benchmark::State& state) { ScanTransaction(state, true); });
  RegisterMeasurement(BenchName("Scan", {{"system", "walbus"}, {"path", "get"}}), GetView);
  RegisterMeasurement(BenchName("Scan", {{"system", "rocksdb"}, {"path", "get"}}), GetRocksDb);
}

}  // namespace bench
