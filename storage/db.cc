#include "storage/db.h"

#include "storage/private_fs.h"

#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/experimental.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/listener.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/sst_partitioner.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <rocksdb/write_buffer_manager.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <unordered_set>

#include "bus/util/mutex.h"
#include "storage/keys.h"

namespace walbus::storage {

// Db::Written, as it grows: counted where batches commit and by RocksDB's
// own report of each table file it creates.
struct WriteCounters {
  std::atomic<uint64_t> log_bytes{0};
  std::atomic<uint64_t> flush_bytes{0};
  std::atomic<uint64_t> compaction_bytes{0};
};

namespace {

constexpr const char* kCfNames[] = {
    "walbus.meta",     "walbus.outbox",       "walbus.inbox",      "walbus.checkpoints",
    "walbus.retries",  "walbus.dead_letters", "walbus.quarantine", "walbus.replays",
    "walbus.versions", "walbus.timers",       "walbus.processes",
};
// Those every walbus database has had since its creation.
constexpr size_t kOriginalCfCount = static_cast<size_t>(kFirstAddedCf);
static_assert(std::size(kCfNames) == static_cast<size_t>(Cf::kCount));

// Adds 8-byte little-endian counters. A malformed operand (which only a
// corrupted file could hold) counts as zero rather than failing reads.
class CounterAddOperator : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice&, const rocksdb::Slice* existing, const rocksdb::Slice& value, std::string* new_value,
             rocksdb::Logger*) const override {
    uint64_t a = 0, b = 0;
    if (existing != nullptr && !DecodeCounter(std::string_view(existing->data(), existing->size()), &a)) a = 0;
    if (!DecodeCounter(std::string_view(value.data(), value.size()), &b)) b = 0;
    *new_value = EncodeCounter(a + b);
    return true;
  }
  const char* Name() const override { return "walbus.CounterAdd"; }
};

// Drops the inbox records an InboxRetention no longer needs. Records it
// cannot parse are kept: they are evidence for an operator. So is every
// record until the database's format, and with it the layout of its keys,
// is known (compactions may start as the database opens).
class InboxWindowFilter : public rocksdb::CompactionFilter {
 public:
  explicit InboxWindowFilter(std::shared_ptr<const InboxRetention> retention) : retention_(std::move(retention)) {}
  void SetLayout(InboxLayout layout) { layout_.store(static_cast<int>(layout), std::memory_order_release); }
  bool Filter(int, const rocksdb::Slice& key, const rocksdb::Slice& value, std::string*, bool*) const override {
    const int layout = layout_.load(std::memory_order_acquire);
    uint32_t subscriber_id = 0;
    if (layout == kLayoutUnknown || (value.size() != 16 && value.size() != 20) ||
        !ParseInboxKey(static_cast<InboxLayout>(layout), std::string_view(key.data(), key.size()), &subscriber_id)) {
      return false;
    }
    const uint64_t seq = GetBe64(std::string_view(value.data(), 8));
    const uint64_t handled_ms = GetBe64(std::string_view(value.data() + 8, 8));
    return retention_->MayDrop(subscriber_id, seq, handled_ms);
  }
  const char* Name() const override { return "walbus.InboxWindow"; }
  std::chrono::milliseconds window() const { return retention_->window(); }

 private:
  static constexpr int kLayoutUnknown = -1;
  const std::shared_ptr<const InboxRetention> retention_;
  std::atomic<int> layout_{kLayoutUnknown};
};

// Raises *value to `to`, unless it is there already. Thread-safe.
void RaiseTo(std::atomic<uint64_t>* value, uint64_t to) {
  uint64_t now = value->load(std::memory_order_relaxed);
  while (now < to && !value->compare_exchange_weak(now, to, std::memory_order_acq_rel)) {
  }
}

}  // namespace

// Drops the outbox entries below the floor: what the dispatcher trimmed,
// once the log holds that trim durably (Db::NoteOutboxTrimmed). Until
// the database's trim point is read as it opens, the floor is 0 and
// drops nothing.
class OutboxFloorFilter final : public rocksdb::CompactionFilter {
 public:
  // Reads' floor: raised as a trim's write returns.
  void RaiseVisible(uint64_t seq) { RaiseTo(&visible_, seq); }
  // The compactions' floor. REQUIRES: the trim to `seq` is durable.
  void RaiseDurable(uint64_t seq) { RaiseTo(&durable_, seq); }
  uint64_t visible() const { return visible_.load(std::memory_order_acquire); }
  uint64_t durable() const { return durable_.load(std::memory_order_acquire); }
  bool Filter(int, const rocksdb::Slice& key, const rocksdb::Slice&, std::string*, bool*) const override {
    uint64_t seq = 0;
    return ParseOutboxKey(std::string_view(key.data(), key.size()), &seq) && seq < durable();
  }
  const char* Name() const override { return "walbus.OutboxFloor"; }

 private:
  std::atomic<uint64_t> visible_{0};
  std::atomic<uint64_t> durable_{0};
};

namespace {

// Gives the allocator's free memory back to the system as each flush or
// compaction starts. The job before it freed a memtable, or the buffers
// of the tables it built, in its own thread; glibc keeps such memory in
// that thread's arena for reuse, and with a thread per arena it adds up
// to as much again as the memory in use (docs/devices.md). Called on the
// background job's own thread, never on a writer's. Other allocators
// return memory themselves: nothing to do there.
class ReleaseFreedMemory final : public rocksdb::EventListener {
 public:
  void OnFlushBegin(rocksdb::DB*, const rocksdb::FlushJobInfo&) override { Release(); }
  void OnCompactionBegin(rocksdb::DB*, const rocksdb::CompactionJobInfo&) override { Release(); }
  const char* Name() const override { return "walbus.ReleaseFreedMemory"; }

 private:
  static void Release() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  }
};

class CountTableWrites final : public rocksdb::EventListener {
 public:
  explicit CountTableWrites(std::shared_ptr<WriteCounters> counters) : counters_(std::move(counters)) {}
  void OnTableFileCreated(const rocksdb::TableFileCreationInfo& info) override {
    if (!info.status.ok()) return;
    switch (info.reason) {
      case rocksdb::TableFileCreationReason::kFlush:
      case rocksdb::TableFileCreationReason::kRecovery:
        counters_->flush_bytes.fetch_add(info.file_size, std::memory_order_relaxed);
        break;
      case rocksdb::TableFileCreationReason::kCompaction:
        counters_->compaction_bytes.fetch_add(info.file_size, std::memory_order_relaxed);
        break;
      case rocksdb::TableFileCreationReason::kMisc:  // ingestion and repair: walbus does neither
        break;
    }
  }
  const char* Name() const override { return "walbus.CountTableWrites"; }

 private:
  const std::shared_ptr<WriteCounters> counters_;
};

// The memory RocksDB may hold (OpenOptions::memory_bytes), shared by
// every column family: one block cache, and the memtables charged to it.
struct Memory {
  explicit Memory(size_t bytes)
      : cache(rocksdb::NewLRUCache(bytes)),
        // Stalls writers while the memtables hold more than their share,
        // until flushes free it: the bound holds under any burst (without,
        // each column family may hold two full memtables).
        write_buffers(std::make_shared<rocksdb::WriteBufferManager>(bytes / 4 * 3, cache, /*allow_stall=*/true)),
        // One column family may fill half of the memtables' share (64 MiB
        // at most, RocksDB's default): a busy outbox flushes less often
        // than an even split would make it, and the rest still fits.
        memtable_bytes(std::min<size_t>(size_t{64} << 20, bytes / 8 * 3)),
        // A compaction builds each output table's filter and index in
        // memory, outside the cache: about 8 bytes per key. Tables of at
        // most half the cache keep that a fraction of it (64 MiB at most,
        // RocksDB's default); at a 16 MiB budget, 64 MiB tables made
        // a compaction's peak 14 MiB above the soak's steady state.
        table_file_bytes(std::min<size_t>(size_t{64} << 20, bytes / 2)) {}
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffers;
  size_t memtable_bytes;
  size_t table_file_bytes;
};

// Zstandard where RocksDB was built with it: table files shrink by a third
// or more against Snappy (RocksDB's default) at about the same CPU cost in
// flushes and compactions, and every byte not written is flash not worn.
rocksdb::CompressionType TableCompression() {
  const std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  if (std::find(supported.begin(), supported.end(), rocksdb::kZSTD) != supported.end()) return rocksdb::kZSTD;
  return rocksdb::kSnappyCompression;
}

rocksdb::ColumnFamilyOptions OptionsFor(std::string_view name, const Memory& memory,
                                        const InboxWindowFilter* inbox_filter = nullptr,
                                        const OutboxFloorFilter* outbox_filter = nullptr) {
  rocksdb::ColumnFamilyOptions cf;
  cf.compression = TableCompression();
  // A compaction from level 0 rewrites the level-1 tables its inputs
  // overlap, which for keys spread over the whole range (an application's
  // per-event records, the inbox's subscribers) is most of level 1: twice
  // RocksDB's 4 tables per compaction halves those rewrites. Within a
  // 16 MiB budget, whose small memtables flush often, a 5-minute soak's
  // compactions wrote 51-86 MiB against 138 (device bytes per logical byte
  // 3.16-3.40 against 3.76). Point reads look in up to 8 level-0 tables,
  // past Bloom filters where lookups mostly miss.
  cf.level0_file_num_compaction_trigger = 8;
  cf.write_buffer_size = memory.memtable_bytes;
  cf.target_file_size_base = memory.table_file_bytes;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = memory.cache;
  // Indexes and filters in the cache, not beside it in each open table:
  // a growing database (a long backlog) does not grow memory with it. The
  // newest tables' stay pinned, as the reads of the tail need them.
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  if (name == CfName(Cf::kInbox)) cf.compaction_filter = inbox_filter;
  if (name == CfName(Cf::kOutbox)) cf.compaction_filter = outbox_filter;
  // Inbox keys arrive nearly in order within their first 4 bytes (format
  // 2: the top of a time-ordered event id, 65 s of them; format 1: a
  // subscriber, then such ids): memtable inserts start from where the last
  // one with those bytes went instead of searching from the top of the
  // skip list. The committer is the only writer, so RocksDB never takes
  // its concurrent insert path, which ignores hints. Not on the outbox,
  // whose keys ascend too: RocksDB 7 applies the hints to range tombstones
  // (the outbox's trims), which live in another skip list, and breaks it.
  if (name == CfName(Cf::kInbox)) {
    cf.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(sizeof(uint32_t)));
    // Format 1: each subscriber's records ascend within its own key range,
    // and a flush writes the newest of every subscriber into one table:
    // that table's range spans the whole history of every subscriber but
    // the first, so each compaction into level 1 rewrote all of it (a
    // 16 MiB budget's soak wrote 5.6 device bytes per logical byte after
    // ten minutes, and growing). Compaction outputs never span two
    // subscribers, so a table moves down a level without being rewritten,
    // and level 1 stays a few tables: what a compaction into it rewrites
    // is bounded. Format 2's keys ascend across subscribers, and cutting
    // its tables at 65 s of event ids costs nothing (a 5-minute soak: 2.94
    // device bytes per logical byte with these, 2.98 without), so both
    // formats share these options: they are set before the format is read.
    cf.sst_partitioner_factory = rocksdb::NewSstPartitionerFixedPrefixFactory(sizeof(uint32_t));
    cf.max_bytes_for_level_base = 2 * memory.table_file_bytes;
    if (inbox_filter != nullptr) {
      // Moved tables skip the filter: rewrite each within the window, so
      // that its expired records still go.
      constexpr uint64_t kHour = 3600;
      const auto window = std::chrono::ceil<std::chrono::seconds>(inbox_filter->window()).count();
      cf.periodic_compaction_seconds = std::max<uint64_t>(kHour, static_cast<uint64_t>(window));
    }
  }
  if (name == CfName(Cf::kCheckpoints)) {
    cf.merge_operator = std::make_shared<CounterAddOperator>();
    // Counters take one merge per handled event: fold them in the memtable
    // rather than keep millions of operands for a flush to combine.
    cf.max_successive_merges = 64;
  }
  if (name == CfName(Cf::kInbox) || name == CfName(Cf::kVersions)) {
    // Point lookups that mostly miss: a Bloom filter keeps them off disk.
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  }
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return cf;
}

// Never a null data pointer: RocksDB (built with assertions) refuses to
// compare one, and an empty std::string_view may carry it.
rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.empty() ? "" : s.data(), s.size()); }

// Whether a database's walbus.meta holds the format version, which Open
// writes only once every column family exists.
Status HasFormatVersion(const rocksdb::DBOptions& dbo, const std::string& dir, const std::vector<std::string>& names,
                        bool* found) {
  const Memory memory(kMinMemoryBytes);  // a glance: the smallest will do
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.reserve(names.size());
  for (const auto& n : names) descriptors.emplace_back(n, OptionsFor(n, memory));
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(dbo, dir, descriptors, &handles, &raw);
  if (!s.ok()) return FromRocks(s, "open " + dir + " to check it");
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  rocksdb::Status g = rocksdb::Status::NotFound();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == CfName(Cf::kMeta))
      g = db->Get(rocksdb::ReadOptions(), handles[i], ToSlice(kMetaFormatVersion), &value);
  }
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  if (!g.ok() && !g.IsNotFound()) return FromRocks(g, "read the format version of " + dir);
  *found = g.ok();
  return Status::OK();
}

// A bus writes its lock, log and tables into its directory (and creates it
// when missing): say so plainly when it may not, rather than pass on the
// first failing system call deep inside RocksDB.
Status CheckWritable(const std::string& dir, bool exists) {
  namespace fs = std::filesystem;
  fs::path target = fs::absolute(dir);
  if (!exists) {
    std::error_code ec;
    do {
      target = target.parent_path();
    } while (!target.empty() && target != target.root_path() && !fs::exists(target, ec));
  }
  if (::access(target.c_str(), W_OK | X_OK) == 0) return Status::OK();
  const std::string why = std::strerror(errno);
  if (exists) {
    return Status::IOError(dir + " is not writable (" + why +
                           "): a bus writes its lock, log and table files there; fix its permissions, "
                           "or read it without writing with the walbus tool");
  }
  return Status::IOError("cannot create " + dir + ": " + target.string() + " is not writable (" + why + ")");
}

// Written before a fresh database is created and removed once its format
// version is durable: a directory with it is a creation cut short.
constexpr char kCreatingMarker[] = "WALBUS-CREATING";

// Creates the directory (private: `mode`) and the marker in it, both made
// durable.
Status MarkCreating(const std::string& dir, mode_t mode) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("create " + dir + ": " + ec.message());
  if (::chmod(dir.c_str(), mode) != 0) return Status::IOError("chmod " + dir + ": " + std::strerror(errno));
  const std::string marker = (fs::path(dir) / kCreatingMarker).string();
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError("create " + marker + ": " + std::strerror(errno));
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool dir_synced = dir_fd >= 0 && ::fsync(dir_fd) == 0;
  if (dir_fd >= 0) ::close(dir_fd);
  if (!synced || !dir_synced) return Status::IOError("sync " + marker + ": " + std::strerror(errno));
  return Status::OK();
}

bool IsLockError(const rocksdb::Status& s) {
  const std::string text = s.ToString();
  return s.IsIOError() && (text.find("lock") != std::string::npos || text.find("LOCK") != std::string::npos);
}

}  // namespace

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::OK();
  std::string msg(what);
  msg += ": ";
  msg += s.ToString();
  if (s.IsNotFound()) return Status::NotFound(msg);
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsInvalidArgument()) return Status::InvalidArgument(msg);
  if (s.IsNotSupported()) return Status::NotSupported(msg);
  if (s.IsBusy() || s.IsTryAgain()) return Status::Busy(msg);
  if (s.IsNoSpace()) return Status::ResourceExhausted(msg);
  return Status::IOError(msg);
}

const char* CfName(Cf cf) { return kCfNames[static_cast<size_t>(cf)]; }

bool IsReservedCfName(std::string_view name) {
  return name == rocksdb::kDefaultColumnFamilyName || name.starts_with("walbus.");
}

namespace {

// What is at the directory before RocksDB opens it.
struct DirectoryState {
  bool exists = false;
  bool has_current = false;  // RocksDB's CURRENT file
  bool creating = false;     // walbus is creating it (now, or a creation cut short)
  std::filesystem::path marker;
};

// Checks the directory for the open `options` ask for, and marks a new
// database as being created.
Status CheckDirectory(const OpenOptions& options, DirectoryState* d) {
  namespace fs = std::filesystem;
  const bool primary = options.mode == OpenOptions::Mode::kPrimary;
  std::error_code ec;
  d->exists = fs::exists(options.dir, ec);
  d->has_current = fs::exists(fs::path(options.dir) / "CURRENT", ec);
  if (!d->exists && !(primary && options.create_if_missing)) {
    return Status::NotFound("no database at " + options.dir);
  }
  if (d->exists && !fs::is_directory(options.dir, ec)) {
    return Status::InvalidArgument(options.dir + " is not a directory");
  }
  if (primary) {
    if (Status s = CheckWritable(options.dir, d->exists); !s.ok()) return s;
  }
  // A creation cut short (the process killed before RocksDB wrote CURRENT,
  // or before our column families existed) left the marker: finish it.
  d->marker = fs::path(options.dir) / kCreatingMarker;
  const bool interrupted = d->exists && fs::exists(d->marker, ec);
  if (d->exists && !d->has_current) {
    bool empty = fs::is_empty(options.dir, ec);
    if (!(empty || interrupted) || !primary || !options.create_if_missing) {
      return Status::InvalidArgument(options.dir + (interrupted
                                                        ? " is a walbus database whose creation did not finish"
                                                        : " is not a walbus database (no RocksDB CURRENT file)"));
    }
  }
  d->creating = interrupted;
  if (primary && options.create_if_missing && !d->has_current && !interrupted) {
    if (Status s = MarkCreating(options.dir, options.share_with_group ? 0750 : 0700); !s.ok()) return s;
    d->creating = true;
  }
  for (const std::string& name : options.app_column_families) {
    if (name.empty() || IsReservedCfName(name)) {
      return Status::InvalidArgument("column family name '" + name + "' is empty or reserved ('default', 'walbus.*')");
    }
  }
  return Status::OK();
}

// The bound on RocksDB's info LOG: at most this many old files besides the
// current one, none larger than this.
constexpr size_t kInfoLogFileBytes = 1u << 20;
constexpr size_t kInfoLogFilesKept = 4;

// RocksDB's options for the database; *env is the private file system a
// primary instance writes through (the Db keeps it, past its rocksdb::DB).
rocksdb::DBOptions DatabaseOptions(const OpenOptions& options, const Memory& memory,
                                   const std::shared_ptr<WriteCounters>& counters, std::unique_ptr<rocksdb::Env>* env) {
  const bool primary = options.mode == OpenOptions::Mode::kPrimary;
  rocksdb::DBOptions dbo;
  dbo.create_if_missing = primary && options.create_if_missing;
  dbo.create_missing_column_families = primary;
  dbo.max_background_jobs = 2;
  // RocksDB's info LOG grows without bound by default (it rolls only at an
  // open, and keeps 1000 old ones): on a device that runs for months it
  // fills the card. Bounded here to 4 old files of at most 1 MiB each.
  dbo.max_log_file_size = kInfoLogFileBytes;
  dbo.keep_log_file_num = kInfoLogFilesKept;
  // One bound for the memtables of every column family together, within
  // the block cache: memory stays flat under any backlog.
  dbo.write_buffer_manager = memory.write_buffers;
  dbo.listeners.push_back(std::make_shared<ReleaseFreedMemory>());
  dbo.listeners.push_back(std::make_shared<CountTableWrites>(counters));
  // Column families written rarely (meta, checkpoints) would otherwise pin
  // old log files: every open then replays gigabytes of log, slowly and
  // into full memtables, and the log takes disk the budget cannot see.
  // Past this much log, the column families holding the oldest flush.
  dbo.max_total_wal_size = options.max_log_bytes;
  if (primary) {
    // Every file RocksDB writes there is private too (0600, or 0640).
    *env = PrivateFs::NewEnv(options.env != nullptr ? options.env : rocksdb::Env::Default(), options.share_with_group);
    dbo.env = env->get();
  } else if (options.env != nullptr) {
    dbo.env = options.env;
  }
  return dbo;
}

// The column families the database has (none before it is created); an
// error when it is not a walbus database, or one that lost a column family
// of its own.
Status ExistingColumnFamilies(const rocksdb::DBOptions& dbo, const OpenOptions& options, const DirectoryState& d,
                              std::vector<std::string>* existing) {
  if (!d.has_current) return Status::OK();
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(dbo, options.dir, existing);
  if (!s.ok()) return FromRocks(s, "list column families of " + options.dir);
  bool has_meta = false;
  for (const auto& n : *existing) has_meta |= n == CfName(Cf::kMeta);
  const bool primary = options.mode == OpenOptions::Mode::kPrimary;
  if (!has_meta && !(d.creating && primary)) {
    return Status::InvalidArgument(options.dir + " is a RocksDB database but not a walbus one (no walbus.meta)");
  }
  // A finished walbus database missing one of its own column families
  // lost data: refuse it rather than create the column family empty. One
  // whose creation was cut short (no format version yet) is completed.
  for (size_t c = 0; c < kOriginalCfCount; ++c) {
    const char* ours = kCfNames[c];
    if (std::find(existing->begin(), existing->end(), ours) != existing->end()) continue;
    bool finished = false;
    if (Status f = HasFormatVersion(dbo, options.dir, *existing, &finished); !f.ok()) return f;
    if (finished) {
      return Status::Corruption(options.dir + " is a walbus database without its column family " + ours +
                                "; it was damaged or written by an incompatible tool");
    }
    break;
  }
  return Status::OK();
}

// Every existing column family must be opened; a primary adds walbus's and
// the application's.
Status ColumnFamiliesToOpen(const OpenOptions& options, std::vector<std::string> existing,
                            std::vector<std::string>* names) {
  *names = std::move(existing);
  auto add = [names](const std::string& n) {
    if (std::find(names->begin(), names->end(), n) == names->end()) names->push_back(n);
  };
  if (options.mode == OpenOptions::Mode::kPrimary) {
    add(rocksdb::kDefaultColumnFamilyName);
    for (const char* n : kCfNames) add(n);
    for (const auto& n : options.app_column_families) add(n);
  } else if (names->empty()) {
    return Status::NotFound("no database at " + options.dir);
  }
  return Status::OK();
}

// RocksDB's refusal to open, said for walbus: Busy for a held lock, a
// permission problem named as one.
Status OpenError(const rocksdb::Status& s, const std::string& dir) {
  if (IsLockError(s)) {
    return Status::Busy("database " + dir + " is in use: another process (or another Bus in this process) holds " +
                        dir + "/LOCK");
  }
  if (s.IsIOError() && s.ToString().find("ermission") != std::string::npos) {
    return Status::IOError("cannot open " + dir + " for writing: " + s.ToString());
  }
  return FromRocks(s, "open " + dir);
}

}  // namespace

Status Db::Open(const OpenOptions& options, std::unique_ptr<Db>* out) {
  out->reset();
  if (options.dir.empty()) return Status::InvalidArgument("no database directory given");
  if (options.memory_bytes < kMinMemoryBytes) return Status::InvalidArgument("memory_bytes is below 4 MiB");
  const bool primary = options.mode == OpenOptions::Mode::kPrimary;
  DirectoryState dir;
  if (Status s = CheckDirectory(options, &dir); !s.ok()) return s;
  const Memory memory(options.memory_bytes);
  std::unique_ptr<rocksdb::Env> db_env;
  auto counters = std::make_shared<WriteCounters>();
  rocksdb::DBOptions dbo = DatabaseOptions(options, memory, counters, &db_env);
  std::vector<std::string> existing, names;
  if (Status s = ExistingColumnFamilies(dbo, options, dir, &existing); !s.ok()) return s;
  if (Status s = ColumnFamiliesToOpen(options, std::move(existing), &names); !s.ok()) return s;

  std::unique_ptr<Db> db(new Db());
  db->options_ = options;
  db->env_ = std::move(db_env);
  db->write_counters_ = std::move(counters);
  std::unique_ptr<InboxWindowFilter> inbox_filter;
  if (primary && options.inbox_retention != nullptr) {
    inbox_filter = std::make_unique<InboxWindowFilter>(options.inbox_retention);
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.reserve(names.size());
  db->outbox_filter_ = std::make_unique<OutboxFloorFilter>();
  for (const auto& n : names) {
    descriptors.emplace_back(n, OptionsFor(n, memory, inbox_filter.get(), db->outbox_filter_.get()));
  }
  InboxWindowFilter* const inbox_filter_to_tell = inbox_filter.get();
  db->inbox_filter_ = std::move(inbox_filter);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  if (primary) {
    s = rocksdb::DB::Open(dbo, options.dir, descriptors, &db->all_handles_, &raw);
  } else {
    dbo.max_open_files = -1;  // required by secondary instances
    if (options.secondary_dir.empty()) return Status::InvalidArgument("secondary_dir is required");
    s = rocksdb::DB::OpenAsSecondary(dbo, options.dir, options.secondary_dir, descriptors, &db->all_handles_, &raw);
  }
  if (!s.ok()) return OpenError(s, options.dir);
  db->db_.reset(raw);
  db->snapshots_ = std::make_shared<Snapshot::Registry>(raw);
  if (Status adopted = db->AdoptHandles(names); !adopted.ok()) return adopted;
  if (Status fmt = db->CheckFormat(!dir.has_current); !fmt.ok()) return fmt;
  if (Status up = db->UpgradeFormat(OptionsFor(Db::kInboxConvertingCf, memory)); !up.ok()) return up;
  if (inbox_filter_to_tell != nullptr) inbox_filter_to_tell->SetLayout(db->inbox_layout());
  if (Status floor = db->ReadOutboxFloor(); !floor.ok()) return floor;
  if (dir.creating && primary) {
    // The format version is durable (CheckFormat syncs it): created.
    std::error_code ec;
    std::filesystem::remove(dir.marker, ec);
    if (ec) return Status::IOError("remove " + dir.marker.string() + ": " + ec.message());
  }
  struct stat st;
  db->open_to_others_ = ::stat(options.dir.c_str(), &st) == 0 && (st.st_mode & S_IRWXO) != 0;
  *out = std::move(db);
  return Status::OK();
}

Status Db::AdoptHandles(const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    bool ours = false;
    for (size_t c = 0; c < std::size(kCfNames); ++c) {
      if (names[i] == kCfNames[c]) {
        handles_[c] = all_handles_[i];
        ours = true;
      }
    }
    if (names[i] == kInboxConvertingCf) {
      inbox_converting_ = all_handles_[i];
      ours = true;
    }
    if (!ours && names[i] != rocksdb::kDefaultColumnFamilyName) {
      app_names_.push_back(names[i]);
      app_handles_.push_back(all_handles_[i]);
    }
  }
  for (size_t c = 0; c < kOriginalCfCount; ++c) {
    if (handles_[c] == nullptr) return Status::Corruption(options_.dir + " lacks column family " + kCfNames[c]);
  }
  return Status::OK();
}

Status Db::CheckFormat(bool fresh) {
  std::string value;
  bool found = false;
  Status s = Get(cf(Cf::kMeta), kMetaFormatVersion, &value, &found);
  if (!s.ok()) return s;
  if (!found) {
    if (!fresh && options_.mode == OpenOptions::Mode::kSecondary) {
      return Status::InvalidArgument(options_.dir + " is not a walbus database (no format version)");
    }
    // A database being created: nothing written yet, so it takes this
    // build's format (inbox_layout_ is already that of kFormatVersion).
    if (options_.mode == OpenOptions::Mode::kSecondary) return Status::OK();
    std::string v;
    PutBe32(&v, kFormatVersion);
    Batch batch;
    batch.Put(cf(Cf::kMeta), kMetaFormatVersion, v);
    return batch.Commit(this, true);
  }
  if (value.size() != 4) return Status::Corruption("format version record has a bad size");
  uint32_t version = GetBe32(value);
  if (version > kFormatVersion) {
    return Status::NotSupported(options_.dir + " has on-disk format " + std::to_string(version) +
                                "; this build reads up to " + std::to_string(kFormatVersion));
  }
  if (version == 0) return Status::Corruption(options_.dir + " has on-disk format 0, which no walbus wrote");
  inbox_layout_ = version == 1 ? InboxLayout::kSubscriberFirst : InboxLayout::kEventFirst;
  return Status::OK();
}

// Who may release the snapshots of one Db: each Snapshot as it is
// destroyed, or the Db as it closes, whichever comes first.
struct Snapshot::Registry {
  explicit Registry(rocksdb::DB* d) : db(d) {}
  internal::Mutex mu;
  rocksdb::DB* db GUARDED_BY(mu);  // null once the Db closed
  std::unordered_set<Snapshot*> live GUARDED_BY(mu);
};

Snapshot::Snapshot(std::shared_ptr<Registry> registry, const rocksdb::Snapshot* raw)
    : registry_(std::move(registry)), raw_(raw) {}

const rocksdb::Snapshot* Snapshot::Raw(const Snapshot* snapshot) {
  if (snapshot == nullptr) return nullptr;
  assert(snapshot->raw_ != nullptr && "a read through a snapshot released at close");
  return snapshot->raw_;
}

Snapshot::~Snapshot() {
  internal::MutexLock lock(&registry_->mu);
  if (registry_->db != nullptr) registry_->db->ReleaseSnapshot(raw_);
  registry_->live.erase(this);
}

std::unique_ptr<Snapshot> Db::NewSnapshot() {
  internal::MutexLock lock(&snapshots_->mu);
  assert(snapshots_->db != nullptr);
  std::unique_ptr<Snapshot> snapshot(new Snapshot(snapshots_, db_->GetSnapshot()));
  snapshots_->live.insert(snapshot.get());
  return snapshot;
}

Db::~Db() {
  if (db_ == nullptr) {
    return;
  }
  {
    // Snapshots an application still holds (a ReadView kept past Close)
    // must not keep RocksDB from closing, nor outlive it.
    internal::MutexLock lock(&snapshots_->mu);
    for (Snapshot* snapshot : snapshots_->live) {
      db_->ReleaseSnapshot(snapshot->raw_);
      snapshot->raw_ = nullptr;
    }
    snapshots_->live.clear();
    snapshots_->db = nullptr;
  }
  for (auto* h : all_handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  if (options_.mode == OpenOptions::Mode::kPrimary) db_->Close().PermitUncheckedError();
}

rocksdb::ColumnFamilyHandle* Db::AppCf(std::string_view name) const {
  for (size_t i = 0; i < app_names_.size(); ++i)
    if (app_names_[i] == name) return app_handles_[i];
  return nullptr;
}

uint32_t Db::CfId(CfHandle* cf) { return cf->GetID(); }

namespace {
rocksdb::ReadOptions ReadAt(const rocksdb::Snapshot* raw) {
  rocksdb::ReadOptions ro;
  ro.snapshot = raw;
  return ro;
}
}  // namespace

Status Db::Get(rocksdb::ColumnFamilyHandle* handle, std::string_view key, std::string* value, bool* found,
               const Snapshot* snapshot) const {
  uint64_t seq = 0;
  if (handle == cf(Cf::kOutbox) && ParseOutboxKey(key, &seq) && seq < outbox_floor()) {
    *found = false;  // trimmed, its table file not yet compacted
    return Status::OK();
  }
  rocksdb::PinnableSlice slice;
  rocksdb::Status s = db_->Get(ReadAt(Snapshot::Raw(snapshot)), handle, ToSlice(key), &slice);
  if (s.IsNotFound()) {
    *found = false;
    return Status::OK();
  }
  if (!s.ok()) return FromRocks(s, "read");
  *found = true;
  value->assign(slice.data(), slice.size());
  return Status::OK();
}

Status Db::ScanOutbox(uint64_t from_seq, size_t limit,
                      const std::function<bool(uint64_t, std::string_view)>& visit) const {
  const std::string lower = OutboxKey(std::max(from_seq, outbox_floor()));
  rocksdb::Slice lower_slice = ToSlice(lower);
  rocksdb::ReadOptions ro;
  ro.iterate_lower_bound = &lower_slice;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cf(Cf::kOutbox)));
  size_t n = 0;
  for (it->Seek(lower_slice); it->Valid() && n < limit; it->Next(), ++n) {
    uint64_t seq = 0;
    rocksdb::Slice k = it->key();
    if (!ParseOutboxKey(std::string_view(k.data(), k.size()), &seq)) {
      return Status::Corruption("outbox key of " + std::to_string(k.size()) + " bytes");
    }
    rocksdb::Slice v = it->value();
    if (!visit(seq, std::string_view(v.data(), v.size()))) break;
  }
  return FromRocks(it->status(), "scan outbox");
}

Status Db::LastOutboxSeq(uint64_t* seq) const {
  *seq = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf(Cf::kOutbox)));
  it->SeekToLast();
  if (it->Valid()) {
    rocksdb::Slice k = it->key();
    if (!ParseOutboxKey(std::string_view(k.data(), k.size()), seq)) {
      return Status::Corruption("outbox key of " + std::to_string(k.size()) + " bytes");
    }
    if (*seq < outbox_floor()) *seq = 0;  // trimmed: the outbox is empty
  }
  return FromRocks(it->status(), "read last outbox entry");
}

Status Db::Scan(Cf which, std::string_view prefix, size_t limit,
                const std::function<bool(std::string_view, std::string_view)>& visit) const {
  return Scan(cf(which), prefix, limit, visit);
}

Status Db::Scan(CfHandle* handle, std::string_view prefix, size_t limit,
                const std::function<bool(std::string_view, std::string_view)>& visit) const {
  assert(handle != nullptr);
  rocksdb::Slice lower = ToSlice(prefix);
  rocksdb::ReadOptions ro;
  ro.iterate_lower_bound = &lower;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handle));
  size_t n = 0;
  for (it->Seek(lower); it->Valid() && n < limit && it->key().starts_with(lower); it->Next(), ++n) {
    rocksdb::Slice k = it->key();
    rocksdb::Slice v = it->value();
    if (!visit(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()))) break;
  }
  return FromRocks(it->status(), "scan " + handle->GetName());
}

Status Db::ScanRange(CfHandle* handle, const Snapshot* snapshot, KeyBounds bounds, bool reverse,
                     const std::function<bool(std::string_view, std::string_view)>& visit) const {
  assert(handle != nullptr);
  rocksdb::ReadOptions ro = ReadAt(Snapshot::Raw(snapshot));
  const rocksdb::Slice lower = ToSlice(bounds.lower), upper = ToSlice(bounds.upper);
  if (!bounds.lower.empty()) ro.iterate_lower_bound = &lower;
  if (!bounds.upper.empty()) ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handle));
  for (reverse ? it->SeekToLast() : it->SeekToFirst(); it->Valid(); reverse ? it->Prev() : it->Next()) {
    const rocksdb::Slice k = it->key(), v = it->value();
    if (!visit(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()))) break;
  }
  return FromRocks(it->status(), "scan " + handle->GetName());
}

Batch::Batch() : rep_(std::make_unique<rocksdb::WriteBatch>()) {}
Batch::~Batch() = default;

// WriteBatch only fails on a column family without a handle or a size over
// 4 GiB; both are programming errors here.
void Batch::Put(CfHandle* cf, std::string_view key, std::string_view value) {
  rocksdb::Status s = rep_->Put(cf, ToSlice(key), ToSlice(value));
  assert(s.ok());
  s.PermitUncheckedError();
}
void Batch::Delete(CfHandle* cf, std::string_view key) {
  rocksdb::Status s = rep_->Delete(cf, ToSlice(key));
  assert(s.ok());
  s.PermitUncheckedError();
}
void Batch::AddCounter(CfHandle* cf, std::string_view key, uint64_t delta) {
  rocksdb::Status s = rep_->Merge(cf, ToSlice(key), EncodeCounter(delta));
  assert(s.ok());
  s.PermitUncheckedError();
}
void Batch::DeleteRange(CfHandle* cf, std::string_view begin, std::string_view end) {
  // RocksDB 7 steers range tombstones by the memtable insert hints as well,
  // though they live in another skip list: never on a hinted family.
  assert(cf->GetName() != CfName(Cf::kInbox));
  rocksdb::Status s = rep_->DeleteRange(cf, ToSlice(begin), ToSlice(end));
  assert(s.ok());
  s.PermitUncheckedError();
}
void Batch::SetSavePoint() { rep_->SetSavePoint(); }
void Batch::RollbackToSavePoint() {
  rocksdb::Status s = rep_->RollbackToSavePoint();
  assert(s.ok());
  s.PermitUncheckedError();
}
size_t Batch::bytes() const { return rep_->GetDataSize(); }
size_t Batch::count() const { return rep_->Count(); }
void Batch::Clear() { rep_->Clear(); }

Status Batch::Commit(Db* db, bool sync) {
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  // A synced write syncs the log before it too: the trims written there.
  const uint64_t trimmed = sync ? db->outbox_trim_unsynced_.load(std::memory_order_acquire) : 0;
  rocksdb::Status s = db->db_->Write(wo, rep_.get());
  if (s.ok()) db->write_counters_->log_bytes.fetch_add(rep_->GetDataSize(), std::memory_order_relaxed);
  if (s.ok() && sync) db->outbox_filter_->RaiseDurable(trimmed);
  return FromRocks(s, "write");
}

Status Db::SuggestOutboxCompaction(uint64_t from_seq, uint64_t below_seq) {
  const std::string begin = OutboxKey(from_seq);
  const std::string end = OutboxKey(below_seq);
  const rocksdb::Slice b(begin), e(end);
  return FromRocks(rocksdb::experimental::SuggestCompactRange(db_.get(), cf(Cf::kOutbox), &b, &e),
                   "suggest compacting the outbox");
}

Status Db::SyncLog() {
  const uint64_t trimmed = outbox_trim_unsynced_.load(std::memory_order_acquire);
  const rocksdb::Status s = db_->SyncWAL();
  if (s.ok()) outbox_filter_->RaiseDurable(trimmed);
  return FromRocks(s, "sync the write-ahead log");
}

Status Db::ReadOutboxFloor() {
  std::string value;
  bool found = false;
  if (Status s = Get(cf(Cf::kMeta), kMetaTrimmedBelow, &value, &found); !s.ok() || !found) return s;
  if (value.size() != 8) return Status::Corruption("the outbox's trim point has a bad size");
  // What the database holds is durable: both floors are there.
  outbox_filter_->RaiseVisible(GetBe64(value));
  outbox_filter_->RaiseDurable(GetBe64(value));
  return Status::OK();
}

void Db::NoteOutboxTrimmed(uint64_t seq) {
  outbox_filter_->RaiseVisible(seq);
  RaiseTo(&outbox_trim_unsynced_, seq);
}

uint64_t Db::outbox_floor() const { return outbox_filter_->visible(); }
uint64_t Db::outbox_durable_floor() const { return outbox_filter_->durable(); }

Status Db::DropOutboxFilesBelowFloor() {
  const uint64_t floor = outbox_filter_->durable();
  if (floor <= 1) return Status::OK();
  const std::string end = OutboxKey(floor);
  const rocksdb::Slice e(end);
  return FromRocks(rocksdb::DeleteFilesInRange(db_.get(), cf(Cf::kOutbox), nullptr, &e, /*include_end=*/false),
                   "delete the outbox's trimmed table files");
}

Status Db::FlushOutbox() {
  rocksdb::FlushOptions options;
  options.allow_write_stall = true;  // a stall waits for this flush to end
  return FromRocks(db_->Flush(options, cf(Cf::kOutbox)), "flush the outbox");
}

Status Db::Compact(Cf which) {
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  return FromRocks(db_->CompactRange(options, cf(which), nullptr, nullptr), "compact");
}

uint64_t Db::CfBytes(Cf which) const {
  CfHandle* h = cf(which);
  if (h == nullptr) return 0;
  uint64_t files = 0, memtables = 0;
  if (!db_->GetIntProperty(h, rocksdb::DB::Properties::kLiveSstFilesSize, &files)) files = 0;
  if (!db_->GetIntProperty(h, rocksdb::DB::Properties::kSizeAllMemTables, &memtables)) memtables = 0;
  return files + memtables;
}

uint64_t Db::OutboxBytesFrom(uint64_t from_seq) const {
  const std::string begin = OutboxKey(from_seq);
  const std::string end(begin.size() + 1, '\xff');  // past every outbox key
  const rocksdb::Range range(begin, end);
  rocksdb::SizeApproximationOptions options;
  options.include_memtables = false;  // a sample of the skiplist there: can read half
  options.include_files = true;
  uint64_t bytes = 0;
  if (!db_->GetApproximateSizes(options, cf(Cf::kOutbox), &range, 1, &bytes).ok()) bytes = 0;
  // The memtables, read: bounded by the memory budget's share.
  const rocksdb::Slice lower(begin);
  rocksdb::ReadOptions ro;
  ro.read_tier = rocksdb::kMemtableTier;
  ro.iterate_lower_bound = &lower;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cf(Cf::kOutbox)));
  for (it->Seek(lower); it->Valid(); it->Next()) bytes += it->key().size() + it->value().size();
  it->status().PermitUncheckedError();  // what was read counts; the rest is the files' estimate
  return bytes;
}

uint64_t Db::LogBytes() const {
  std::error_code ec;
  uint64_t bytes = 0;
  for (std::filesystem::directory_iterator it(db_->GetName(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".log") continue;  // NNNNNN.log; the info log is LOG
    std::error_code file_ec;
    const uintmax_t size = it->file_size(file_ec);
    if (!file_ec) bytes += size;  // a file the log's recycling just removed is not counted
  }
  return bytes;
}

uint64_t Db::SumProperty(const std::string& name) const {
  uint64_t sum = 0;
  for (auto* h : all_handles_) {
    uint64_t v = 0;
    if (db_->GetIntProperty(h, name, &v)) sum += v;
  }
  return sum;
}

Db::Written Db::written() const {
  Written w;
  w.log_bytes = write_counters_->log_bytes.load(std::memory_order_relaxed);
  w.flush_bytes = write_counters_->flush_bytes.load(std::memory_order_relaxed);
  w.compaction_bytes = write_counters_->compaction_bytes.load(std::memory_order_relaxed);
  return w;
}

uint64_t Db::DbProperty(const std::string& name) const {
  uint64_t v = 0;
  return db_->GetIntProperty(name, &v) ? v : 0;
}

}  // namespace walbus::storage
