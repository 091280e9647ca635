// StateReader: reads of the application's column families as one snapshot
// saw them, with a unit of work's own buffered writes laid over them. What
// WriteScope's and ReadView's reads share.
//
// Threading: a StateReader is used by one thread at a time, except that
// once its snapshot is taken, reads (all const on it) may run at once.
#ifndef WALBUS_BUS_CORE_STATE_READER_H_
#define WALBUS_BUS_CORE_STATE_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/write_set.h"
#include "storage/db.h"
#include "walbus/read.h"

namespace walbus::internal {

// The application column families a bus may read and write: those its
// Options::column_families lists, each with its handle, found by name in
// one look-up. A family the database has from an earlier run but the list
// leaves out is not among them (it stays on disk untouched).
//
// Threading: immutable once made; Find may run on any number of threads.
class AppColumnFamilies {
 public:
  AppColumnFamilies() = default;
  // REQUIRES: `db` is open with every listed family (storage::Db::Open
  // creates the missing ones).
  AppColumnFamilies(const storage::Db& db, const std::vector<std::string>& listed);

  // The family `name`; InvalidArgument naming the fix when it is not listed.
  Result<storage::CfHandle*> Find(std::string_view name) const;

 private:
  std::map<std::string, storage::CfHandle*, std::less<>> handles_;
};
// InvalidArgument for an empty key, or (when `for_write`) one longer than
// kMaxKeyBytes.
Status CheckKey(std::string_view column_family, std::string_view key, bool for_write);
// For messages: cf/key, a long or binary key shortened.
std::string DescribeKey(std::string_view column_family, std::string_view key);
// A key above every key a write takes: the end of "to the last key".
const std::string& EndOfKeys();
// The deletion of every key of `cf`, as one range deletion.
Op ClearAll(storage::CfHandle* cf);

// What a unit of work's own buffered writes leave at one key.
struct OwnWrite {
  enum class State : uint8_t { kNone, kDeleted, kValue };
  State state = State::kNone;
  const std::string* value = nullptr;  // kValue: the buffered value
};
OwnWrite LatestOwnWrite(const WriteSet& writes, storage::CfHandle* cf, std::string_view key);

// Reads of the latest committed state, for a reader that takes no
// snapshot: a secondary instance (the walbus tool), whose state moves only
// when it catches up. A scan is one RocksDB iterator, itself a consistent
// view.
Result<uint64_t> CommittedVersion(const storage::Db& db, storage::CfHandle* cf, std::string_view column_family,
                                  std::string_view key);
Status ScanCommitted(const storage::Db& db, storage::CfHandle* cf, const ScanOptions& options, const RowVisitor& visit,
                     bool* more);

class StateReader {
 public:
  // Takes the snapshot now, when there is none yet. REQUIRES (this and
  // every read): `db` is open, as in an admitted call.
  void TakeSnapshot(storage::Db* db);
  // Lets storage forget the snapshot; the next read takes a new one.
  void Release() { snapshot_.reset(); }
  // The writes of units this one is made on top of before they commit (the
  // runs before it in a handler's turn), oldest first: every read sees
  // them under the unit's own writes, and a version they assert as
  // advanced. REQUIRES: they stay unchanged while this reader reads.
  void LayOver(std::vector<const WriteSet*> earlier) { earlier_ = std::move(earlier); }

  // `own` (may be null): the writes laid over committed state (and over
  // the earlier units').
  Result<std::optional<std::string>> Get(storage::Db* db, storage::CfHandle* cf, std::string_view key,
                                         const WriteSet* own);
  // The committed version of cf/key, or the one an earlier unit's commit
  // will give it; `column_family` names it in errors.
  Result<uint64_t> Version(storage::Db* db, storage::CfHandle* cf, std::string_view column_family,
                           std::string_view key);
  // Visits the rows `options` select in their order, `own` laid over
  // committed state. *more (may be null) is set when the limit stopped it
  // with rows left.
  Status Scan(storage::Db* db, storage::CfHandle* cf, const ScanOptions& options, const WriteSet* own,
              const RowVisitor& visit, bool* more);
  // The same, collected into a page.
  Result<ScanPage> ScanPageOf(storage::Db* db, storage::CfHandle* cf, const ScanOptions& options, const WriteSet* own);

 private:
  // What the earlier units and then `own` (may be null) leave at cf/key.
  OwnWrite LatestLaidOver(const WriteSet* own, storage::CfHandle* cf, std::string_view key) const;

  std::unique_ptr<storage::Snapshot> snapshot_;
  std::vector<const WriteSet*> earlier_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_STATE_READER_H_
