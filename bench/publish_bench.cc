// Group 1, publish: one transaction = a 100-byte domain write + one event
// with 200 bytes of data, committed by 1..64 producer threads for a fixed
// time, buffered and synced; walbus against raw RocksDB writing the same
// bytes (the envelope's size) in one batch per transaction, and against
// the SQLite WAL outbox (synchronous=NORMAL for buffered, FULL for sync).
// The three systems run one after the other for each configuration, so a
// ratio compares neighbours in time on a shared, noisy machine.
//
// PublishBufferedSync: kBuffered publishing with the log's background
// sync against the same without it (1 and 4 producers).
//
// PublishCommitSync: a kBuffered bus whose producers ask for an fsync
// (CommitOptions::sync) on every 10th commit, on every commit, and on
// none, beside a kSync bus, with 16 producers: what a synced commit costs
// the others in its group, and whether asking per commit costs more than
// the bus-wide setting.
//
// PublishContract: the same commits with a FlatBuffers payload of about
// 200 bytes (strings, a vector of tables, a struct, scalars), published
// under a type with a registered schema, so each Publish verifies it, and
// under the same type without one.
#include <flatbuffers/idl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// `buffered_sync_interval`: the kBuffered log's background sync (the
// default when not given; 24 h, which no run reaches, measures without it).
// `sync_every`: every sync_every-th commit of each producer asks for an
// fsync (CommitOptions::sync); 0: none does.
void RunWalbus(benchmark::State& state, walbus::Durability durability, int producers,
               std::optional<std::chrono::milliseconds> buffered_sync_interval = std::nullopt,
               uint64_t sync_every = 0) {
  for (auto _ : state) {
    TempDir dir;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Options options = BusOptions(dir.path(), durability);
    if (buffered_sync_interval) options.buffered_sync_interval = *buffered_sync_interval;
    walbus::Status s = walbus::Bus::Open(options, &bus);
    if (Failed(state, ErrorText(s))) return;
    const LoadResult load = RunClosedLoop(producers, CurrentProfile().publish_seconds, 0, [&](int p, uint64_t n) {
      const walbus::CommitOptions commit{.sync = sync_every != 0 && n % sync_every == 0};
      walbus::Status c = CommitOne(*bus, DomainKey(p, n), SubjectOf(n, kPublishSubjects), EventData(), commit);
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
    std::unique_ptr<RawRocksDb> raw = RawRocksDb::Create(
        dir.path(),
        {.sync = durability == walbus::Durability::kSync, .outbox_value_bytes = EnvelopeBytes(kPublishSubjectBytes)},
        &error);
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

constexpr const char* kContractSchema = R"(
namespace bench;
struct Money { units: long; nanos: int; }
table Line { sku: string (required); quantity: int; price: Money; }
table OrderPlaced { order_id: string (required); customer: string; total: Money; lines: [Line]; tags: [string];
                    priority: int; }
root_type OrderPlaced;
file_identifier "BORD";
)";

constexpr const char* kContractPayload = R"({
  "order_id": "order-000042", "customer": "customer-1234",
  "total": {"units": 1250, "nanos": 500000000},
  "lines": [{"sku": "A-100", "quantity": 2, "price": {"units": 500, "nanos": 0}},
            {"sku": "B-220", "quantity": 1, "price": {"units": 250, "nanos": 500000000}},
            {"sku": "C-310", "quantity": 4, "price": {"units": 0, "nanos": 0}}],
  "tags": ["web", "rush"], "priority": 3
})";

// The contract's binary schema and a payload of it.
struct Contract {
  std::string binary_schema;
  std::string payload;
};

const Contract& BenchContract() {
  static const Contract* contract = [] {
    flatbuffers::IDLOptions options;
    options.lang_to_generate = flatbuffers::IDLOptions::kBinary;
    flatbuffers::Parser schema(options), payload(options);
    if (!schema.Parse(kContractSchema) || !payload.Parse(kContractSchema) || !payload.Parse(kContractPayload)) {
      std::fprintf(stderr, "bus_bench: the contract does not parse: %s%s\n", schema.error_.c_str(),
                   payload.error_.c_str());
      std::abort();
    }
    schema.Serialize();
    auto* made = new Contract;
    made->binary_schema.assign(reinterpret_cast<const char*>(schema.builder_.GetBufferPointer()),
                               schema.builder_.GetSize());
    made->payload.assign(reinterpret_cast<const char*>(payload.builder_.GetBufferPointer()),
                         payload.builder_.GetSize());
    return made;
  }();
  return *contract;
}

void RunContract(benchmark::State& state, bool with_schema, int producers) {
  const Contract& contract = BenchContract();
  for (auto _ : state) {
    TempDir dir;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), walbus::Durability::kBuffered), &bus);
    if (Failed(state, ErrorText(s))) return;
    if (with_schema) {
      auto registered = bus->Contracts().RegisterSchema(kEventType, contract.binary_schema);
      if (Failed(state, ErrorText(registered.status()))) return;
    }
    const LoadResult load = RunClosedLoop(producers, CurrentProfile().publish_seconds, 0, [&](int p, uint64_t n) {
      return ErrorText(CommitOne(*bus, DomainKey(p, n), SubjectOf(n, kPublishSubjects), contract.payload));
    });
    if (Failed(state, load.error)) return;
    bus->Close().IgnoreError();
    Report(state, load);
    state.counters["payload_bytes"] = static_cast<double>(contract.payload.size());
  }
}

// The payload check's cost per byte: a batch of distinct tables against
// one table's offset repeated (a hostile payload: every element costs a
// table and its 40 fields, for four bytes), which runs until the check's
// work bound (4 steps per byte) refuses it. Both about 600 KB.
constexpr int kCheckFields = 40;

std::string CheckSchemaSource() {
  std::string fields;
  for (int i = 0; i < kCheckFields; ++i) fields += "f" + std::to_string(i) + ": int; ";
  return "namespace bench; table Reading { " + fields +
         "} table Batch { readings: [Reading]; } root_type Batch; file_identifier \"BTCH\";";
}

std::string CheckPayload(bool hostile) {
  flatbuffers::FlatBufferBuilder b;
  auto reading = [&](int seed) {
    const flatbuffers::uoffset_t start = b.StartTable();
    for (int f = 0; f < kCheckFields; ++f)
      b.AddElement<int32_t>(static_cast<flatbuffers::voffset_t>(4 + 2 * f), seed + f + 1, 0);
    return flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start));
  };
  std::vector<flatbuffers::Offset<flatbuffers::Table>> readings;
  if (hostile) {
    readings.assign(150000, reading(0));
  } else {
    for (int i = 0; i < 3600; ++i) readings.push_back(reading(i));
  }
  const auto vector = b.CreateVector(readings);
  const flatbuffers::uoffset_t start = b.StartTable();
  b.AddOffset(4, vector);
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start)), "BTCH");
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

void RunPayloadCheck(benchmark::State& state, bool hostile) {
  flatbuffers::IDLOptions options;
  options.lang_to_generate = flatbuffers::IDLOptions::kBinary;
  flatbuffers::Parser parser(options);
  if (!parser.Parse(CheckSchemaSource().c_str())) {
    Failed(state, "the check schema does not parse: " + parser.error_);
    return;
  }
  parser.Serialize();
  const std::string schema(reinterpret_cast<const char*>(parser.builder_.GetBufferPointer()),
                           parser.builder_.GetSize());
  const std::string payload = CheckPayload(hostile);
  for (auto _ : state) {
    TempDir dir;
    walbus::Options bus_options = BusOptions(dir.path(), walbus::Durability::kBuffered);
    bus_options.max_payload_bytes = 1 << 20;
    std::unique_ptr<walbus::Bus> bus;
    if (Failed(state, ErrorText(walbus::Bus::Open(bus_options, &bus)))) return;
    if (Failed(state, ErrorText(bus->Contracts().RegisterSchema(kEventType, schema).status()))) return;
    constexpr int kChecks = 50;
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < kChecks; ++i) {
      walbus::Transaction tx = bus->Begin();
      const auto id = tx.Publish(walbus::EventSpec{.type = kEventType, .subject = "batch", .data = payload});
      if (id.ok() == hostile) {
        Failed(state,
               hostile ? "the hostile payload passed" : "the ordinary payload was refused: " + ErrorText(id.status()));
        return;
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    bus->Close().IgnoreError();
    state.SetIterationTime(seconds);
    state.counters["ns_per_byte"] =
        seconds * 1e9 / (static_cast<double>(kChecks) * static_cast<double>(payload.size()));
    state.counters["payload_bytes"] = static_cast<double>(payload.size());
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
  // kBuffered with its background sync of the log (the default interval)
  // against the same with none in the run: what bounding a power cut's
  // loss costs a publisher. Side by side, so that the ratio compares
  // neighbours in time.
  for (int producers : {1, 4}) {
    for (const bool synced : {true, false}) {
      const auto interval =
          synced ? walbus::Options{}.buffered_sync_interval : std::chrono::milliseconds(24 * 3600 * 1000);
      RegisterMeasurement(
          BenchName("PublishBufferedSync",
                    {{"log_sync", synced ? "background" : "none"}, {"producers", std::to_string(producers)}}),
          [=](benchmark::State& s) { RunWalbus(s, walbus::Durability::kBuffered, producers, interval); });
    }
  }
  constexpr int kCommitSyncProducers = 16;
  for (const uint64_t sync_every : {uint64_t{0}, uint64_t{10}, uint64_t{1}}) {
    RegisterMeasurement(BenchName("PublishCommitSync", {{"bus", "buffered"},
                                                        {"sync_every", std::to_string(sync_every)},
                                                        {"producers", std::to_string(kCommitSyncProducers)}}),
                        [=](benchmark::State& s) {
                          RunWalbus(s, walbus::Durability::kBuffered, kCommitSyncProducers, std::nullopt, sync_every);
                        });
  }
  RegisterMeasurement(
      BenchName("PublishCommitSync",
                {{"bus", "sync"}, {"sync_every", "0"}, {"producers", std::to_string(kCommitSyncProducers)}}),
      [=](benchmark::State& s) { RunWalbus(s, walbus::Durability::kSync, kCommitSyncProducers); });
  // One producer, where verification is the largest share of a commit's
  // time, and four, where commits share writes.
  for (int producers : {1, 4}) {
    for (const bool with_schema : {true, false}) {
      RegisterMeasurement(BenchName("PublishContract", {{"system", with_schema ? "schema" : "plain"},
                                                        {"producers", std::to_string(producers)}}),
                          [=](benchmark::State& s) { RunContract(s, with_schema, producers); });
    }
  }
  for (const bool hostile : {false, true}) {
    RegisterMeasurement(BenchName("PayloadCheck", {{"payload", hostile ? "shared_offsets" : "distinct_tables"}}),
                        [=](benchmark::State& s) { RunPayloadCheck(s, hostile); });
  }
}

}  // namespace bench
