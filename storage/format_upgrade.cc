// Converting a database of an older on-disk format to this build's.
//
// Format 1 -> 2 rewrites the inbox's keys event id first (InboxLayout).
// Both orders have keys of the same size and shape, so a half-converted
// inbox could not tell its records apart. The records therefore pass
// through a column family of their own, kInboxConvertingCf, in two
// passes of bounded batches, each batch putting and deleting atomically:
//
//   1. inbox -> converting, each key rewritten event id first. Before the
//      first batch, one synced write records format 2 (so an older build
//      refuses the database from then on) and kMetaInboxLeavingFormat1
//      (so the next open knows the inbox still holds old keys).
//   2. When the inbox is empty, a synced write deletes that marker; then
//      converting -> inbox as they are. Once the converting column family
//      is empty and the log synced, it is dropped.
//
// A crash leaves one of these states, and the next primary open finishes
// from it: every batch is atomic, and moving a record again puts the same
// key and value. A secondary refuses a database in between, whose inbox
// it would read only in part.

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <cassert>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "storage/db.h"
#include "storage/keys.h"

namespace walbus::storage {
namespace {

// Records per batch: a few hundred KiB of writes, so that a large inbox
// moves at the log's speed without holding it all in one batch.
constexpr size_t kRecordsPerBatch = 4096;

}  // namespace

Status Db::UpgradeFormat(const rocksdb::ColumnFamilyOptions& converting_options) {
  bool leaving_format1 = false;
  std::string unused;
  if (Status s = Get(cf(Cf::kMeta), kMetaInboxLeavingFormat1, &unused, &leaving_format1); !s.ok()) return s;
  const bool cut_short = inbox_converting_ != nullptr || leaving_format1;
  if (options_.mode == OpenOptions::Mode::kSecondary) {
    if (!cut_short) return Status::OK();
    return Status::Busy(options_.dir +
                        " is being converted to on-disk format 2 and its inbox is in two places; a read-write open "
                        "(the application's bus) finishes it");
  }
  const bool old_format = inbox_layout_ == InboxLayout::kSubscriberFirst;
  if (!cut_short && !(old_format && options_.upgrade_format)) return Status::OK();
  return ConvertInbox(converting_options, leaving_format1);
}

Status Db::ConvertInbox(const rocksdb::ColumnFamilyOptions& converting_options, bool leaving_format1) {
  if (inbox_converting_ == nullptr) {
    CfHandle* made = nullptr;
    rocksdb::Status s = db_->CreateColumnFamily(converting_options, kInboxConvertingCf, &made);
    // A handle comes back even when only the OPTIONS file failed: owned.
    if (made != nullptr) {
      all_handles_.push_back(made);
      inbox_converting_ = made;
    }
    if (!s.ok()) return FromRocks(s, "create column family " + std::string(kInboxConvertingCf));
  }
  if (inbox_layout_ == InboxLayout::kSubscriberFirst) {
    std::string version;
    PutBe32(&version, 2);
    Batch batch;
    batch.Put(cf(Cf::kMeta), kMetaFormatVersion, version);
    batch.Put(cf(Cf::kMeta), kMetaInboxLeavingFormat1, "");
    if (Status s = batch.Commit(this, /*sync=*/true); !s.ok()) return s;
    inbox_layout_ = InboxLayout::kEventFirst;
    leaving_format1 = true;
  }
  if (leaving_format1) {
    Status moved = MoveRecords(cf(Cf::kInbox), inbox_converting_, [](std::string_view key, std::string* out) {
      if (!RelayInboxKey(InboxLayout::kSubscriberFirst, key, InboxLayout::kEventFirst, out)) {
        // Not an inbox key of either format (damage): kept as it is, as
        // the retention filter keeps it, rather than refusing to open.
        out->assign(key);
      }
      return Status::OK();
    });
    if (!moved.ok()) return moved;
    Batch batch;
    batch.Delete(cf(Cf::kMeta), kMetaInboxLeavingFormat1);
    if (Status s = batch.Commit(this, /*sync=*/true); !s.ok()) return s;
  }
  Status moved = MoveRecords(inbox_converting_, cf(Cf::kInbox), [](std::string_view key, std::string* out) {
    out->assign(key);
    return Status::OK();
  });
  if (!moved.ok()) return moved;
  // The moves back must be durable before the column family that held
  // the records is gone.
  if (rocksdb::Status s = db_->SyncWAL(); !s.ok()) return FromRocks(s, "sync the log");
  if (rocksdb::Status s = db_->DropColumnFamily(inbox_converting_); !s.ok()) {
    return FromRocks(s, "drop column family " + std::string(kInboxConvertingCf));
  }
  std::erase(all_handles_, inbox_converting_);
  db_->DestroyColumnFamilyHandle(inbox_converting_).PermitUncheckedError();
  inbox_converting_ = nullptr;
  return Status::OK();
}

Status Db::MoveRecords(CfHandle* from, CfHandle* to,
                       const std::function<Status(std::string_view key, std::string* moved)>& rekey) {
  assert(from != nullptr && to != nullptr && from != to);
  // A new iterator per batch, from just past the last key moved: an
  // iterator pins the memtables it started on, and one held across the
  // pass would keep their memory charged, so that at a small budget the
  // pass's own writes would stall with nothing left to free it.
  std::string resume;
  while (true) {
    Batch batch;
    Status failed;
    std::string moved_key, last_key;
    size_t records = 0;
    Status scanned = ScanRange(from, nullptr, KeyBounds{resume, {}}, /*reverse=*/false,
                               [&](std::string_view key, std::string_view value) {
                                 if (failed = rekey(key, &moved_key); !failed.ok()) return false;
                                 batch.Put(to, moved_key, value);
                                 batch.Delete(from, key);
                                 last_key.assign(key);
                                 return ++records < kRecordsPerBatch;
                               });
    if (!scanned.ok()) return scanned;
    if (!failed.ok()) return failed;
    if (records == 0) return Status::OK();
    if (Status s = batch.Commit(this, /*sync=*/false); !s.ok()) return s;
    resume = last_key;
    resume.push_back('\0');  // the least key above last_key
  }
}

}  // namespace walbus::storage
