// The raw RocksDB baselines: what an application writing the same bytes to
// RocksDB itself would do, with no bus around it (no envelope encoding, no
// group commit of its own, no dispatch). RocksDB's default options, as an
// application would start with; RocksDB's own write group still merges
// concurrent writers.
//
// Publishing: one transaction is a domain row and an outbox entry in one
// WriteBatch.
//
// The end-to-end floor (with consumers): the least durable work that
// gives exactly-once effects. One consumer thread per subscriber reads
// the outbox in seq order and commits, per batch of events, each event's
// effect and inbox key and the consumer's checkpoint in one WriteBatch;
// consumer 0 deletes by range what every consumer passed. No per-key
// order, no retries, no tail cache, no envelope decoding.
#ifndef WALBUS_BENCH_RAW_ROCKSDB_H_
#define WALBUS_BENCH_RAW_ROCKSDB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
}  // namespace rocksdb

namespace bench {

struct RawRocksDbSpec {
  bool sync = false;
  // The size of each outbox value (walbus's envelope size, so both write
  // the same bytes).
  size_t outbox_value_bytes = 0;
  // Subscribers of the end-to-end floor; 0: publishing only.
  int consumers = 0;
  uint64_t subjects = 1;  // the effect's key names the event's subject, as walbus's handler does
};

class RawRocksDb {
 public:
  // Creates a database in `dir` with the column families the spec needs.
  // Null and *error set on failure.
  static std::unique_ptr<RawRocksDb> Create(const std::string& dir, const RawRocksDbSpec& spec, std::string* error);
  ~RawRocksDb();
  RawRocksDb(const RawRocksDb&) = delete;
  RawRocksDb& operator=(const RawRocksDb&) = delete;

  // One batch: the domain row (DomainValue) and the next outbox entry under
  // be64(seq). With consumers, the entry becomes theirs to read once every
  // lower seq is committed too. Thread-safe. Returns an error message,
  // empty on success.
  std::string CommitOne(const std::string& domain_key);

  // Consumer `consumer` (0 <= consumer < spec.consumers), on its own thread:
  // handles every event committed, in seq order, until StopConsumers() and
  // it has handled the last one. Returns an error message, empty on success.
  std::string Consume(int consumer);
  // REQUIRES: no CommitOne runs or will run.
  void StopConsumers();

 private:
  explicit RawRocksDb(const RawRocksDbSpec& spec);
  // Makes `seq` readable by the consumers once every lower seq is.
  void MarkCommitted(uint64_t seq);
  // One batch for `consumer`: the events after *cursor up to `visible`.
  std::string HandleBatch(int consumer, uint64_t visible, uint64_t* cursor);
  // Consumer 0: deletes the outbox range every consumer passed.
  std::string TrimPassed(uint64_t* trimmed);

  static constexpr size_t kRing = 1 << 16;  // more than the commits in flight at once

  const RawRocksDbSpec spec_;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // all but "default", destroyed on close
  rocksdb::ColumnFamilyHandle* domain_ = nullptr;
  rocksdb::ColumnFamilyHandle* outbox_ = nullptr;
  rocksdb::ColumnFamilyHandle* inbox_ = nullptr;
  rocksdb::ColumnFamilyHandle* effects_ = nullptr;
  rocksdb::ColumnFamilyHandle* checkpoints_ = nullptr;
  std::string outbox_value_;
  std::atomic<uint64_t> next_seq_{1};
  // Consumers only: committed[seq % kRing] == seq once seq is committed;
  // `visible_` is the highest seq with every seq up to it committed.
  std::unique_ptr<std::atomic<uint64_t>[]> committed_;
  std::atomic<uint64_t> visible_{0};
  std::atomic<uint32_t> wake_{0};  // bumped when visible_ moves or consumers stop
  std::atomic<bool> stopping_{false};
  std::unique_ptr<std::atomic<uint64_t>[]> cursors_;  // per consumer: the last seq it handled
};

}  // namespace bench

#endif  // WALBUS_BENCH_RAW_ROCKSDB_H_
