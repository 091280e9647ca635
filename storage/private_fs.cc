#include "storage/private_fs.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace walbus::storage {

PrivateFs::PrivateFs(const std::shared_ptr<rocksdb::FileSystem>& below, bool share_with_group)
    : FileSystemWrapper(below), file_mode_(share_with_group ? 0640 : 0600), dir_mode_(share_with_group ? 0750 : 0700) {}

std::unique_ptr<rocksdb::Env> PrivateFs::NewEnv(rocksdb::Env* base, bool share_with_group) {
  return rocksdb::NewCompositeEnv(std::make_shared<PrivateFs>(base->GetFileSystem(), share_with_group));
}

rocksdb::IOStatus PrivateFs::Private(rocksdb::IOStatus s, const std::string& path, mode_t mode) const {
  if (!s.ok()) return s;
  if (::chmod(path.c_str(), mode) != 0) return rocksdb::IOStatus::IOError("chmod " + path, std::strerror(errno));
  return s;
}

rocksdb::IOStatus PrivateFs::NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                             std::unique_ptr<rocksdb::FSWritableFile>* result,
                                             rocksdb::IODebugContext* dbg) {
  return Private(target()->NewWritableFile(fname, options, result, dbg), fname, file_mode_);
}

rocksdb::IOStatus PrivateFs::ReopenWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                                std::unique_ptr<rocksdb::FSWritableFile>* result,
                                                rocksdb::IODebugContext* dbg) {
  return Private(target()->ReopenWritableFile(fname, options, result, dbg), fname, file_mode_);
}

rocksdb::IOStatus PrivateFs::ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                               const rocksdb::FileOptions& options,
                                               std::unique_ptr<rocksdb::FSWritableFile>* result,
                                               rocksdb::IODebugContext* dbg) {
  return Private(target()->ReuseWritableFile(fname, old_fname, options, result, dbg), fname, file_mode_);
}

rocksdb::IOStatus PrivateFs::NewRandomRWFile(const std::string& fname, const rocksdb::FileOptions& options,
                                             std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                             rocksdb::IODebugContext* dbg) {
  return Private(target()->NewRandomRWFile(fname, options, result, dbg), fname, file_mode_);
}

rocksdb::IOStatus PrivateFs::NewLogger(const std::string& fname, const rocksdb::IOOptions& options,
                                       std::shared_ptr<rocksdb::Logger>* result, rocksdb::IODebugContext* dbg) {
  return Private(target()->NewLogger(fname, options, result, dbg), fname, file_mode_);
}

rocksdb::IOStatus PrivateFs::LockFile(const std::string& fname, const rocksdb::IOOptions& options,
                                      rocksdb::FileLock** lock, rocksdb::IODebugContext* dbg) {
  return Private(target()->LockFile(fname, options, lock, dbg), fname, file_mode_);
}

rocksdb::IOStatus PrivateFs::CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) {
  return Private(target()->CreateDir(dirname, options, dbg), dirname, dir_mode_);
}

rocksdb::IOStatus PrivateFs::CreateDirIfMissing(const std::string& dirname, const rocksdb::IOOptions& options,
                                                rocksdb::IODebugContext* dbg) {
  // An existing directory keeps its mode: the database directory's is the
  // owner's choice (Db::Open warns when it lets others in).
  const bool existed = target()->FileExists(dirname, options, dbg).ok();
  rocksdb::IOStatus s = target()->CreateDirIfMissing(dirname, options, dbg);
  return existed ? s : Private(std::move(s), dirname, dir_mode_);
}

}  // namespace walbus::storage
