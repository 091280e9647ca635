// Group 2, end to end: producers commit "domain write + event" for a fixed
// time while one or three subscribers each write an inbox record and an
// effect per event; the figure is events published per second from the
// first commit until every subscriber has handled every event (so a
// subscriber that falls behind pays its drain). EndToEndNoEffect runs the
// kBuffered, one-subscriber load with handlers that write nothing: what
// delivery itself costs, apart from the handler's own write.
//
// walbus: handlers write their effect through HandlerContext (committed
// with the inbox record). SQLite: one relay thread per subscriber reads
// the outbox in batches and commits, per batch, the inbox rows, the
// effects and the outbox rows' marks (sqlite_outbox.h); the outbox is
// trimmed every kTrimEvery events, as walbus trims by range. The floor:
// the same durable work by hand on raw RocksDB (raw_rocksdb.h), the least
// that gives exactly-once effects.
#include <algorithm>
#include <memory>
#include <string>
#include <thread>

#include "bench/bench_common.h"
#include "bench/raw_rocksdb.h"
#include "bench/sqlite_outbox.h"

namespace bench {
namespace {

constexpr uint64_t kSubjects = 1000;
constexpr size_t kRelayBatch = 1024;
constexpr int64_t kTrimEvery = 10000;

void RunWalbus(benchmark::State& state, walbus::Durability durability, int subscribers, bool write_effect = true) {
  const Profile& profile = CurrentProfile();
  for (auto _ : state) {
    EndToEndResult r;
    if (Failed(state, RunWalbusEndToEnd({.durability = durability,
                                         .subscribers = subscribers,
                                         .producers = profile.end_to_end_producers,
                                         .seconds = profile.end_to_end_seconds,
                                         .subjects = kSubjects,
                                         .write_effect = write_effect},
                                        &r))) {
      return;
    }
    ReportEndToEnd(state, r, subscribers);
  }
}

// A baseline's run, once its consumers stopped: the first error, or its
// events/s from `start` until now.
void ReportBaseline(benchmark::State& state, const LoadResult& load, const std::vector<std::string>& consumer_errors,
                    Clock::time_point start, int subscribers) {
  if (Failed(state, load.error)) return;
  for (const std::string& e : consumer_errors) {
    if (Failed(state, e)) return;
  }
  ReportEndToEnd(state,
                 EndToEndResult{.events = load.operations,
                                .publish_seconds = load.seconds,
                                .total_seconds = std::chrono::duration<double>(Clock::now() - start).count()},
                 subscribers);
}

// One subscriber's relay: reads past its cursor, applies each batch in one
// transaction, until the producers are done and it has passed their last
// row. Relay 0 also trims the rows every relay has passed.
std::string Relay(SqliteOutbox& outbox, SqliteOutbox::Connection& c, int subscriber,
                  std::vector<std::atomic<int64_t>>& cursors, const std::atomic<int64_t>& final_seq) {
  int64_t cursor = 0;
  int64_t trimmed = 0;
  std::vector<OutboxRow> rows;
  while (true) {
    rows.clear();
    if (std::string e = c.ReadAfter(cursor, kRelayBatch, &rows); !e.empty()) return e;
    if (rows.empty()) {
      const int64_t last = final_seq.load();
      if (last >= 0 && cursor >= last) return {};
      outbox.WaitForSeqAbove(cursor, std::chrono::milliseconds(1));
      continue;
    }
    if (std::string e = c.Apply(subscriber, rows); !e.empty()) return e;
    cursor = rows.back().seq;
    cursors[static_cast<size_t>(subscriber)].store(cursor);
    if (subscriber == 0) {
      int64_t passed = cursor;
      for (const auto& other : cursors) passed = std::min(passed, other.load());
      if (passed - trimmed >= kTrimEvery) {
        if (std::string e = c.DeleteThrough(passed); !e.empty()) return e;
        trimmed = passed;
      }
    }
  }
}

void RunSqlite(benchmark::State& state, walbus::Durability durability, int subscribers) {
  const Profile& profile = CurrentProfile();
  for (auto _ : state) {
    TempDir dir;
    std::string error;
    const SqliteSync sync = durability == walbus::Durability::kSync ? SqliteSync::kFull : SqliteSync::kNormal;
    std::unique_ptr<SqliteOutbox> outbox = SqliteOutbox::Create(dir.path(), sync, &error);
    if (Failed(state, error)) return;
    std::vector<std::unique_ptr<SqliteOutbox::Connection>> producers, relays;
    for (int p = 0; p < profile.end_to_end_producers && error.empty(); ++p)
      producers.push_back(outbox->Connect(&error));
    for (int i = 0; i < subscribers && error.empty(); ++i) relays.push_back(outbox->Connect(&error));
    if (Failed(state, error)) return;

    std::vector<std::atomic<int64_t>> cursors(static_cast<size_t>(subscribers));
    std::atomic<int64_t> final_seq{-1};  // set once the producers stopped
    std::vector<std::string> relay_errors(static_cast<size_t>(subscribers));
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> relay_threads;
    for (int i = 0; i < subscribers; ++i) {
      relay_threads.emplace_back([&, i] {
        relay_errors[static_cast<size_t>(i)] = Relay(*outbox, *relays[static_cast<size_t>(i)], i, cursors, final_seq);
      });
    }
    const LoadResult load =
        RunClosedLoop(profile.end_to_end_producers, profile.end_to_end_seconds, 0, [&](int p, uint64_t n) {
          return producers[static_cast<size_t>(p)]->Publish(DomainKey(p, n), SubjectOf(n, kSubjects), EventData());
        });
    final_seq.store(load.error.empty() ? outbox->last_seq() : 0);  // on error the relays just stop
    for (std::thread& t : relay_threads) t.join();
    ReportBaseline(state, load, relay_errors, start, subscribers);
  }
}

void RunFloor(benchmark::State& state, walbus::Durability durability, int subscribers) {
  const Profile& profile = CurrentProfile();
  for (auto _ : state) {
    TempDir dir;
    std::string error;
    // Most subjects are the longest ("s-100".."s-999"): size the envelope for them.
    std::unique_ptr<RawRocksDb> raw =
        RawRocksDb::Create(dir.path(),
                           {.sync = durability == walbus::Durability::kSync,
                            .outbox_value_bytes = EnvelopeBytes(SubjectOf(kSubjects - 1, kSubjects).size()),
                            .consumers = subscribers,
                            .subjects = kSubjects},
                           &error);
    if (Failed(state, error)) return;
    std::vector<std::string> consumer_errors(static_cast<size_t>(subscribers));
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> consumers;
    for (int i = 0; i < subscribers; ++i) {
      consumers.emplace_back([&, i] { consumer_errors[static_cast<size_t>(i)] = raw->Consume(i); });
    }
    const LoadResult load = RunClosedLoop(profile.end_to_end_producers, profile.end_to_end_seconds, 0,
                                          [&](int p, uint64_t n) { return raw->CommitOne(DomainKey(p, n)); });
    raw->StopConsumers();
    for (std::thread& t : consumers) t.join();
    ReportBaseline(state, load, consumer_errors, start, subscribers);
  }
}

// The row's name: run_suite.py looks rows up by these parameters.
std::string Name(const char* family, const char* system, walbus::Durability durability, int subscribers) {
  return BenchName(family, {{"system", system},
                            {"durability", DurabilityName(durability)},
                            {"subscribers", std::to_string(subscribers)},
                            {"producers", std::to_string(CurrentProfile().end_to_end_producers)}});
}

}  // namespace

void RegisterEndToEndBenchmarks() {
  for (walbus::Durability durability : {walbus::Durability::kBuffered, walbus::Durability::kSync}) {
    for (int subscribers : {1, 3}) {
      RegisterMeasurement(Name("EndToEnd", "walbus", durability, subscribers),
                          [=](benchmark::State& s) { RunWalbus(s, durability, subscribers); });
      RegisterMeasurement(Name("EndToEnd", "sqlite", durability, subscribers),
                          [=](benchmark::State& s) { RunSqlite(s, durability, subscribers); });
      RegisterMeasurement(Name("EndToEnd", "floor", durability, subscribers),
                          [=](benchmark::State& s) { RunFloor(s, durability, subscribers); });
    }
  }
  // walbus's own share of delivery: the same load, with handlers that
  // write nothing (beside EndToEnd's with one effect per event).
  constexpr auto kBuffered = walbus::Durability::kBuffered;
  RegisterMeasurement(Name("EndToEndNoEffect", "walbus", kBuffered, 1),
                      [](benchmark::State& s) { RunWalbus(s, kBuffered, 1, /*write_effect=*/false); });
}

}  // namespace bench
