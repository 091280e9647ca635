// Group 1, publish: one transaction = a 100-byte domain write + one event
// with 200 bytes of data, committed by 1..64 producer threads for a fixed
// time, buffered and synced; walbus against raw RocksDB writing the same
// bytes (the envelope's size) in one batch per transaction, and against
// the SQLite WAL outbox (synchronous=NORMAL for buffered, FULL for sync).
// The three systems run one after the other for each configuration, so a
// ratio compares neighbours in time on a shared, noisy machine.
#include <memory>
#include <string>

#include "bench/bench_common.h"
#include "bench/raw_rocksdb.h"
#include "bench/sqlite_outbox.h"

namespace bench {
namespace {

constexpr uint64_t kPublishSubjects = 1000;

// Subjects "s-0".."s-999": the raw baseline's value matches the envelope
// of the longest.
constexpr size_t kPublishSubjectBytes = 5;

void Report(benchmark::State& state, const LoadResult& load) {
  state.SetIterationTime(load.seconds);
  state.counters["events"] = static_cast<double>(load.operations);
  state.counters["events_per_second"] = static_cast<double>(load.operations) / load.seconds;
}

void RunWalbus(benchmark::State& state, walbus::Durability durability, int producers) {
  for (auto _ : state) {
    TempDir dir;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), durability), &bus);
    if (Failed(state, ErrorText(s))) return;
    const LoadResult load = RunClosedLoop(producers, CurrentProfile().publish_seconds, 0, [&](int p, uint64_t n) {
      walbus::Status c = CommitOne(*bus, DomainKey(p, n), SubjectOf(n, kPublishSubjects), EventData());
      return ErrorText(c);
    });
    if (Failed(state, load.error)) return;
    const walbus::BusStats stats = bus->Stats();
    bus->Close().IgnoreError();
    Report(state, load);
    state.counters["commits_per_write"] =
        stats.commit_groups == 0 ? 0 : static_cast<double>(stats.commits) / static_cast<double>(stats.commit_groups);
  }
}

void RunRawRocksDb(benchmark::State& state, walbus::Durability durability, int producers) {
  for (auto _ : state) {
    TempDir dir;
    std::string error;
    std::unique_ptr<RawRocksDb> raw = RawRocksDb::Create(dir.path(), durability == walbus::Durability::kSync,
                                                         EnvelopeBytes(kPublishSubjectBytes), &error);
    if (Failed(state, error)) return;
    const LoadResult load = RunClosedLoop(producers, CurrentProfile().publish_seconds, 0,
                                          [&](int p, uint64_t n) { return raw->CommitOne(DomainKey(p, n)); });
    if (Failed(state, load.error)) return;
    Report(state, load);
  }
}

void RunSqlite(benchmark::State& state, walbus::Durability durability, int producers) {
  for (auto _ : state) {
    TempDir dir;
    std::string error;
    const SqliteSync sync = durability == walbus::Durability::kSync ? SqliteSync::kFull : SqliteSync::kNormal;
    std::unique_ptr<SqliteOutbox> outbox = SqliteOutbox::Create(dir.path(), sync, &error);
    if (Failed(state, error)) return;
    std::vector<std::unique_ptr<SqliteOutbox::Connection>> connections;
    for (int p = 0; p < producers && error.empty(); ++p) connections.push_back(outbox->Connect(&error));
    if (Failed(state, error)) return;
    const LoadResult load = RunClosedLoop(producers, CurrentProfile().publish_seconds, 0, [&](int p, uint64_t n) {
      return connections[static_cast<size_t>(p)]->Publish(DomainKey(p, n), SubjectOf(n, kPublishSubjects), EventData());
    });
    if (Failed(state, load.error)) return;
    Report(state, load);
  }
}

}  // namespace

void RegisterPublishBenchmarks() {
  for (walbus::Durability durability : {walbus::Durability::kBuffered, walbus::Durability::kSync}) {
    for (int producers : CurrentProfile().producer_counts) {
      auto name = [&](const char* system) {
        return BenchName(
            "Publish",
            {{"system", system}, {"durability", DurabilityName(durability)}, {"producers", std::to_string(producers)}});
      };
      RegisterMeasurement(name("walbus"), [=](benchmark::State& s) { RunWalbus(s, durability, producers); });
      RegisterMeasurement(name("rocksdb"), [=](benchmark::State& s) { RunRawRocksDb(s, durability, producers); });
      RegisterMeasurement(name("sqlite"), [=](benchmark::State& s) { RunSqlite(s, durability, producers); });
    }
  }
}

}  // namespace bench
