// PrivateFs: the file system a primary database writes through, so that
// every file and directory RocksDB creates in it is its owner's alone
// (0600 and 0700; with a group, 0640 and 0750), whatever the process's
// umask. The database directory itself is made private by Db::Open.
//
// It forwards every call to the file system below (the default, or a test's
// FaultFs) and sets the mode of what a call created or opened for writing.
//
// Threading: thread-safe, as the file system below; it keeps no state.
#ifndef WALBUS_STORAGE_PRIVATE_FS_H_
#define WALBUS_STORAGE_PRIVATE_FS_H_

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <sys/types.h>

#include <memory>
#include <string>

namespace walbus::storage {

class PrivateFs : public rocksdb::FileSystemWrapper {
 public:
  PrivateFs(const std::shared_ptr<rocksdb::FileSystem>& below, bool share_with_group);

  // An Env whose file I/O goes through a PrivateFs over `base`'s file
  // system, and everything else (clock, threads) as the default Env's.
  static std::unique_ptr<rocksdb::Env> NewEnv(rocksdb::Env* base, bool share_with_group);

  static const char* kClassName() { return "walbus.PrivateFs"; }
  const char* Name() const override { return kClassName(); }

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
  rocksdb::IOStatus NewRandomRWFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewLogger(const std::string& fname, const rocksdb::IOOptions& options,
                              std::shared_ptr<rocksdb::Logger>* result, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LockFile(const std::string& fname, const rocksdb::IOOptions& options, rocksdb::FileLock** lock,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname, const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;

 private:
  // `s`, after setting `path`'s mode when `s` is OK; the chmod's error
  // otherwise.
  rocksdb::IOStatus Private(rocksdb::IOStatus s, const std::string& path, mode_t mode) const;

  const mode_t file_mode_;
  const mode_t dir_mode_;
};

}  // namespace walbus::storage

#endif  // WALBUS_STORAGE_PRIVATE_FS_H_
