// FaultFs: a file system for tests that can lose power and run out of space.
//
// It forwards to the default (POSIX) file system and keeps, for every
// writable file it opened, how many bytes were appended and how many of
// them were made durable.
//
// Power-loss model
//   - Only Sync() and Fsync() make a file's appended bytes durable. Flush(),
//     RangeSync() and Close() do not: they reach the page cache, which a
//     power cut loses.
//   - A file created through this file system and never synced is lost
//     whole (its directory entry was never made durable either). Files that
//     existed before, or that were opened through another file system, are
//     taken as durable as they are.
//   - Renames, deletions and links take effect at once (RocksDB fsyncs the
//     directory after the ones it relies on).
//
// A test simulates a power cut in three steps:
//   1. CutPower() while the database runs. From then on nothing reaches
//      the disk: appends, syncs, truncations, renames, deletions and new
//      files succeed without doing anything, so RocksDB (and its Close) can
//      neither make more data durable nor destroy what is already there.
//   2. Close or destroy the database.
//   3. DropUnsyncedData(): every tracked file is cut back to what was
//      durable at the cut (or now, without a cut), never-synced new files
//      are deleted, and the power is back on. The next open sees what a
//      machine would see after rebooting.
//
// Full disk: while SetNoSpace(true) is on, appends and syncs on writable
// files and the opening of writable files fail with
// IOStatus::NoSpace("injected ENOSPC") and write nothing; each failure is
// counted. GetFreeSpace() then reports 0 bytes free, as a full disk would:
// RocksDB's own recovery from a full disk polls it, and resumes writing
// once it reports room again.
//
// Not modelled: partial (torn) appends, a file's size reaching the disk
// without its data, lost renames. Random-read-write files and the info
// log (LOG) are not tracked: walbus writes its data through neither.
//
// Threading: thread-safe; RocksDB calls it from its background threads.
// One mutex guards the flags and the per-file records, and every mutating
// call holds it from its check of the flags through the I/O to the update
// of the record. So the records always match the disk, and a cut or a
// switch of the no-space flag falls between two calls, never inside one.
// The price is that writes through one FaultFs are serialized, which is
// fine for tests. Reads are forwarded without the mutex.
#ifndef WALBUS_STORAGE_TESTING_FAULT_FS_H_
#define WALBUS_STORAGE_TESTING_FAULT_FS_H_

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "bus/util/mutex.h"
#include "walbus/status.h"

namespace walbus::storage {

using internal::Mutex;
using internal::MutexLock;

class FaultFs : public rocksdb::FileSystemWrapper {
 public:
  FaultFs();
  ~FaultFs() override;

  // An Env that does its file I/O through `fs` and everything else (clock,
  // threads) as the default Env. Pass env.get() as the database's Env;
  // both must outlive the database.
  static std::unique_ptr<rocksdb::Env> NewEnv(const std::shared_ptr<FaultFs>& fs);

  static const char* kClassName() { return "walbus.FaultFs"; }
  const char* Name() const override { return kClassName(); }

  // Freezes the disk: see the power-loss model above. Idempotent.
  void CutPower();

  // Truncates every tracked file to its durable size and deletes tracked
  // files that were created and never synced, then forgets every record
  // (what is left is durable) and switches the power back on.
  // REQUIRES: no database is open over this file system. While a tracked
  // file is still open it changes nothing and returns InvalidArgument.
  Status DropUnsyncedData();

  void SetNoSpace(bool on);
  // Calls failed with an injected ENOSPC so far.
  uint64_t injected_failures() const;

  // Opening writable files.
  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;

  // Changes to names and sizes: no-ops after a cut, and they keep the
  // records in step.
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& fname, size_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname, const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;

  // 0 while the disk is full, the real figure otherwise.
  rocksdb::IOStatus GetFreeSpace(const std::string& path, const rocksdb::IOOptions& options, uint64_t* diskfree,
                                 rocksdb::IODebugContext* dbg) override;

 private:
  // What is known about one writable file. GUARDED_BY(mu_).
  struct FileRecord {
    uint64_t appended = 0;  // bytes written to the file (page cache)
    uint64_t durable = 0;   // bytes covered by the last successful sync
    bool created = false;   // created through this file system
    bool synced = false;    // a sync ever succeeded
    int open = 0;           // open handles
  };
  class TrackedFile;  // a tracked writable file
  class LostFile;     // a file opened after the cut: writes go nowhere

  rocksdb::IOStatus InjectNoSpace() REQUIRES(mu_);

  mutable Mutex mu_;
  bool power_cut_ GUARDED_BY(mu_) = false;
  bool no_space_ GUARDED_BY(mu_) = false;
  uint64_t injected_failures_ GUARDED_BY(mu_) = 0;
  // By path. A record is shared with the open handles of its file, so a
  // rename moves it without touching them.
  std::map<std::string, std::shared_ptr<FileRecord>> files_ GUARDED_BY(mu_);
};

}  // namespace walbus::storage

#endif  // WALBUS_STORAGE_TESTING_FAULT_FS_H_
