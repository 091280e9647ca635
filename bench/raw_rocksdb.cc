#include "bench/raw_rocksdb.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "bench/bench_common.h"

namespace bench {
namespace {

std::string Be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return s;
}

}  // namespace

std::unique_ptr<RawRocksDb> RawRocksDb::Create(const std::string& dir, bool sync, size_t outbox_value_bytes,
                                               std::string* error) {
  std::unique_ptr<RawRocksDb> raw(new RawRocksDb());
  raw->sync_ = sync;
  raw->outbox_value_ = RandomBytes(outbox_value_bytes, 3);
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = {
      {rocksdb::kDefaultColumnFamilyName, {}}, {"domain", {}}, {"outbox", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, descriptors, &handles, &raw->db_);
  if (!s.ok()) {
    *error = "open raw RocksDB: " + s.ToString();
    return nullptr;
  }
  raw->db_->DestroyColumnFamilyHandle(handles[0]).PermitUncheckedError();  // "default", unused
  raw->domain_ = handles[1];
  raw->outbox_ = handles[2];
  return raw;
}

RawRocksDb::~RawRocksDb() {
  if (db_ == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : {domain_, outbox_}) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  delete db_;
}

std::string RawRocksDb::CommitOne(const std::string& domain_key) {
  const uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  rocksdb::WriteBatch batch;
  batch.Put(domain_, domain_key, DomainValue());
  batch.Put(outbox_, Be64(seq), outbox_value_);
  rocksdb::WriteOptions write;
  write.sync = sync_;
  rocksdb::Status s = db_->Write(write, &batch);
  return s.ok() ? std::string() : "raw RocksDB write: " + s.ToString();
}

}  // namespace bench
