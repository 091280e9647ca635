// Db: the RocksDB instance behind a bus, with walbus's column families.
//
// storage/ is the only folder that includes RocksDB headers; bus/ uses the
// handles it hands out but never opens, configures or interprets RocksDB
// itself.
//
// Threading: a Db is thread-safe as RocksDB is; Open/destruction are not
// concurrent with any other call.
#ifndef WALBUS_STORAGE_DB_H_
#define WALBUS_STORAGE_DB_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "storage/keys.h"
#include "walbus/status.h"

namespace rocksdb {
class DB;
class Snapshot;
class Status;
class ColumnFamilyHandle;
class CompactionFilter;
struct ColumnFamilyOptions;
class Env;
class WriteBatch;
}  // namespace rocksdb

namespace walbus::storage {

// An opened column family; opaque outside storage/.
using CfHandle = rocksdb::ColumnFamilyHandle;

// Bumped on any incompatible change of the on-disk layout. A database
// keeps the format it was created with; this build reads each one it
// knows. 2: inbox keys put the event id first (InboxLayout::kEventFirst).
inline constexpr uint32_t kFormatVersion = 2;

class Db;
struct WriteCounters;
class OutboxFloorFilter;

// A RocksDB status as walbus's, its message prefixed with `what` ("write",
// "open /dir").
Status FromRocks(const rocksdb::Status& s, std::string_view what);

// The database as it stood at one moment (a RocksDB snapshot): reads
// through it see nothing committed later. Released by its destructor or
// when its Db closes, whichever comes first. While it lives, what was
// overwritten or deleted after it cannot be compacted away.
//
// Threading: reads through one snapshot may run on several threads; its
// destruction may race with the Db's.
class Snapshot {
 public:
  ~Snapshot();
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

 private:
  struct Registry;
  friend class Db;
  Snapshot(std::shared_ptr<Registry> registry, const rocksdb::Snapshot* raw);
  // What RocksDB reads through: null for "the latest state" (no snapshot).
  static const rocksdb::Snapshot* Raw(const Snapshot* snapshot);
  std::shared_ptr<Registry> registry_;
  // Set to null (under the registry's lock) once released at the Db's
  // close; reads happen only while the Db is open.
  const rocksdb::Snapshot* raw_;
};

// A range of keys [lower, upper) in byte order; an empty bound is open.
struct KeyBounds {
  std::string_view lower;
  std::string_view upper;
};

// walbus's own column families. Their names start with "walbus." so they
// cannot collide with the application's.
enum class Cf : uint8_t {
  kMeta,
  kOutbox,
  kInbox,
  kCheckpoints,
  kRetries,
  kDeadLetters,
  kQuarantine,
  kReplays,
  kVersions,
  // Added after the first format: a database written before lacks it
  // until a primary opens it (and creates it empty); a secondary then sees
  // a null handle.
  kTimers,
  kProcesses,
  kCount,
};
// The first of the column families a database may lack (see kTimers).
inline constexpr Cf kFirstAddedCf = Cf::kTimers;
const char* CfName(Cf cf);
// True for names reserved to walbus ("default" and "walbus.*").
bool IsReservedCfName(std::string_view name);

// Decides which inbox records a compaction may drop (Options::inbox_window).
// Called on storage's background threads, concurrently: implementations
// are thread-safe and fast (one call per record compacted).
class InboxRetention {
 public:
  virtual ~InboxRetention() = default;
  // True when the record of `seq` handled by subscriber `subscriber_id` at
  // `handled_unix_ms` is no longer needed.
  virtual bool MayDrop(uint32_t subscriber_id, uint64_t seq, uint64_t handled_unix_ms) const = 0;
  // No record younger than this is dropped. Storage rewrites the inbox's
  // tables at least this often (an hour at the least), so that the older
  // ones go even from tables that compactions only move down a level.
  virtual std::chrono::milliseconds window() const = 0;
};

// OpenOptions::memory_bytes: its default and its smallest value.
inline constexpr size_t kDefaultMemoryBytes = size_t{128} << 20;
inline constexpr size_t kMinMemoryBytes = size_t{4} << 20;
// OpenOptions::max_log_bytes's default.
inline constexpr uint64_t kDefaultMaxLogBytes = uint64_t{256} << 20;

struct OpenOptions {
  enum class Mode : uint8_t {
    kPrimary,    // Read-write; takes the directory lock.
    kSecondary,  // Read-only view that may follow a live primary.
  };
  std::string dir;
  Mode mode = Mode::kPrimary;
  bool create_if_missing = true;
  // A directory it creates is 0700 and the files RocksDB writes 0600 (0750
  // and 0640 with this): the database's payloads are no more readable than
  // the admin socket (0600).
  bool share_with_group = false;
  // Application column families to open or create (primary only). A
  // secondary opens every column family that exists.
  std::vector<std::string> app_column_families;
  // Where a secondary keeps its own info log; must differ from dir.
  std::string secondary_dir;
  // Optional: an Env to use instead of the default (fault injection).
  rocksdb::Env* env = nullptr;
  // Optional (primary only): drops inbox records in compactions. Shared
  // with the caller, which keeps it informed (checkpoints).
  std::shared_ptr<const InboxRetention> inbox_retention;
  // What RocksDB may hold in memory: one block cache of this size for
  // every column family, its table indexes and filters included, to which
  // the memtables (up to 3/4 of it) are charged. A soft bound: RocksDB
  // may pass it briefly until a flush ends. REQUIRES: >= kMinMemoryBytes.
  size_t memory_bytes = kDefaultMemoryBytes;
  // Past this much write-ahead log, the column families that keep its
  // oldest file flush, so it can go (RocksDB's max_total_wal_size).
  uint64_t max_log_bytes = kDefaultMaxLogBytes;
  // Primary only: a database of an older format is converted to this
  // build's as it opens (format 1: its inbox is rewritten event id first;
  // see format_upgrade.cc). False keeps the format it has, for tests that
  // write an older one. A conversion cut short by a crash is finished at
  // the next primary open either way, and refused by a secondary.
  bool upgrade_format = true;
};

class Db {
 public:
  // Opens or creates a walbus database. Errors name what is wrong:
  // Busy for a directory locked by another process; InvalidArgument for a
  // directory that is not a walbus database; NotSupported for a newer
  // format; NotFound when it does not exist and may not be created.
  static Status Open(const OpenOptions& options, std::unique_ptr<Db>* db);

  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  rocksdb::DB* raw() const { return db_.get(); }
  // Null only for a column family added later (kFirstAddedCf on) that a
  // secondary found missing.
  CfHandle* cf(Cf which) const { return handles_[static_cast<size_t>(which)]; }
  // nullptr when the application column family is unknown.
  CfHandle* AppCf(std::string_view name) const;
  // A stable numeric id of a column family (for version keys).
  static uint32_t CfId(CfHandle* cf);
  const std::vector<std::string>& app_cf_names() const { return app_names_; }
  // How this database's inbox keys are laid out (from its format version):
  // every inbox key is made with it (InboxKey).
  InboxLayout inbox_layout() const { return inbox_layout_; }

  // Point read; *found is false for a missing key. Reads the latest state,
  // or what `snapshot` saw.
  Status Get(CfHandle* cf, std::string_view key, std::string* value, bool* found,
             const Snapshot* snapshot = nullptr) const;

  // The state now, kept for reads (Snapshot). Cheap: no I/O.
  std::unique_ptr<Snapshot> NewSnapshot();
  // Visits the entries of `cf` within `bounds` in key order (descending
  // when `reverse`), as `snapshot` saw them (the latest state when null),
  // until visit returns false.
  Status ScanRange(CfHandle* cf, const Snapshot* snapshot, KeyBounds bounds, bool reverse,
                   const std::function<bool(std::string_view key, std::string_view value)>& visit) const;

  // Visits outbox entries with from_seq <= seq, in order, at most `limit`,
  // stopping early when visit returns false. Reads with a lower bound so the
  // range tombstones below from_seq are never scanned.
  Status ScanOutbox(uint64_t from_seq, size_t limit,
                    const std::function<bool(uint64_t seq, std::string_view envelope)>& visit) const;
  // The dispatcher's trim: outbox entries below `seq` are gone. A trim
  // writes only its point (kMetaTrimmedBelow), no range deletion: in the
  // level-0 table that held it, one would span from the trimmed seqs to
  // the newest events flushed with it, and the next compaction would
  // rewrite every table in between (after days offline, the whole
  // backlog, taking its disk space twice). Instead, once this returns,
  // reads no longer see those entries; once the log is synced past the
  // trim's write (SyncLog, or any synced write), compactions drop them
  // and DropOutboxFilesBelowFloor deletes the tables that hold only them.
  // Not before: a power cut could take the trim back, and with it the
  // positions of subscribers that still need them.
  // REQUIRES: the write of the trim point `seq` has returned. Thread-safe.
  void NoteOutboxTrimmed(uint64_t seq);
  // The seq below which reads see no outbox entry.
  uint64_t outbox_floor() const;
  // The seq below which compactions drop outbox entries: the highest trim
  // a sync made durable.
  uint64_t outbox_durable_floor() const;
  // Deletes the outbox's table files holding only entries below the
  // durable trim (see NoteOutboxTrimmed): their space comes back without
  // a compaction. Level-0 tables are left to compactions.
  Status DropOutboxFilesBelowFloor();
  // Asks storage to compact the outbox between from_seq and below_seq in the
  // background, so that entries trimmed there give their disk space back
  // (range deletions alone keep the table files). Returns at once.
  Status SuggestOutboxCompaction(uint64_t from_seq, uint64_t below_seq);
  // Writes the outbox's memtable to a level-0 table now (blocking), so
  // that what is written next goes to a table of its own.
  Status FlushOutbox();
  // Compacts the whole column family now (blocking): its compaction
  // filters run and deleted entries give their space back.
  Status Compact(Cf which);
  // Fsyncs the write-ahead log: every write that returned before the call
  // is then durable, as a synced write would have made it. Thread-safe;
  // writes may go on meanwhile.
  Status SyncLog();
  // The highest outbox seq, or 0 when the outbox is empty.
  Status LastOutboxSeq(uint64_t* seq) const;
  // Visits the entries of a walbus column family whose keys start with
  // `prefix` (every entry when it is empty), in key order, at most `limit`,
  // stopping early when visit returns false.
  Status Scan(Cf cf, std::string_view prefix, size_t limit,
              const std::function<bool(std::string_view key, std::string_view value)>& visit) const;
  // The same over any column family, the application's included.
  Status Scan(CfHandle* cf, std::string_view prefix, size_t limit,
              const std::function<bool(std::string_view key, std::string_view value)>& visit) const;

  // What a walbus column family takes: its table files and memtables, in
  // bytes (deleted entries count until a compaction drops them). 0 for a
  // family a secondary lacks.
  uint64_t CfBytes(Cf which) const;
  // What the outbox takes from `from_seq` on: storage's estimate for that
  // key range of its table files (entries a trim deleted below it no
  // longer count, compacted or not), and its entries still in memtables,
  // read (an estimate there samples the skiplist and can read half).
  uint64_t OutboxBytesFrom(uint64_t from_seq) const;
  // What the write-ahead log's files take on disk now (every column
  // family's writes, until each has flushed them): a walk of the
  // directory, whoever holds it.
  uint64_t LogBytes() const;

  // A RocksDB integer property summed over every column family
  // ("rocksdb.total-sst-files-size"); 0 when unknown.
  uint64_t SumProperty(const std::string& name) const;
  // A database-wide RocksDB integer property ("rocksdb.is-write-stopped").
  uint64_t DbProperty(const std::string& name) const;

  // What this Db wrote since it opened, by where it went: what flash wear
  // is made of. Thread-safe.
  struct Written {
    // The committed batches, as the write-ahead log takes them (its
    // framing adds 7 bytes per 32 KiB block).
    uint64_t log_bytes = 0;
    // Table files from memtables (flushes, and recovery at open).
    uint64_t flush_bytes = 0;
    // Table files that compactions wrote; a table moved to another level
    // without a rewrite counts nothing.
    uint64_t compaction_bytes = 0;
  };
  Written written() const;

  // Whether the directory lets users other than its owner (and group) in:
  // its mode has a permission bit for others.
  bool open_to_others() const { return open_to_others_; }

 private:
  Db() = default;
  Status CheckFormat(bool fresh);
  // Sets the outbox's floors from the trim point the database holds.
  Status ReadOutboxFloor();
  // Sorts the handles RocksDB opened (in the order of `names`) into
  // walbus's own and the application's. Corruption when one of walbus's
  // is missing.
  Status AdoptHandles(const std::vector<std::string>& names);

  // format_upgrade.cc. The column family an inbox passes through while it
  // is converted to format 2; it exists only until the conversion ends.
  static constexpr const char* kInboxConvertingCf = "walbus.inbox.converting";
  // Starts or finishes the conversion of an older format (upgrade_format),
  // after CheckFormat. `converting_options` are the options to create
  // kInboxConvertingCf with.
  Status UpgradeFormat(const rocksdb::ColumnFamilyOptions& converting_options);
  // `leaving_format1`: kMetaInboxLeavingFormat1 is present.
  Status ConvertInbox(const rocksdb::ColumnFamilyOptions& converting_options, bool leaving_format1);
  // Moves every record of `from` to `to` under the key `rekey` gives it,
  // in batches that each put and delete atomically.
  Status MoveRecords(CfHandle* from, CfHandle* to,
                     const std::function<Status(std::string_view key, std::string* moved)>& rekey);

  OpenOptions options_;
  // Before db_ (so destroyed after it): the primary's Env (PrivateFs).
  std::unique_ptr<rocksdb::Env> env_;
  // Before db_: the inbox's compactions use it until db_ is gone.
  std::unique_ptr<rocksdb::CompactionFilter> inbox_filter_;
  // Before db_: the outbox's floors, its compactions' filter.
  std::unique_ptr<OutboxFloorFilter> outbox_filter_;
  // The highest trim noted, which the next sync makes durable.
  std::atomic<uint64_t> outbox_trim_unsynced_{0};
  std::unique_ptr<rocksdb::DB> db_;
  std::array<CfHandle*, static_cast<size_t>(Cf::kCount)> handles_{};
  std::vector<std::string> app_names_;
  std::vector<CfHandle*> app_handles_;
  std::vector<CfHandle*> all_handles_;  // owned; destroyed before db_
  // kInboxConvertingCf while it exists (one of all_handles_), else null.
  CfHandle* inbox_converting_ = nullptr;
  // The live snapshots, released when db_ closes; shared with them.
  std::shared_ptr<Snapshot::Registry> snapshots_;
  // Shared with the RocksDB listener that counts table files.
  std::shared_ptr<WriteCounters> write_counters_;
  bool open_to_others_ = false;
  InboxLayout inbox_layout_ = InboxLayout::kEventFirst;
  friend class Batch;
};

// One atomic write under construction.
//
// Threading: not thread-safe.
class Batch {
 public:
  Batch();
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void Put(CfHandle* cf, std::string_view key, std::string_view value);
  void Delete(CfHandle* cf, std::string_view key);
  // Adds `delta` to an 8-byte counter (checkpoints column family only).
  void AddCounter(CfHandle* cf, std::string_view key, uint64_t delta);
  // Removes [begin, end).
  void DeleteRange(CfHandle* cf, std::string_view begin, std::string_view end);
  // Drops everything since the last SetSavePoint.
  void SetSavePoint();
  void RollbackToSavePoint();
  size_t bytes() const;
  size_t count() const;
  void Clear();

  // Writes atomically; `sync` fsyncs the WAL before returning.
  Status Commit(Db* db, bool sync);

 private:
  std::unique_ptr<rocksdb::WriteBatch> rep_;
};

}  // namespace walbus::storage

#endif  // WALBUS_STORAGE_DB_H_
