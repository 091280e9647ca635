#include "tests/test_util.h"

#include <stdlib.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "storage/db.h"
#include "storage/keys.h"

namespace walbus::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "walbus-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
  db_ = root_ + "/db";
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

EventId PublishAlone(Bus& bus, const EventSpec& spec) {
  Transaction tx = bus.Begin();
  auto id = tx.Publish(spec);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  auto receipt = tx.Commit();
  EXPECT_TRUE(receipt.ok()) << receipt.status().ToString();
  return id.ok() && receipt.ok() ? *id : EventId{};
}

void PublishEach(Bus& bus, const std::string& type, int n) {
  for (int i = 0; i < n; ++i) {
    EventSpec e;
    e.type = type;
    e.subject = "order-" + std::to_string(i);
    e.data = "x";
    PublishAlone(bus, e);
  }
}

Event IncomingEvent(std::string type, std::string subject, std::string source, std::string data) {
  Event e;
  e.id = EventId::Generate();
  e.type = std::move(type);
  e.subject = std::move(subject);
  e.source = std::move(source);
  e.time = std::chrono::system_clock::now();
  e.data = std::move(data);
  return e;
}

std::unique_ptr<storage::Db> OpenStoppedDatabase(const std::string& dir) {
  storage::OpenOptions so;
  so.dir = dir;
  so.create_if_missing = false;
  std::unique_ptr<storage::Db> db;
  Status s = storage::Db::Open(so, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

std::string IncompressibleBytes(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

double MetricSample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

size_t OutboxSize(storage::Db& db) {
  size_t n = 0;
  EXPECT_TRUE(db.ScanOutbox(0, SIZE_MAX, [&](uint64_t, std::string_view) { return ++n, true; }).ok());
  return n;
}

std::unique_ptr<Bus> OpenBus(const Options& options) {
  std::unique_ptr<Bus> bus;
  Status s = Bus::Open(options, &bus);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return bus;
}

Options TestOptions(const TempDir& dir, Durability durability) {
  Options o;
  o.dir = dir.path();
  o.durability = durability;
  o.column_families = {"orders", "effects"};
  o.checkpoint_interval = std::chrono::milliseconds(5);
  return o;
}

void CreateDatabaseOfFormat(const std::string& dir, uint32_t format_version) {
  storage::OpenOptions options;
  options.dir = dir;
  std::unique_ptr<storage::Db> db;
  Status opened = storage::Db::Open(options, &db);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  // Nothing but the format record is written yet: what it says decides how
  // the database's records are laid out from here on.
  std::string version;
  storage::PutBe32(&version, format_version);
  storage::Batch batch;
  batch.Put(db->cf(storage::Cf::kMeta), storage::kMetaFormatVersion, version);
  Status written = batch.Commit(db.get(), true);
  ASSERT_TRUE(written.ok()) << written.ToString();
}

void RewriteInboxInFormat1(const std::string& dir) {
  storage::OpenOptions options;
  options.dir = dir;
  std::unique_ptr<storage::Db> db;
  Status opened = storage::Db::Open(options, &db);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  ASSERT_EQ(db->inbox_layout(), storage::InboxLayout::kEventFirst);
  storage::CfHandle* inbox = db->cf(storage::Cf::kInbox);
  storage::Batch batch;
  Status scanned = db->Scan(storage::Cf::kInbox, "", SIZE_MAX, [&](std::string_view key, std::string_view value) {
    std::string format1_key;
    EXPECT_TRUE(storage::RelayInboxKey(storage::InboxLayout::kEventFirst, key, storage::InboxLayout::kSubscriberFirst,
                                       &format1_key));
    batch.Delete(inbox, key);
    batch.Put(inbox, format1_key, value);
    return true;
  });
  ASSERT_TRUE(scanned.ok()) << scanned.ToString();
  std::string version;
  storage::PutBe32(&version, 1);
  batch.Put(db->cf(storage::Cf::kMeta), storage::kMetaFormatVersion, version);
  Status written = batch.Commit(db.get(), true);
  ASSERT_TRUE(written.ok()) << written.ToString();
}

std::vector<uint32_t> ReadableFormats() {
  std::vector<uint32_t> formats;
  for (uint32_t v = 1; v <= storage::kFormatVersion; ++v) formats.push_back(v);
  return formats;
}

std::string FormatName(const ::testing::TestParamInfo<uint32_t>& info) { return "format" + std::to_string(info.param); }

bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done();
}

}  // namespace walbus::testing
