#include "bench/raw_rocksdb.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cassert>

#include "bench/bench_common.h"

namespace bench {
namespace {

constexpr size_t kConsumerBatch = 1024;  // as the SQLite relay's batch
constexpr uint64_t kTrimEvery = 10000;   // as the SQLite relay's trim

void PutBe(std::string* s, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string Be64(uint64_t v) {
  std::string s;
  PutBe(&s, v, 8);
  return s;
}

uint64_t ReadBe64(const rocksdb::Slice& s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < s.size(); ++i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

}  // namespace

RawRocksDb::RawRocksDb(const RawRocksDbSpec& spec) : spec_(spec) {}

std::unique_ptr<RawRocksDb> RawRocksDb::Create(const std::string& dir, const RawRocksDbSpec& spec, std::string* error) {
  std::unique_ptr<RawRocksDb> raw(new RawRocksDb(spec));
  raw->outbox_value_ = RandomBytes(spec.outbox_value_bytes, 3);
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName, "domain", "outbox"};
  if (spec.consumers > 0) names.insert(names.end(), {"inbox", "effects", "checkpoints"});
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, descriptors, &handles, &raw->db_);
  if (!s.ok()) {
    *error = "open raw RocksDB: " + s.ToString();
    return nullptr;
  }
  raw->db_->DestroyColumnFamilyHandle(handles[0]).PermitUncheckedError();  // "default", unused
  raw->handles_.assign(handles.begin() + 1, handles.end());
  raw->domain_ = handles[1];
  raw->outbox_ = handles[2];
  if (spec.consumers > 0) {
    raw->inbox_ = handles[3];
    raw->effects_ = handles[4];
    raw->checkpoints_ = handles[5];
    raw->committed_ = std::make_unique<std::atomic<uint64_t>[]>(kRing);
    raw->cursors_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(spec.consumers));
  }
  return raw;
}

RawRocksDb::~RawRocksDb() {
  if (db_ == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  delete db_;
}

std::string RawRocksDb::CommitOne(const std::string& domain_key) {
  const uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  rocksdb::WriteBatch batch;
  batch.Put(domain_, domain_key, DomainValue());
  batch.Put(outbox_, Be64(seq), outbox_value_);
  rocksdb::WriteOptions write;
  write.sync = spec_.sync;
  rocksdb::Status s = db_->Write(write, &batch);
  if (!s.ok()) return "raw RocksDB write: " + s.ToString();
  if (spec_.consumers > 0) MarkCommitted(seq);
  return {};
}

// Seqs are taken before the write, so they commit out of order; a consumer
// may read up to `visible_` only. Whoever commits the seq after `visible_`
// moves it on over every later seq already committed. (Sequentially
// consistent: a committer that sees the next seq missing stops, and the
// committer of that seq, storing it after, sees the advance and goes on.)
void RawRocksDb::MarkCommitted(uint64_t seq) {
  committed_[seq % kRing].store(seq);
  uint64_t visible = visible_.load();
  bool moved = false;
  while (committed_[(visible + 1) % kRing].load() == visible + 1) {
    if (visible_.compare_exchange_weak(visible, visible + 1)) {
      ++visible;
      moved = true;
    }
  }
  if (moved) {
    wake_.fetch_add(1);
    wake_.notify_all();
  }
}

void RawRocksDb::StopConsumers() {
  stopping_.store(true);
  wake_.fetch_add(1);
  wake_.notify_all();
}

std::string RawRocksDb::Consume(int consumer) {
  assert(consumer >= 0 && consumer < spec_.consumers);
  uint64_t cursor = 0;
  uint64_t trimmed = 0;
  while (true) {
    const uint32_t wake = wake_.load();
    const uint64_t visible = visible_.load();
    if (visible > cursor) {
      if (std::string e = HandleBatch(consumer, visible, &cursor); !e.empty()) return e;
      if (consumer == 0) {
        if (std::string e = TrimPassed(&trimmed); !e.empty()) return e;
      }
      continue;
    }
    // Stopping comes after the last commit: nothing more will be visible.
    if (stopping_.load()) return {};
    wake_.wait(wake);
  }
}

std::string RawRocksDb::HandleBatch(int consumer, uint64_t visible, uint64_t* cursor) {
  const std::string lower = Be64(*cursor + 1);
  const std::string upper = Be64(visible + 1);
  rocksdb::Slice lower_slice(lower), upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_lower_bound = &lower_slice;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, outbox_));
  rocksdb::WriteBatch batch;
  const std::string name = "effects-" + std::to_string(consumer);
  uint64_t last = *cursor;
  size_t n = 0;
  for (it->Seek(lower_slice); it->Valid() && n < kConsumerBatch; it->Next(), ++n) {
    last = ReadBe64(it->key());
    // The inbox key is the size of walbus's (subscriber id and a 16-byte
    // event id); its value, the seq, the time handled and the runs.
    std::string inbox_key;
    PutBe(&inbox_key, static_cast<uint64_t>(consumer), 4);
    PutBe(&inbox_key, last, 8);
    PutBe(&inbox_key, 0, 8);
    std::string inbox_value;
    PutBe(&inbox_value, last, 8);
    PutBe(&inbox_value, 0, 8);
    PutBe(&inbox_value, 1, 4);
    batch.Put(inbox_, inbox_key, inbox_value);
    batch.Put(effects_, name + "/" + SubjectOf(last, spec_.subjects) + "/" + std::to_string(last), "1");
  }
  if (!it->status().ok()) return "raw RocksDB read: " + it->status().ToString();
  if (n == 0)
    return "raw RocksDB: committed events " + std::to_string(*cursor + 1) + ".." + std::to_string(visible) +
           " are not in the outbox";
  std::string checkpoint_key;
  PutBe(&checkpoint_key, static_cast<uint64_t>(consumer), 4);
  batch.Put(checkpoints_, checkpoint_key, Be64(last));
  rocksdb::WriteOptions write;
  write.sync = spec_.sync;
  if (rocksdb::Status s = db_->Write(write, &batch); !s.ok()) return "raw RocksDB consumer write: " + s.ToString();
  *cursor = last;
  cursors_[static_cast<size_t>(consumer)].store(last);
  return {};
}

std::string RawRocksDb::TrimPassed(uint64_t* trimmed) {
  uint64_t passed = UINT64_MAX;
  for (int c = 0; c < spec_.consumers; ++c) passed = std::min(passed, cursors_[static_cast<size_t>(c)].load());
  if (passed - *trimmed < kTrimEvery) return {};
  rocksdb::WriteBatch batch;
  batch.DeleteRange(outbox_, Be64(*trimmed + 1), Be64(passed + 1));
  if (rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
    return "raw RocksDB trim: " + s.ToString();
  }
  *trimmed = passed;
  return {};
}

}  // namespace bench
