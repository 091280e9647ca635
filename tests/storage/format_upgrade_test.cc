// Converting a format 1 database's inbox to format 2 as a primary opens
// it, and finishing a conversion that a crash cut short at any write.

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "storage/db.h"
#include "storage/keys.h"
#include "storage/testing/fault_fs.h"
#include "tests/test_util.h"

namespace walbus::storage {
namespace {

namespace fs = std::filesystem;
using walbus::testing::CreateDatabaseOfFormat;
using walbus::testing::TempDir;

using Records = std::map<std::string, std::string>;

constexpr uint32_t kSubscribers = 3;
// Several of the conversion's batches in each of its two passes.
constexpr uint64_t kEventsPerSubscriber = 5000;

std::unique_ptr<Db> OpenDb(const std::string& dir, bool upgrade_format = true, rocksdb::Env* env = nullptr) {
  OpenOptions so;
  so.dir = dir;
  so.upgrade_format = upgrade_format;
  so.env = env;
  std::unique_ptr<Db> db;
  Status s = Db::Open(so, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

std::string EventId(uint64_t n) {
  // UUIDv7-like: a millisecond time first, then the rest.
  std::string id(16, '\0');
  for (int byte = 0; byte < 8; ++byte) id[7 - byte] = static_cast<char>((1'800'000'000'000u + n) >> (8 * byte));
  for (int byte = 0; byte < 8; ++byte) id[15 - byte] = static_cast<char>((n * 0x9e3779b97f4a7c15u) >> (8 * byte));
  return id;
}

// The inbox records of the format 1 database MakeFormat1Inbox makes, as
// format 2 keys them.
Records ExpectedRecords() {
  Records expected;
  for (uint64_t n = 0; n < kEventsPerSubscriber; ++n) {
    for (uint32_t subscriber = 1; subscriber <= kSubscribers; ++subscriber) {
      expected[InboxKey(InboxLayout::kEventFirst, subscriber, EventId(n))] =
          InboxValue(n + 1, 1'800'000'000'000u + n, subscriber);
    }
  }
  return expected;
}

// A format 1 database whose inbox holds every subscriber's records of
// the same events.
void MakeFormat1Inbox(const std::string& dir) {
  CreateDatabaseOfFormat(dir, 1);
  std::unique_ptr<Db> db = OpenDb(dir, /*upgrade_format=*/false);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->inbox_layout(), InboxLayout::kSubscriberFirst);
  Batch batch;
  std::string format1_key;
  for (const auto& [key, value] : ExpectedRecords()) {
    ASSERT_TRUE(RelayInboxKey(InboxLayout::kEventFirst, key, InboxLayout::kSubscriberFirst, &format1_key));
    batch.Put(db->cf(Cf::kInbox), format1_key, value);
  }
  EXPECT_TRUE(batch.Commit(db.get(), true).ok());
}

Records InboxOf(const Db& db) {
  Records records;
  EXPECT_TRUE(db.Scan(Cf::kInbox, "", SIZE_MAX, [&](std::string_view k, std::string_view v) {
                  records.emplace(k, v);
                  return true;
                }).ok());
  return records;
}

std::vector<std::string> ColumnFamiliesAt(const std::string& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names).ok());
  return names;
}

// What a finished conversion leaves: format 2, every record under its
// new key with its value, nothing else in between.
void ExpectConverted(const std::string& dir, const Records& expected) {
  std::unique_ptr<Db> db = OpenDb(dir);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->inbox_layout(), InboxLayout::kEventFirst);
  EXPECT_TRUE(InboxOf(*db) == expected) << InboxOf(*db).size() << " records, not " << expected.size();
  std::string version;
  bool found = false;
  ASSERT_TRUE(db->Get(db->cf(Cf::kMeta), kMetaFormatVersion, &version, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(GetBe32(version), 2u);
  ASSERT_TRUE(db->Get(db->cf(Cf::kMeta), kMetaInboxLeavingFormat1, &version, &found).ok());
  EXPECT_FALSE(found) << "the marker of the first pass is gone";
  db.reset();
  for (const std::string& name : ColumnFamiliesAt(dir)) EXPECT_NE(name, "walbus.inbox.converting");
}

// A file system that acts at the n-th append to the write-ahead log or
// the MANIFEST, before the append: every write that makes a step of the
// conversion durable.
class AtWrite : public rocksdb::FileSystemWrapper {
 public:
  AtWrite(std::shared_ptr<rocksdb::FileSystem> target, int at, std::function<void()> act)
      : FileSystemWrapper(std::move(target)), at_(at), act_(std::move(act)) {}
  const char* Name() const override { return "walbus.test.AtWrite"; }

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    return Wrap(fname, target()->NewWritableFile(fname, options, result, dbg), result);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override {
    return Wrap(fname, target()->ReuseWritableFile(fname, old_fname, options, result, dbg), result);
  }
  bool acted() const { return writes_ >= at_; }

 private:
  class CountedFile : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    CountedFile(std::unique_ptr<rocksdb::FSWritableFile> file, AtWrite* owner)
        : FSWritableFileOwnerWrapper(std::move(file)), owner_(owner) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      owner_->Count();
      return FSWritableFileOwnerWrapper::Append(data, options, dbg);
    }

   private:
    AtWrite* owner_;
  };

  rocksdb::IOStatus Wrap(const std::string& fname, rocksdb::IOStatus opened,
                         std::unique_ptr<rocksdb::FSWritableFile>* result) {
    const std::string name = fs::path(fname).filename().string();
    if (opened.ok() && (name.ends_with(".log") || name.starts_with("MANIFEST"))) {
      *result = std::make_unique<CountedFile>(std::move(*result), this);
    }
    return opened;
  }
  void Count() {
    if (++writes_ == at_) act_();
  }

  const int at_;
  const std::function<void()> act_;
  std::atomic<int> writes_{0};
};

// Runs `body` in a child process and returns its result: what `body`
// returned, 100 when it failed a test assertion, or minus the signal that
// ended it. Everything that opens a database runs in a child: the parent
// stays single-threaded, so every fork copies a process without threads
// (a thread's lock held at the fork would stay held in the child).
int InChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int result = body();
    std::fflush(nullptr);
    ::_exit(::testing::Test::HasFailure() ? 100 : result);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 101;
}

// Opens `dir` with a file system that kills the process (SIGKILL) at its
// `at`-th durable write: -SIGKILL when it died there, 0 when the open
// finished first. What was written stays, as in the page cache.
int OpenKilledAtWrite(const std::string& dir, int at) {
  return InChild([&] {
    auto fs = std::make_shared<AtWrite>(rocksdb::FileSystem::Default(), at, [] { std::raise(SIGKILL); });
    std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
    return OpenDb(dir, /*upgrade_format=*/true, env.get()) != nullptr ? 0 : 1;
  });
}

// Opens `dir` with a file system whose power is cut at its `at`-th
// durable write (FaultFs), or as the open returns: what was not synced by
// then is lost. 0 when the power was cut at the write, kFinishedFirst
// when the open finished first.
constexpr int kFinishedFirst = 3;
int OpenPowerCutAtWrite(const std::string& dir, int at) {
  return InChild([&] {
    auto fault = std::make_shared<FaultFs>();
    auto fs = std::make_shared<AtWrite>(fault, at, [&fault] { fault->CutPower(); });
    {
      std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
      OpenOptions so;
      so.dir = dir;
      so.env = env.get();
      std::unique_ptr<Db> db;
      // After the cut nothing reaches the disk, and the open may fail
      // (a file it made is not there); the process would be gone.
      const Status s = Db::Open(so, &db);
      EXPECT_TRUE(s.ok() || fs->acted()) << s.ToString();
      // An open that finished first loses power as it returns: what it
      // left unsynced must not matter.
      fault->CutPower();
    }
    EXPECT_TRUE(fault->DropUnsyncedData().ok());
    return fs->acted() ? 0 : kFinishedFirst;
  });
}

TEST(FormatUpgradeTest, AFormat1InboxIsRewrittenEventIdFirstWhenAPrimaryOpensIt) {
  TempDir dir;
  EXPECT_EQ(InChild([&] {
              MakeFormat1Inbox(dir.path());
              ExpectConverted(dir.path(), ExpectedRecords());
              ExpectConverted(dir.path(), ExpectedRecords());  // and stays so
              return 0;
            }),
            0);
}

TEST(FormatUpgradeTest, WithoutUpgradeAFormat1DatabaseKeepsItsFormat) {
  TempDir dir;
  EXPECT_EQ(InChild([&] {
              MakeFormat1Inbox(dir.path());
              std::unique_ptr<Db> db = OpenDb(dir.path(), /*upgrade_format=*/false);
              EXPECT_EQ(db->inbox_layout(), InboxLayout::kSubscriberFirst);
              EXPECT_EQ(InboxOf(*db).size(), kSubscribers * kEventsPerSubscriber);
              return 0;
            }),
            0);
}

// Where a conversion stood, read without walbus (which would finish it).
struct Stage {
  bool converting_cf = false;    // walbus.inbox.converting exists
  bool leaving_format1 = false;  // the first pass's marker is present
  size_t converting_records = 0;
};

Stage StageOf(const std::string& dir) {
  Stage stage;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : ColumnFamiliesAt(dir)) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
    stage.converting_cf |= name == "walbus.inbox.converting";
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir, descriptors, &handles, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return stage;
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    if (h->GetName() == CfName(Cf::kMeta)) {
      std::string unused;
      stage.leaving_format1 = raw->Get(rocksdb::ReadOptions(), h, std::string(kMetaInboxLeavingFormat1), &unused).ok();
    }
    if (h->GetName() == "walbus.inbox.converting") {
      std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions(), h));
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++stage.converting_records;
    }
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) raw->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  delete raw;
  return stage;
}

// Half converted, the inbox is in two places: a secondary refuses it.
void ExpectASecondaryRefuses(const std::string& dir) {
  OpenOptions so;
  so.dir = dir;
  so.mode = OpenOptions::Mode::kSecondary;
  so.secondary_dir = dir + "-secondary";
  std::unique_ptr<Db> db;
  const Status s = Db::Open(so, &db);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  fs::remove_all(so.secondary_dir);
}

// Cuts a conversion short at every durable write in turn: `fault(dir, n)`
// opens dir and returns `cut` when it cut the open at write n, 0 when the
// open finished first. Checks that the next open finishes each, and what
// the open that finished left. Returns how many cuts fell in the first
// pass and in the second.
std::pair<int, int> CutAtEveryWrite(const TempDir& dir, const std::function<int(const std::string&, int)>& fault,
                                    int cut) {
  const std::string original = dir.path() + "-format1";
  EXPECT_EQ(InChild([&] {
              MakeFormat1Inbox(original);
              return 0;
            }),
            0);
  constexpr int kFirstPass = 1, kSecondPass = 2;
  int in_first_pass = 0, in_second_pass = 0;
  for (int at = 1; !::testing::Test::HasFailure(); ++at) {
    if (at >= 2000) {
      ADD_FAILURE() << "the conversion never finished";
      break;
    }
    fs::remove_all(dir.path());
    fs::copy(original, dir.path(), fs::copy_options::recursive);
    const int opened = fault(dir.path(), at);
    const bool finished = opened == 0;
    if (!finished && opened != cut) {
      ADD_FAILURE() << "the open failed at write " << at << ": " << opened;
      break;
    }
    const int checked = InChild([&] {
      const Stage stage = StageOf(dir.path());
      if (stage.converting_cf) ExpectASecondaryRefuses(dir.path());
      ExpectConverted(dir.path(), ExpectedRecords());
      if (stage.leaving_format1) return kFirstPass;
      return stage.converting_records > 0 ? kSecondPass : 0;
    });
    EXPECT_TRUE(checked >= 0 && checked < 100) << "cut at write " << at << ": the check ended with " << checked;
    in_first_pass += checked == kFirstPass;
    in_second_pass += checked == kSecondPass;
    if (finished) break;
  }
  fs::remove_all(original);
  return {in_first_pass, in_second_pass};
}

TEST(FormatUpgradeTest, AConversionKilledAtAnyWriteIsFinishedByTheNextOpen) {
  TempDir dir;
  const auto [first, second] = CutAtEveryWrite(dir, OpenKilledAtWrite, -SIGKILL);
  // Each pass has several batches, and the kills fell among them.
  EXPECT_GE(first, 3);
  EXPECT_GE(second, 3);
}

// What was not synced is lost: each pass's unsynced batches go with the
// power, and the synced steps between the passes decide what is redone.
constexpr int kPowerCut = 1;
TEST(FormatUpgradeTest, AConversionCutByAPowerLossAtAnyWriteIsFinishedByTheNextOpen) {
  TempDir dir;
  const auto [first, second] = CutAtEveryWrite(
      dir,
      [](const std::string& d, int at) {
        const int r = OpenPowerCutAtWrite(d, at);
        return r == kFinishedFirst ? 0 : (r == 0 ? kPowerCut : r);
      },
      kPowerCut);
  EXPECT_GE(first, 1);
  EXPECT_GE(second, 1);
}

}  // namespace
}  // namespace walbus::storage
