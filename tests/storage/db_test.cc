// Hostile environments for storage/db.cc: directories that are not walbus
// databases, damaged ones, newer formats. Each is refused with a message
// that says what is wrong, and nothing is created or changed.
#include "storage/db.h"

#include <gtest/gtest.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/metadata.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/utilities/options_util.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "storage/keys.h"
#include "tests/test_util.h"
#include "tools/process_stats.h"
#include "walbus/bus.h"

namespace walbus::storage {
namespace {

using walbus::testing::CreateDatabaseOfFormat;
using walbus::testing::FormatName;
using walbus::testing::ReadableFormats;
using walbus::testing::TempDir;
namespace fs = std::filesystem;

Status OpenBus(const std::string& dir) {
  Options o;
  o.dir = dir;
  std::unique_ptr<Bus> bus;
  return Bus::Open(o, &bus);
}

void CreateWalbusDatabase(const std::string& dir) { ASSERT_TRUE(OpenBus(dir).ok()); }

TEST(DbTest, PlainRocksDbIsNotTakenForAWalbusDatabase) {
  TempDir dir;
  rocksdb::Options ro;
  ro.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(ro, dir.path(), &raw).ok());
  delete raw;
  Status s = OpenBus(dir.path());
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not a walbus one"), std::string::npos) << s.ToString();
}

TEST(DbTest, MissingInternalColumnFamilyIsRefusedNotRecreated) {
  TempDir dir;
  CreateWalbusDatabase(dir.path());
  {
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.path(), &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir.path(), cfs, &handles, &raw).ok());
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == "walbus.retries") {
        ASSERT_TRUE(raw->DropColumnFamily(handles[i]).ok());
      }
    }
    for (auto* h : handles) raw->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    delete raw;
  }
  Status s = OpenBus(dir.path());
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("walbus.retries"), std::string::npos) << s.ToString();
  EXPECT_TRUE(OpenBus(dir.path()).IsCorruption()) << "still refused: nothing was recreated";
}

TEST(DbTest, NewerOnDiskFormatIsRefused) {
  TempDir dir;
  CreateWalbusDatabase(dir.path());
  {
    OpenOptions so;
    so.dir = dir.path();
    std::unique_ptr<Db> db;
    ASSERT_TRUE(Db::Open(so, &db).ok());
    Batch b;
    std::string v;
    PutBe32(&v, kFormatVersion + 98);
    b.Put(db->cf(Cf::kMeta), kMetaFormatVersion, v);
    ASSERT_TRUE(b.Commit(db.get(), true).ok());
  }
  Status s = OpenBus(dir.path());
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
  EXPECT_NE(s.message().find("format " + std::to_string(kFormatVersion + 98)), std::string::npos) << s.ToString();
}

// A database keeps the format it was created with: its inbox keys keep
// their layout under a build that writes a newer one.
// Unless it is upgraded (format_upgrade_test.cc).
TEST(DbTest, DatabaseKeepsTheInboxLayoutOfItsFormat) {
  for (const auto& [format, layout] :
       {std::pair{1u, InboxLayout::kSubscriberFirst}, std::pair{kFormatVersion, InboxLayout::kEventFirst}}) {
    TempDir dir;
    CreateDatabaseOfFormat(dir.path(), format);
    for (int open = 0; open < 2; ++open) {
      OpenOptions so;
      so.dir = dir.path();
      so.upgrade_format = false;
      std::unique_ptr<Db> db;
      ASSERT_TRUE(Db::Open(so, &db).ok());
      EXPECT_EQ(db->inbox_layout(), layout) << "format " << format << ", open " << open;
    }
  }
  TempDir fresh;
  OpenOptions so;
  so.dir = fresh.path();
  std::unique_ptr<Db> db;
  ASSERT_TRUE(Db::Open(so, &db).ok());
  EXPECT_EQ(db->inbox_layout(), InboxLayout::kEventFirst) << "a new database takes this build's format";
}

TEST(DbTest, FormatZeroIsRefusedAsDamage) {
  TempDir dir;
  CreateDatabaseOfFormat(dir.path(), 0);
  OpenOptions so;
  so.dir = dir.path();
  std::unique_ptr<Db> db;
  Status s = Db::Open(so, &db);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

TEST(DbTest, DamagedFilesAreReportedNotCrashedOn) {
  for (const char* victim : {"CURRENT", "MANIFEST"}) {
    TempDir dir;
    CreateWalbusDatabase(dir.path());
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(victim, 0) != 0) continue;
      const auto size = fs::file_size(entry.path());
      fs::resize_file(entry.path(), size / 2);  // truncated mid-record
    }
    Status s = OpenBus(dir.path());
    EXPECT_FALSE(s.ok()) << victim;
    EXPECT_FALSE(s.message().empty()) << victim;
  }
}

TEST(DbTest, AFileWhereTheDirectoryShouldBeIsRefused) {
  TempDir dir;
  fs::create_directories(dir.root());
  std::ofstream(dir.path()) << "not a directory";
  Status s = OpenBus(dir.path());
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s.ToString();
}

TEST(DbTest, ApplicationColumnFamilyNamesAreChecked) {
  TempDir dir;
  for (const char* bad : {"default", "walbus.outbox", ""}) {
    Options o;
    o.dir = dir.path();
    o.column_families = {bad};
    std::unique_ptr<Bus> bus;
    EXPECT_TRUE(Bus::Open(o, &bus).IsInvalidArgument()) << bad;
  }
}

// Runs `check` in a child process without the rights of root (which
// ignores file permissions), as user and group nobody when run as root.
// Returns the child's exit code: 0 when `check` returned true.
int RunUnprivileged(const std::function<bool()>& check) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    constexpr uid_t kNobody = 65534;
    if (::geteuid() == 0 && (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)) ::_exit(3);
    // An exception must not unwind the child into the test runner: it
    // would run the remaining tests as nobody.
    try {
      ::_exit(check() ? 0 : 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "the unprivileged check threw: %s\n", e.what());
      ::_exit(4);
    }
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// The outbox, the dead letters and the quarantine hold every payload: a
// new database is the owner's alone (0700; 0750 for a group that asks),
// another user cannot read a byte of it, and an existing one open to
// others is warned about.
TEST(DbTest, ANewDatabaseIsPrivate) {
  TempDir dir;
  fs::permissions(dir.root(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  const auto mode = [](const std::string& path) { return fs::status(path).permissions() & fs::perms::all; };
  Options o = testing::TestOptions(dir);
  o.logger = nullptr;
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
    Transaction tx = bus->Begin();
    EventSpec e;
    e.type = "orders.order-placed.v1";
    e.subject = "order-1";
    e.data = "card 4111-1111";
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(mode(dir.path()), fs::perms::owner_all);
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    ++files;
    const fs::perms expected =
        entry.is_directory() ? fs::perms::owner_all : fs::perms::owner_read | fs::perms::owner_write;
    EXPECT_EQ(mode(entry.path().string()), expected) << entry.path() << " (the umask would give 0644)";
  }
  EXPECT_GE(files, 5u) << "CURRENT, IDENTITY, LOCK, LOG, MANIFEST, OPTIONS, the WAL";
  const std::string path = dir.path();
  const int code = RunUnprivileged([&] {
    std::error_code ec;
    fs::directory_iterator it(path, ec);  // not even the names of its files
    if (!ec) return false;
    for (const char* file : {"CURRENT", "IDENTITY", "LOCK"}) {
      if (std::ifstream(path + "/" + file).good()) return false;
    }
    return true;
  });
  EXPECT_EQ(code, 0) << "another user read the database directory";

  const std::string shared = dir.root() + "/shared-bus";
  Options g = o;
  g.dir = shared;
  g.share_with_group = true;
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(g, &bus).ok());
  }
  EXPECT_EQ(mode(shared), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  for (const auto& entry : fs::directory_iterator(shared)) {
    if (entry.is_directory()) continue;
    EXPECT_EQ(mode(entry.path().string()), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read)
        << entry.path();
  }

  // An existing directory open to others: opened, with a warning.
  fs::permissions(path, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  auto log = std::make_shared<testing::CapturingLogger>();
  o.logger = log;
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
  }
  EXPECT_NE(log->text().find("warning walbus: "), std::string::npos) << log->text();
  EXPECT_NE(log->text().find("lets other users in"), std::string::npos) << log->text();
}

TEST(DbTest, ReadOnlyDirectoryIsRefusedWithAClearMessage) {
  TempDir dir;
  CreateWalbusDatabase(dir.path());
  const fs::path parent = fs::path(dir.path()).parent_path();
  // Readable by anyone, writable by nobody.
  fs::permissions(parent, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                  fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    fs::permissions(entry.path(), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  }
  const std::string existing = dir.path();
  const std::string missing = (fs::path(dir.path()) / "new-bus").string();
  const int code = RunUnprivileged([&] {
    Status s = OpenBus(existing);
    bool ok = s.IsIOError() && s.message().find("is not writable") != std::string::npos &&
              s.message().find(existing) != std::string::npos;
    if (!ok) std::fprintf(stderr, "existing: %s\n", s.ToString().c_str());
    Status t = OpenBus(missing);
    const bool ok_missing = t.IsIOError() && t.message().find("cannot create " + missing) != std::string::npos;
    if (!ok_missing) std::fprintf(stderr, "missing: %s\n", t.ToString().c_str());
    std::error_code ec;
    return ok && ok_missing && !fs::exists(missing, ec);
  });
  // Give the files back to the owner so that the directory can be removed.
  fs::permissions(dir.path(), fs::perms::owner_all, fs::perm_options::add);
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    fs::permissions(entry.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  EXPECT_EQ(code, 0) << "the child's findings are on stderr";
  EXPECT_TRUE(OpenBus(existing).ok()) << "nothing was changed: it opens once writable again";
}

TEST(DbTest, CreationCutShortIsCompletedOnTheNextOpen) {
  TempDir dir;
  {
    // What a kill during the first Open leaves: some column families, no
    // format version yet.
    rocksdb::DBOptions o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {"walbus.meta", {}}, {"walbus.outbox", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir.path(), cfs, &handles, &raw).ok());
    for (auto* h : handles) raw->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    delete raw;
  }
  Status s = OpenBus(dir.path());
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(OpenBus(dir.path()).ok());
}

// A process killed earlier in its first Open (found by the bridge's crash
// tests): before RocksDB wrote CURRENT, or before any walbus column family
// existed. The marker walbus writes first tells such a directory from one
// that is not a walbus database, and the next Open finishes the creation.
TEST(DbTest, CreationKilledBeforeItsColumnFamiliesIsFinished) {
  auto leave_marker = [](const std::string& d) {
    fs::create_directories(d);
    std::ofstream(fs::path(d) / "WALBUS-CREATING").put('\n');
  };
  TempDir before_current;
  leave_marker(before_current.path());
  std::ofstream(fs::path(before_current.path()) / "LOCK").put('\n');
  std::ofstream(fs::path(before_current.path()) / "IDENTITY") << "a-rocksdb-identity";
  Status s = OpenBus(before_current.path());
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(fs::exists(fs::path(before_current.path()) / "WALBUS-CREATING")) << "gone once created";
  EXPECT_TRUE(OpenBus(before_current.path()).ok());

  TempDir default_only;
  leave_marker(default_only.path());
  {
    rocksdb::Options ro;
    ro.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(ro, default_only.path(), &raw).ok());
    delete raw;
  }
  s = OpenBus(default_only.path());
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(OpenBus(default_only.path()).ok());
}

// What RocksDB stored of its options for the database in `dir` (its
// OPTIONS file).
void LoadStoredOptions(const std::string& dir, rocksdb::DBOptions* db_options,
                       std::vector<rocksdb::ColumnFamilyDescriptor>* cfs) {
  rocksdb::ConfigOptions config;
  config.ignore_unknown_options = true;
  ASSERT_TRUE(rocksdb::LoadLatestOptions(config, dir, db_options, cfs).ok());
}

// RocksDB's info LOG grows without bound by default: it rolls only at an
// open and keeps 1000 old files. A device running for months must not fill
// its card with it: each file is bounded in size and old ones in number.
TEST(DbTest, RocksDbInfoLogIsBoundedInSizeAndCount) {
  TempDir dir;
  for (int open = 0; open < 10; ++open) ASSERT_TRUE(OpenBus(dir.path()).ok());
  int logs = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    if (entry.path().filename().string().rfind("LOG", 0) == 0) ++logs;
  }
  EXPECT_LE(logs, 5) << "the current LOG and at most four old ones, after ten opens";

  rocksdb::DBOptions stored;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  ASSERT_NO_FATAL_FAILURE(LoadStoredOptions(dir.path(), &stored, &cfs));
  EXPECT_GT(stored.max_log_file_size, 0u) << "0 is RocksDB's 'never roll while open'";
  EXPECT_LE(stored.max_log_file_size, size_t{1} << 20);
  EXPECT_LE(stored.keep_log_file_num, 4u);
}

// Storage on `dir` within `bound` bytes of memory; null (the test failed)
// when it does not open.
std::unique_ptr<Db> OpenWithin(const TempDir& dir, size_t bound, bool upgrade_format = true) {
  OpenOptions so;
  so.dir = dir.path();
  so.memory_bytes = bound;
  so.upgrade_format = upgrade_format;
  std::unique_ptr<Db> db;
  Status s = Db::Open(so, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

uint64_t IntProperty(Db& db, CfHandle* cf, const std::string& name) {
  uint64_t value = 0;
  EXPECT_TRUE(db.raw()->GetIntProperty(cf, name, &value)) << name;
  return value;
}

uint64_t MemtableBytes(Db& db) {
  uint64_t sum = 0;
  for (size_t c = 0; c < static_cast<size_t>(Cf::kCount); ++c) {
    if (db.cf(static_cast<Cf>(c)) != nullptr)
      sum += IntProperty(db, db.cf(static_cast<Cf>(c)), "rocksdb.size-all-mem-tables");
  }
  return sum;
}

// 32 MiB through an 8 MiB bound as fast as it goes: the memtables of every
// column family stay within their 3/4 of it, charged to the one cache.
TEST(DbTest, MemoryStaysWithinOneCacheWithTheMemtablesChargedToIt) {
  constexpr size_t kBound = size_t{8} << 20;
  TempDir dir;
  std::unique_ptr<Db> db = OpenWithin(dir, kBound);
  ASSERT_NE(db, nullptr);
  const std::string value(1024, 'v');
  uint64_t peak = 0;
  for (uint64_t seq = 1; seq <= 32 * 1024; ++seq) {
    Batch b;
    b.Put(db->cf(seq % 2 == 0 ? Cf::kOutbox : Cf::kInbox), OutboxKey(seq), value);
    ASSERT_TRUE(b.Commit(db.get(), false).ok());
    if (seq % 256 == 0) peak = std::max(peak, MemtableBytes(*db));
  }
  // Writers stall past 3/4 of it until a flush frees room; what passes it
  // is the write under way and the memtables' last arena blocks.
  EXPECT_LE(peak, kBound / 4 * 3 + (size_t{1} << 20));
  EXPECT_GT(peak, kBound / 8) << "the memtables were used";
  for (Cf c : {Cf::kOutbox, Cf::kInbox, Cf::kMeta}) {
    EXPECT_EQ(IntProperty(*db, db->cf(c), "rocksdb.block-cache-capacity"), kBound) << "one cache for all";
  }
  EXPECT_GE(IntProperty(*db, db->cf(Cf::kMeta), "rocksdb.block-cache-usage"), MemtableBytes(*db) / 2)
      << "the memtables are charged to the cache";
}

// A compaction builds each output table's index and filter in memory,
// outside the cache: tables are at most half of the bound (64 MiB at most),
// in every column family.
TEST(DbTest, CompactionOutputTablesAreSizedFromTheMemoryBound) {
  for (const size_t bound : {size_t{8} << 20, size_t{512} << 20}) {
    TempDir dir;
    ASSERT_NE(OpenWithin(dir, bound), nullptr);  // and closed
    rocksdb::DBOptions stored;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    ASSERT_NO_FATAL_FAILURE(LoadStoredOptions(dir.path(), &stored, &cfs));
    ASSERT_GE(cfs.size(), static_cast<size_t>(Cf::kCount));  // and "default"
    for (const auto& cf : cfs) {
      EXPECT_EQ(cf.options.target_file_size_base, std::min<uint64_t>(uint64_t{64} << 20, bound / 2))
          << cf.name << " within " << (bound >> 20) << " MiB";
      // Fewer rewrites of level 1 per byte flushed (storage/db.cc).
      EXPECT_EQ(cf.options.level0_file_num_compaction_trigger, 8) << cf.name;
    }
  }
}

// Whether the system drops pages given back with madvise: qemu-user (the
// cross builds' tests) ignores the call, a Linux kernel honours it.
bool GivenBackPagesAreDropped() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  static_cast<volatile char*>(p)[0] = 1;
  const bool dropped = madvise(p, page, MADV_DONTNEED) == 0 && static_cast<volatile char*>(p)[0] == 0;
  munmap(p, page);
  return dropped;
}

// glibc keeps memory freed in the middle of its heap for reuse; a storage
// flush (or compaction) gives it back to the system as it starts.
TEST(DbTest, FreedHeapMemoryGoesBackToTheSystemWhenStorageFlushes) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "other allocators give freed memory back themselves";
#endif
  if (testing::kSanitizedBuild) GTEST_SKIP() << "a sanitizer's allocator, not glibc's, serves this build";
  if (!GivenBackPagesAreDropped()) GTEST_SKIP() << "pages given back stay resident here (emulation)";
  TempDir dir;
  std::unique_ptr<Db> db = OpenWithin(dir, size_t{8} << 20);
  ASSERT_NE(db, nullptr);
  // 32 MiB in blocks below glibc's mmap threshold, every page touched;
  // then every other block freed: 16 MiB of holes that free() itself
  // cannot give back, as blocks still in use lie between them.
  constexpr size_t kBlock = size_t{64} << 10;
  std::vector<std::unique_ptr<char[]>> blocks(512);
  for (auto& block : blocks) {
    block.reset(new char[kBlock]);
    for (size_t i = 0; i < kBlock; i += 4096) static_cast<volatile char*>(block.get())[i] = 1;
  }
  for (size_t i = 0; i < blocks.size(); i += 2) blocks[i].reset();
  const double before = tools::AnonymousResidentMiB();
  Batch b;
  b.Put(db->cf(Cf::kOutbox), OutboxKey(1), "v");
  ASSERT_TRUE(b.Commit(db.get(), false).ok());
  ASSERT_TRUE(db->Compact(Cf::kOutbox).ok());  // a flush, then a compaction
  const double after = tools::AnonymousResidentMiB();
  EXPECT_LE(after + 8, before) << "of 16 MiB of holes, " << before - after << " MiB went back";
}

// Bytes RocksDB's compactions and flushes of one column family wrote, from
// its "rocksdb.cfstats" map (GB, as doubles).
double CfStatGB(Db& db, CfHandle* cf, const std::string& key) {
  std::map<std::string, std::string> stats;
  EXPECT_TRUE(db.raw()->GetMapProperty(cf, "rocksdb.cfstats", &stats));
  auto it = stats.find(key);
  if (it == stats.end()) {
    ADD_FAILURE() << "no " << key << " in rocksdb.cfstats";
    return 0;
  }
  return std::stod(it->second);
}

void WaitForCompactions(Db& db, CfHandle* cf) {
  for (int i = 0; i < 3000; ++i) {
    if (IntProperty(db, cf, "rocksdb.num-running-compactions") == 0 &&
        IntProperty(db, cf, "rocksdb.compaction-pending") == 0 &&
        IntProperty(db, cf, "rocksdb.num-running-flushes") == 0)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "compactions still running after 30 s";
}

// The compactions of a long inbox history must not rewrite it again and
// again: what they write stays a small multiple of what the flushes wrote,
// however many subscribers there are. In format 2 the new records of every
// subscriber land above the whole history; in format 1 each subscriber's
// ascend in a range of their own.
class InboxCompactionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(InboxCompactionTest, CompactionsDoNotRewriteTheHistoryOfEverySubscriber) {
  TempDir dir;
  CreateDatabaseOfFormat(dir.path(), GetParam());
  std::unique_ptr<Db> db = OpenWithin(dir, size_t{8} << 20, /*upgrade_format=*/false);
  ASSERT_NE(db, nullptr);
  CfHandle* inbox = db->cf(Cf::kInbox);
  // Values that do not compress, larger than the real records' 16-20 bytes
  // so that fewer puts make a history of many tables (60 MiB).
  uint64_t noise = 0x9e3779b97f4a7c15u;
  std::string value(120, '\0');
  uint64_t event = 0;
  for (int round = 0; round < 1600; ++round) {
    Batch b;
    for (int i = 0; i < 100; ++i, ++event) {
      std::string id(16, '\0');
      for (int byte = 0; byte < 8; ++byte) id[15 - byte] = static_cast<char>(event >> (8 * byte));
      for (uint32_t subscriber = 1; subscriber <= 3; ++subscriber) {
        for (char& c : value)
          c = static_cast<char>((noise = noise * 6364136223846793005u + 1442695040888963407u) >> 56);
        b.Put(inbox, InboxKey(db->inbox_layout(), subscriber, id), value);
      }
    }
    ASSERT_TRUE(b.Commit(db.get(), false).ok());
  }
  ASSERT_TRUE(db->raw()->Flush(rocksdb::FlushOptions(), inbox).ok());
  WaitForCompactions(*db, inbox);
  const double flushed = CfStatGB(*db, inbox, "compaction.L0.WriteGB");
  const double all = CfStatGB(*db, inbox, "compaction.Sum.WriteGB");
  ASSERT_GT(flushed, 0);
  // Format 2's keys ascend across subscribers: tables only move down.
  const double bound = db->inbox_layout() == InboxLayout::kEventFirst ? 1.25 : 3.0;
  EXPECT_LE(all / flushed, bound) << "compactions wrote " << (all - flushed) * 1024 << " MiB for " << flushed * 1024
                                  << " MiB flushed";
  EXPECT_GT(CfStatGB(*db, inbox, "compaction.Sum.MovedGB"), 0) << "tables moved down a level without a rewrite";
  if (db->inbox_layout() != InboxLayout::kSubscriberFirst) return;
  // Format 1's cause: below level 0, no table holds two subscribers.
  std::vector<rocksdb::LiveFileMetaData> files;
  db->raw()->GetLiveFilesMetaData(&files);
  int tables = 0;
  for (const auto& f : files) {
    if (f.column_family_name != CfName(Cf::kInbox) || f.level == 0) continue;
    ++tables;
    EXPECT_EQ(f.smallestkey.substr(0, 4), f.largestkey.substr(0, 4)) << f.name << " at level " << f.level;
  }
  EXPECT_GE(tables, 3) << "a history of several tables";
}

INSTANTIATE_TEST_SUITE_P(Formats, InboxCompactionTest, ::testing::ValuesIn(ReadableFormats()), FormatName);

class KeepFor final : public InboxRetention {
 public:
  explicit KeepFor(std::chrono::milliseconds window) : window_(window) {}
  bool MayDrop(uint32_t, uint64_t, uint64_t) const override { return false; }
  std::chrono::milliseconds window() const override { return window_; }

 private:
  const std::chrono::milliseconds window_;
};

// Tables the inbox's compactions only move down skip its retention filter:
// each is rewritten within the window (an hour at the least), so that
// expired records still go.
TEST(DbTest, InboxTablesAreRewrittenWithinTheRetentionWindow) {
  using std::chrono::hours;
  using std::chrono::minutes;
  for (const auto& [window, seconds] : {std::pair{std::chrono::milliseconds(hours(30)), uint64_t{30 * 3600}},
                                        std::pair{std::chrono::milliseconds(minutes(5)), uint64_t{3600}}}) {
    TempDir dir;
    OpenOptions so;
    so.dir = dir.path();
    so.inbox_retention = std::make_shared<KeepFor>(window);
    {
      std::unique_ptr<Db> db;
      ASSERT_TRUE(Db::Open(so, &db).ok());
    }
    rocksdb::DBOptions stored;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    ASSERT_NO_FATAL_FAILURE(LoadStoredOptions(dir.path(), &stored, &cfs));
    bool found = false;
    for (const auto& cf : cfs) {
      if (cf.name != CfName(Cf::kInbox)) continue;
      found = true;
      EXPECT_EQ(cf.options.periodic_compaction_seconds, seconds);
      EXPECT_NE(cf.options.sst_partitioner_factory, nullptr) << "a table per subscriber below level 0";
    }
    EXPECT_TRUE(found);
  }
}

// Table files are compressed with Zstandard where RocksDB has it (a third
// or more smaller than with Snappy, its default): fewer bytes on flash.
TEST(DbTest, TableFilesAreCompressedWithZstandard) {
  const std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  if (std::find(supported.begin(), supported.end(), rocksdb::kZSTD) == supported.end()) {
    GTEST_SKIP() << "this RocksDB was built without Zstandard";
  }
  TempDir dir;
  std::unique_ptr<Db> db = OpenWithin(dir, size_t{8} << 20);
  ASSERT_NE(db, nullptr);
  for (const Cf c : {Cf::kOutbox, Cf::kInbox}) {
    Batch b;
    for (uint64_t seq = 1; seq <= 1000; ++seq) b.Put(db->cf(c), OutboxKey(seq), "a value that compresses well");
    ASSERT_TRUE(b.Commit(db.get(), false).ok());
    ASSERT_TRUE(db->raw()->Flush(rocksdb::FlushOptions(), db->cf(c)).ok());
    rocksdb::TablePropertiesCollection tables;
    ASSERT_TRUE(db->raw()->GetPropertiesOfAllTables(db->cf(c), &tables).ok());
    ASSERT_FALSE(tables.empty());
    for (const auto& [file, props] : tables) EXPECT_EQ(props->compression_name, "ZSTD") << file;
  }
}

// Db::written() splits what storage wrote by where it went: the log takes
// each committed batch, a flush its table file, a compaction its output.
TEST(DbTest, WrittenCountsTheLogAndTheTableFilesOfFlushesAndCompactions) {
  TempDir dir;
  std::unique_ptr<Db> db = OpenWithin(dir, size_t{8} << 20);
  ASSERT_NE(db, nullptr);
  CfHandle* outbox = db->cf(Cf::kOutbox);
  const Db::Written at_open = db->written();
  uint64_t batch_bytes = 0;
  for (const char version : {'a', 'b'}) {  // the same keys twice: a compaction merges the tables
    Batch b;
    for (uint64_t seq = 1; seq <= 2000; ++seq) b.Put(outbox, OutboxKey(seq), std::string(100, version));
    batch_bytes += b.bytes();
    ASSERT_TRUE(b.Commit(db.get(), false).ok());
    ASSERT_TRUE(db->raw()->Flush(rocksdb::FlushOptions(), outbox).ok());
  }
  const Db::Written flushed = db->written();
  EXPECT_EQ(flushed.log_bytes - at_open.log_bytes, batch_bytes);
  EXPECT_EQ(flushed.flush_bytes - at_open.flush_bytes, IntProperty(*db, outbox, "rocksdb.live-sst-files-size"))
      << "the two tables the flushes made";
  EXPECT_EQ(flushed.compaction_bytes, at_open.compaction_bytes);

  ASSERT_TRUE(db->raw()->CompactRange(rocksdb::CompactRangeOptions(), outbox, nullptr, nullptr).ok());
  const Db::Written compacted = db->written();
  EXPECT_EQ(compacted.compaction_bytes - flushed.compaction_bytes,
            IntProperty(*db, outbox, "rocksdb.live-sst-files-size"))
      << "the table the compaction made of the two";
  EXPECT_EQ(compacted.log_bytes, flushed.log_bytes);
}

// Writes outbox entries [first, last] of 1 KiB each that do not compress.
void WriteOutbox(Db& db, uint64_t first, uint64_t last) {
  Batch b;
  for (uint64_t seq = first; seq <= last; ++seq) {
    b.Put(db.cf(Cf::kOutbox), OutboxKey(seq), walbus::testing::IncompressibleBytes(seq));
  }
  ASSERT_TRUE(b.Commit(&db, false).ok());
}

// The trim as the dispatcher writes it: the point alone, unsynced.
void TrimOutbox(Db& db, uint64_t below) {
  std::string v;
  PutBe64(&v, below);
  Batch b;
  b.Put(db.cf(Cf::kMeta), kMetaTrimmedBelow, v);
  ASSERT_TRUE(b.Commit(&db, false).ok());
  db.NoteOutboxTrimmed(below);
}

// The outbox's first key as RocksDB holds it, below every floor: 0 when
// it holds none.
uint64_t FirstStoredOutboxSeq(Db& db) {
  std::unique_ptr<rocksdb::Iterator> it(db.raw()->NewIterator(rocksdb::ReadOptions(), db.cf(Cf::kOutbox)));
  it->SeekToFirst();
  uint64_t seq = 0;
  if (it->Valid()) {
    EXPECT_TRUE(ParseOutboxKey(std::string_view(it->key().data(), it->key().size()), &seq));
  }
  return seq;
}

// A trim writes no range deletion: reads stop seeing what it trimmed at
// once, compactions drop it only once a sync made the trim durable (a
// power cut before could take the trim back), and a reopened database
// hides it again from the trim point it holds.
TEST(DbTest, TrimmedOutboxEntriesAreHiddenAtOnceAndDroppedOnceTheTrimIsDurable) {
  TempDir dir;
  {
    std::unique_ptr<Db> db = OpenWithin(dir, size_t{8} << 20);
    ASSERT_NE(db, nullptr);
    ASSERT_NO_FATAL_FAILURE(WriteOutbox(*db, 1, 100));
    ASSERT_NO_FATAL_FAILURE(TrimOutbox(*db, 61));
    std::string value;
    bool found = true;
    ASSERT_TRUE(db->Get(db->cf(Cf::kOutbox), OutboxKey(60), &value, &found).ok());
    EXPECT_FALSE(found);
    ASSERT_TRUE(db->Get(db->cf(Cf::kOutbox), OutboxKey(61), &value, &found).ok());
    EXPECT_TRUE(found);
    std::vector<uint64_t> seen;
    ASSERT_TRUE(db->ScanOutbox(0, SIZE_MAX, [&](uint64_t seq, std::string_view) {
                    seen.push_back(seq);
                    return true;
                  }).ok());
    ASSERT_EQ(seen.size(), 40u);
    EXPECT_EQ(seen.front(), 61u);
    EXPECT_EQ(db->outbox_floor(), 61u);

    ASSERT_TRUE(db->Compact(Cf::kOutbox).ok());
    EXPECT_EQ(FirstStoredOutboxSeq(*db), 1u) << "dropped before the trim was durable";
    ASSERT_TRUE(db->SyncLog().ok());
    EXPECT_EQ(db->outbox_durable_floor(), 61u);
    ASSERT_TRUE(db->Compact(Cf::kOutbox).ok());
    EXPECT_EQ(FirstStoredOutboxSeq(*db), 61u);

    ASSERT_NO_FATAL_FAILURE(TrimOutbox(*db, 101));  // all of it
    uint64_t last = 1;
    ASSERT_TRUE(db->LastOutboxSeq(&last).ok());
    EXPECT_EQ(last, 0u) << "an outbox trimmed whole reads as empty";
  }
  std::unique_ptr<Db> db = OpenWithin(dir, size_t{8} << 20);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->outbox_floor(), 101u);
  EXPECT_EQ(db->outbox_durable_floor(), 101u) << "what the database holds is durable";
  EXPECT_EQ(FirstStoredOutboxSeq(*db), 61u);
  bool empty = true;
  ASSERT_TRUE(db->ScanOutbox(0, SIZE_MAX, [&](uint64_t, std::string_view) { return empty = false; }).ok());
  EXPECT_TRUE(empty);
}

// After days offline the outbox is a long run of tables; a drain trims
// them oldest first. The tables wholly below a durable trim are deleted
// without a compaction: nothing is rewritten, and the space is back at
// once.
TEST(DbTest, TrimmedOutboxTablesAreDeletedWithoutACompaction) {
  TempDir dir;
  std::unique_ptr<Db> db = OpenWithin(dir, size_t{8} << 20);  // tables of 4 MiB
  ASSERT_NE(db, nullptr);
  CfHandle* outbox = db->cf(Cf::kOutbox);
  for (uint64_t first = 1; first <= 12000; first += 1000) ASSERT_NO_FATAL_FAILURE(WriteOutbox(*db, first, first + 999));
  ASSERT_TRUE(db->Compact(Cf::kOutbox).ok());  // into level 1, as a long backlog is
  const uint64_t before = IntProperty(*db, outbox, "rocksdb.live-sst-files-size");
  rocksdb::ColumnFamilyMetaData tables;
  db->raw()->GetColumnFamilyMetaData(outbox, &tables);
  ASSERT_EQ(tables.levels.at(0).files.size(), 0u);
  ASSERT_GE(tables.file_count, 3u);
  const Db::Written written_before = db->written();

  ASSERT_NO_FATAL_FAILURE(TrimOutbox(*db, 9001));
  ASSERT_TRUE(db->DropOutboxFilesBelowFloor().ok());
  EXPECT_EQ(IntProperty(*db, outbox, "rocksdb.live-sst-files-size"), before) << "the trim is not durable yet";
  ASSERT_TRUE(db->SyncLog().ok());
  ASSERT_TRUE(db->DropOutboxFilesBelowFloor().ok());
  const uint64_t after = IntProperty(*db, outbox, "rocksdb.live-sst-files-size");
  EXPECT_LE(after, before / 2) << "of " << before << " bytes";
  EXPECT_EQ(db->written().compaction_bytes, written_before.compaction_bytes);
  uint64_t kept = 0;
  ASSERT_TRUE(db->ScanOutbox(0, SIZE_MAX, [&](uint64_t, std::string_view) { return ++kept, true; }).ok());
  EXPECT_EQ(kept, 3000u);
}

TEST(DbTest, AMemoryBoundBelowTheSmallestIsRefused) {
  TempDir dir;
  OpenOptions so;
  so.dir = dir.path();
  so.memory_bytes = kMinMemoryBytes - 1;
  std::unique_ptr<Db> db;
  Status s = Db::Open(so, &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "CURRENT")) << "nothing was created";
}

}  // namespace
}  // namespace walbus::storage
