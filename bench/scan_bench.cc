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
  uint64_t rows() const { return CurrentProfile().scan_keys; }

 private:
  void Fill() {
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(ScanOptionsFor(dir()), &bus);
    for (uint64_t n = 0; s.ok() && n < rows();) {
      walbus::Transaction tx = bus->Begin();
      for (size_t i = 0; i < kRowsPerFill && n < rows(); ++i, ++n) s = tx.Put(kCf, ItemKey(n), DomainValue());
      if (s.ok()) s = tx.Commit().status();
    }
    if (s.ok()) s = bus->Close();
    if (!s.ok()) error_ = ErrorText(s);
    filled_ = true;
  }

  TempDir dir_;
  bool filled_ = false;
  std::string error_;
};

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

// Runs `pass` twice, timing the second; it returns the rows it read and
// adds the bytes to *bytes.
template <typename Pass>
double TimedSecondPass(Pass pass, uint64_t* rows, uint64_t* bytes) {
  pass(rows, bytes);
  *rows = 0;
  const Clock::time_point start = Clock::now();
  pass(rows, bytes);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void ScanView(benchmark::State& state) {
  std::string error;
  Fixture& fixture = Fixture::Get(&error);
  if (Failed(state, error)) return;
  for (auto _ : state) {
    std::unique_ptr<walbus::Bus> bus;
    if (Failed(state, ErrorText(walbus::Bus::Open(ScanOptionsFor(fixture.dir()), &bus)))) return;
    uint64_t rows = 0, bytes = 0;
    walbus::Status s;
    const double seconds = TimedSecondPass(
        [&](uint64_t* n, uint64_t* b) {
          const walbus::ReadView view = bus->Read();
          s = view.Scan(kCf, walbus::ScanOptions{}, [&](std::string_view k, std::string_view v) {
            ++*n;
            *b += k.size() + v.size();
            return true;
          });
        },
        &rows, &bytes);
    if (Failed(state, ErrorText(s)) || Failed(state, rows == fixture.rows() ? "" : "rows missing")) return;
    Report(state, rows, seconds, bytes);
  }
}

// A transaction's scan, with (own_writes) or without 1,000 buffered puts
// spread over the range: half overwrite rows, half are new keys between.
void ScanTransaction(benchmark::State& state, bool own_writes) {
  std::string error;
  Fixture& fixture = Fixture::Get(&error);
  if (Failed(state, error)) return;
  for (auto _ : state) {
    std::unique_ptr<walbus::Bus> bus;
    if (Failed(state, ErrorText(walbus::Bus::Open(ScanOptionsFor(fixture.dir()), &bus)))) return;
    uint64_t rows = 0, bytes = 0;
    walbus::Status s;
    const uint64_t step = std::max<uint64_t>(1, fixture.rows() / kOwnWrites);
    const double seconds = TimedSecondPass(
        [&](uint64_t* n, uint64_t* b) {
          walbus::Transaction tx = bus->Begin();
          for (size_t i = 0; own_writes && i < kOwnWrites; ++i) {
            const std::string key = ItemKey(i * step) + (i % 2 == 0 ? "" : "-new");
            s = tx.Put(kCf, key, DomainValue());
          }
          s = tx.Scan(kCf, walbus::ScanOptions{}, [&](std::string_view k, std::string_view v) {
            ++*n;
            *b += k.size() + v.size();
            return true;
          });
        },
        &rows, &bytes);
    const uint64_t expected = fixture.rows() + (own_writes ? kOwnWrites / 2 : 0);
    if (Failed(state, ErrorText(s)) || Failed(state, rows == expected ? "" : "rows missing")) return;
    Report(state, rows, seconds, bytes);
  }
}

// storage::Db opens the bus's directory (the bus closed) with walbus's
// options; the reads below are RocksDB's own calls on its handles.
std::unique_ptr<walbus::storage::Db> OpenRaw(const Fixture& fixture, std::string* error) {
  walbus::storage::OpenOptions so;
  so.dir = fixture.dir();
  so.create_if_missing = false;
  so.app_column_families = {kCf};
  std::unique_ptr<walbus::storage::Db> db;
  *error = ErrorText(walbus::storage::Db::Open(so, &db));
  return db;
}

void ScanRocksDb(benchmark::State& state) {
  std::string error;
  Fixture& fixture = Fixture::Get(&error);
  if (Failed(state, error)) return;
  for (auto _ : state) {
    auto db = OpenRaw(fixture, &error);
    if (Failed(state, error)) return;
    uint64_t rows = 0, bytes = 0;
    const double seconds = TimedSecondPass(
        [&](uint64_t* n, uint64_t* b) {
          std::unique_ptr<rocksdb::Iterator> it(db->raw()->NewIterator(rocksdb::ReadOptions(), db->AppCf(kCf)));
          for (it->SeekToFirst(); it->Valid(); it->Next()) {
            ++*n;
            *b += it->key().size() + it->value().size();
          }
        },
        &rows, &bytes);
    if (Failed(state, rows == fixture.rows() ? "" : "rows missing")) return;
    Report(state, rows, seconds, bytes);
  }
}

void GetView(benchmark::State& state) {
  std::string error;
  Fixture& fixture = Fixture::Get(&error);
  if (Failed(state, error)) return;
  const std::vector<std::string> keys = RandomKeys(fixture.rows(), CurrentProfile().point_gets);
  for (auto _ : state) {
    std::unique_ptr<walbus::Bus> bus;
    if (Failed(state, ErrorText(walbus::Bus::Open(ScanOptionsFor(fixture.dir()), &bus)))) return;
    uint64_t rows = 0, bytes = 0;
    walbus::Status s;
    const double seconds = TimedSecondPass(
        [&](uint64_t* n, uint64_t* b) {
          const walbus::ReadView view = bus->Read();
          for (const std::string& key : keys) {
            auto value = view.Get(kCf, key);
            if (!value.ok()) s = value.status();
            ++*n;
            *b += value.ok() && value->has_value() ? (*value)->size() : 0;
          }
        },
        &rows, &bytes);
    if (Failed(state, ErrorText(s))) return;
    Report(state, rows, seconds, bytes);
  }
}

void GetRocksDb(benchmark::State& state) {
  std::string error;
  Fixture& fixture = Fixture::Get(&error);
  if (Failed(state, error)) return;
  const std::vector<std::string> keys = RandomKeys(fixture.rows(), CurrentProfile().point_gets);
  for (auto _ : state) {
    auto db = OpenRaw(fixture, &error);
    if (Failed(state, error)) return;
    uint64_t rows = 0, bytes = 0;
    const double seconds = TimedSecondPass(
        [&](uint64_t* n, uint64_t* b) {
          rocksdb::ColumnFamilyHandle* cf = db->AppCf(kCf);
          std::string value;
          for (const std::string& key : keys) {
            const rocksdb::Status s = db->raw()->Get(rocksdb::ReadOptions(), cf, key, &value);
            ++*n;
            *b += s.ok() ? value.size() : 0;
          }
        },
        &rows, &bytes);
    Report(state, rows, seconds, bytes);
  }
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
