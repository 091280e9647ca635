#include "storage/testing/fault_fs.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

namespace walbus::storage {

using rocksdb::DataVerificationInfo;
using rocksdb::FileOptions;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

// A writable file of the real file system whose appends and syncs are
// recorded in its FileRecord, under the FaultFs mutex.
class FaultFs::TrackedFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  TrackedFile(FaultFs* fs, std::shared_ptr<FileRecord> record, std::unique_ptr<FSWritableFile> file)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs), record_(std::move(record)) {
    ++record_->open;  // the caller holds fs_->mu_
  }
  ~TrackedFile() override {
    MutexLock lock(&fs_->mu_);
    --record_->open;
  }

  IOStatus Append(const Slice& data, const IOOptions& options, IODebugContext* dbg) override {
    return Write(data.size(), std::nullopt, [&] { return target()->Append(data, options, dbg); });
  }
  IOStatus Append(const Slice& data, const IOOptions& options, const DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    return Write(data.size(), std::nullopt, [&] { return target()->Append(data, options, info, dbg); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            IODebugContext* dbg) override {
    return Write(data.size(), offset, [&] { return target()->PositionedAppend(data, offset, options, dbg); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            const DataVerificationInfo& info, IODebugContext* dbg) override {
    return Write(data.size(), offset, [&] { return target()->PositionedAppend(data, offset, options, info, dbg); });
  }

  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return MakeDurable([&] { return target()->Sync(options, dbg); });
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return MakeDurable([&] { return target()->Fsync(options, dbg); });
  }

  IOStatus Truncate(uint64_t size, const IOOptions& options, IODebugContext* dbg) override {
    MutexLock lock(&fs_->mu_);
    if (fs_->power_cut_) return IOStatus::OK();
    IOStatus s = target()->Truncate(size, options, dbg);
    if (s.ok()) {
      record_->appended = size;
      record_->durable = std::min(record_->durable, size);
    }
    return s;
  }

  // Neither makes anything durable; after the cut they do nothing.
  IOStatus Flush(const IOOptions& options, IODebugContext* dbg) override {
    MutexLock lock(&fs_->mu_);
    if (fs_->power_cut_) return IOStatus::OK();
    return target()->Flush(options, dbg);
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& options, IODebugContext* dbg) override {
    MutexLock lock(&fs_->mu_);
    if (fs_->power_cut_) return IOStatus::OK();
    return target()->RangeSync(offset, nbytes, options, dbg);
  }
  IOStatus Allocate(uint64_t offset, uint64_t len, const IOOptions& options, IODebugContext* dbg) override {
    MutexLock lock(&fs_->mu_);
    if (fs_->power_cut_) return IOStatus::OK();
    return target()->Allocate(offset, len, options, dbg);
  }
  // Close releases the descriptor even after the cut; it writes no data.

 private:
  template <typename Io>
  IOStatus Write(size_t n, std::optional<uint64_t> offset, Io io) {
    MutexLock lock(&fs_->mu_);
    if (fs_->power_cut_) return IOStatus::OK();
    if (fs_->no_space_) return fs_->InjectNoSpace();
    IOStatus s = io();
    if (s.ok()) {
      record_->appended = offset ? std::max(record_->appended, *offset + n) : record_->appended + n;
    }
    return s;
  }

  template <typename Io>
  IOStatus MakeDurable(Io io) {
    MutexLock lock(&fs_->mu_);
    if (fs_->power_cut_) return IOStatus::OK();
    if (fs_->no_space_) return fs_->InjectNoSpace();
    IOStatus s = io();
    if (s.ok()) {
      record_->durable = record_->appended;
      record_->synced = true;
    }
    return s;
  }

  FaultFs* const fs_;
  const std::shared_ptr<FileRecord> record_;
};

// Opened after the power cut: accepts everything, keeps nothing.
class FaultFs::LostFile : public FSWritableFile {
 public:
  IOStatus Append(const Slice& data, const IOOptions&, IODebugContext*) override {
    size_ += data.size();
    return IOStatus::OK();
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions&, IODebugContext*) override {
    size_ = std::max(size_, offset + data.size());
    return IOStatus::OK();
  }
  IOStatus Truncate(uint64_t size, const IOOptions&, IODebugContext*) override {
    size_ = size;
    return IOStatus::OK();
  }
  IOStatus Close(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  IOStatus Sync(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  IOStatus Fsync(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  uint64_t GetFileSize(const IOOptions&, IODebugContext*) override { return size_; }

 private:
  uint64_t size_ = 0;
};

FaultFs::FaultFs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
FaultFs::~FaultFs() = default;

std::unique_ptr<rocksdb::Env> FaultFs::NewEnv(const std::shared_ptr<FaultFs>& fs) {
  return rocksdb::NewCompositeEnv(fs);
}

void FaultFs::CutPower() {
  MutexLock lock(&mu_);
  power_cut_ = true;
}

void FaultFs::SetNoSpace(bool on) {
  MutexLock lock(&mu_);
  no_space_ = on;
}

uint64_t FaultFs::injected_failures() const {
  MutexLock lock(&mu_);
  return injected_failures_;
}

IOStatus FaultFs::GetFreeSpace(const std::string& path, const IOOptions& options, uint64_t* diskfree,
                               IODebugContext* dbg) {
  {
    MutexLock lock(&mu_);
    if (no_space_) {
      *diskfree = 0;
      return IOStatus::OK();
    }
  }
  return target()->GetFreeSpace(path, options, diskfree, dbg);
}

IOStatus FaultFs::InjectNoSpace() {
  ++injected_failures_;
  return IOStatus::NoSpace("injected ENOSPC");
}

Status FaultFs::DropUnsyncedData() {
  MutexLock lock(&mu_);
  for (const auto& [path, record] : files_) {
    if (record->open > 0) {
      return Status::InvalidArgument("DropUnsyncedData: " + path + " is still open; close the database first");
    }
  }
  Status first_error;
  auto note = [&first_error](const IOStatus& s, const std::string& what) {
    if (!s.ok() && !s.IsNotFound() && first_error.ok()) first_error = Status::IOError(what + ": " + s.ToString());
  };
  for (const auto& [path, record] : files_) {
    if (record->created && !record->synced) {
      note(target()->DeleteFile(path, IOOptions(), nullptr), "delete " + path);
      continue;
    }
    uint64_t size = 0;
    IOStatus s = target()->GetFileSize(path, IOOptions(), &size, nullptr);
    if (!s.ok()) {
      note(s, "size of " + path);
      continue;
    }
    // FileSystem::Truncate is not implemented by the POSIX file system.
    if (size > record->durable && ::truncate(path.c_str(), static_cast<off_t>(record->durable)) != 0) {
      note(IOStatus::IOError(std::strerror(errno)), "truncate " + path);
    }
  }
  files_.clear();
  power_cut_ = false;
  return first_error;
}

IOStatus FaultFs::NewWritableFile(const std::string& fname, const FileOptions& options,
                                  std::unique_ptr<FSWritableFile>* result, IODebugContext* dbg) {
  result->reset();  // outside mu_: destroying a TrackedFile takes it
  MutexLock lock(&mu_);
  if (power_cut_) {
    *result = std::make_unique<LostFile>();
    return IOStatus::OK();
  }
  if (no_space_) return InjectNoSpace();
  std::unique_ptr<FSWritableFile> file;
  IOStatus s = target()->NewWritableFile(fname, options, &file, dbg);
  if (!s.ok()) return s;
  auto record = std::make_shared<FileRecord>();
  record->created = true;
  files_[fname] = record;
  *result = std::make_unique<TrackedFile>(this, std::move(record), std::move(file));
  return s;
}

IOStatus FaultFs::ReopenWritableFile(const std::string& fname, const FileOptions& options,
                                     std::unique_ptr<FSWritableFile>* result, IODebugContext* dbg) {
  result->reset();  // outside mu_: destroying a TrackedFile takes it
  MutexLock lock(&mu_);
  if (power_cut_) {
    *result = std::make_unique<LostFile>();
    return IOStatus::OK();
  }
  if (no_space_) return InjectNoSpace();
  // The size from the file system: a reopened POSIX file reports only
  // what is appended through it (0 at first).
  uint64_t existing_size = 0;
  const bool existed = target()->GetFileSize(fname, IOOptions(), &existing_size, dbg).ok();
  std::unique_ptr<FSWritableFile> file;
  IOStatus s = target()->ReopenWritableFile(fname, options, &file, dbg);
  if (!s.ok()) return s;
  std::shared_ptr<FileRecord>& record = files_[fname];
  if (record == nullptr) {
    // Not written through us: what is there counts as durable.
    record = std::make_shared<FileRecord>();
    record->created = !existed;
    record->appended = existed ? existing_size : 0;
    record->durable = record->appended;
  }
  *result = std::make_unique<TrackedFile>(this, record, std::move(file));
  return s;
}

IOStatus FaultFs::ReuseWritableFile(const std::string& fname, const std::string& old_fname, const FileOptions& options,
                                    std::unique_ptr<FSWritableFile>* result, IODebugContext* dbg) {
  IOStatus s = RenameFile(old_fname, fname, IOOptions(), dbg);
  if (!s.ok()) return s;
  return NewWritableFile(fname, options, result, dbg);
}

IOStatus FaultFs::DeleteFile(const std::string& fname, const IOOptions& options, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  if (power_cut_) return IOStatus::OK();
  IOStatus s = target()->DeleteFile(fname, options, dbg);
  if (s.ok()) files_.erase(fname);
  return s;
}

IOStatus FaultFs::RenameFile(const std::string& src, const std::string& dst, const IOOptions& options,
                             IODebugContext* dbg) {
  MutexLock lock(&mu_);
  if (power_cut_) return IOStatus::OK();
  IOStatus s = target()->RenameFile(src, dst, options, dbg);
  if (s.ok()) {
    auto it = files_.find(src);
    if (it == files_.end()) {
      files_.erase(dst);
    } else {
      files_[dst] = std::move(it->second);
      files_.erase(src);
    }
  }
  return s;
}

IOStatus FaultFs::LinkFile(const std::string& src, const std::string& dst, const IOOptions& options,
                           IODebugContext* dbg) {
  MutexLock lock(&mu_);
  if (power_cut_) return IOStatus::OK();
  IOStatus s = target()->LinkFile(src, dst, options, dbg);
  if (s.ok()) {
    auto it = files_.find(src);
    if (it == files_.end()) {
      files_.erase(dst);
    } else {
      files_[dst] = it->second;
    }
  }
  return s;
}

IOStatus FaultFs::Truncate(const std::string& fname, size_t size, const IOOptions& options, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  if (power_cut_) return IOStatus::OK();
  IOStatus s = target()->Truncate(fname, size, options, dbg);
  if (s.ok()) {
    if (auto it = files_.find(fname); it != files_.end()) {
      it->second->appended = size;
      it->second->durable = std::min<uint64_t>(it->second->durable, size);
    }
  }
  return s;
}

IOStatus FaultFs::CreateDir(const std::string& dirname, const IOOptions& options, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  if (power_cut_) return IOStatus::OK();
  return target()->CreateDir(dirname, options, dbg);
}

IOStatus FaultFs::CreateDirIfMissing(const std::string& dirname, const IOOptions& options, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  if (power_cut_) return IOStatus::OK();
  return target()->CreateDirIfMissing(dirname, options, dbg);
}

IOStatus FaultFs::DeleteDir(const std::string& dirname, const IOOptions& options, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  if (power_cut_) return IOStatus::OK();
  return target()->DeleteDir(dirname, options, dbg);
}

}  // namespace walbus::storage
