// The raw RocksDB baseline: what an application writing the same bytes to
// RocksDB itself would do for one transaction, a domain row and an outbox
// entry in one WriteBatch, with no bus around it (no envelope encoding, no
// group commit of its own, no dispatch). RocksDB's default options, as an
// application would start with; RocksDB's own write group still merges
// concurrent writers.
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

class RawRocksDb {
 public:
  // Creates a database in `dir` with a domain and an outbox column family.
  // `outbox_value_bytes`: the size of each outbox value (walbus's envelope
  // size, so both write the same bytes). Null and *error set on failure.
  static std::unique_ptr<RawRocksDb> Create(const std::string& dir, bool sync, size_t outbox_value_bytes,
                                            std::string* error);
  ~RawRocksDb();
  RawRocksDb(const RawRocksDb&) = delete;
  RawRocksDb& operator=(const RawRocksDb&) = delete;

  // One batch: the domain row (DomainValue) and the next outbox entry under
  // be64(seq). Thread-safe. Returns an error message, empty on success.
  std::string CommitOne(const std::string& domain_key);

 private:
  RawRocksDb() = default;

  rocksdb::DB* db_ = nullptr;
  rocksdb::ColumnFamilyHandle* domain_ = nullptr;
  rocksdb::ColumnFamilyHandle* outbox_ = nullptr;
  bool sync_ = false;
  std::string outbox_value_;
  std::atomic<uint64_t> next_seq_{1};
};

}  // namespace bench

#endif  // WALBUS_BENCH_RAW_ROCKSDB_H_
