// Helpers shared by the tests: temporary directories and small waits.
#ifndef WALBUS_TESTS_TEST_UTIL_H_
#define WALBUS_TESTS_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "storage/db.h"
#include "walbus/bus.h"
#include "walbus/clock.h"

namespace walbus::testing {

// Whether a sanitizer's runtime serves this build (GCC names it with
// __SANITIZE_*__, clang 14 only through __has_feature): its allocator, not
// glibc's, serves memory and holds freed memory in quarantine, and shadow
// memory adds to the resident set.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// A fresh directory under $TMPDIR, removed with everything in it on
// destruction. path() itself does not exist yet: it is where a database
// goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return db_; }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  std::string db_;
};

// The public ManualClock (walbus/clock.h), as tests named it before.
using walbus::ManualClock;

// A Logger that keeps every line ("<level> <line>\n"), from `level` up.
class CapturingLogger final : public Logger {
 public:
  explicit CapturingLogger(LogLevel level = LogLevel::kDebug) : level_(level) {}
  LogLevel level() const override { return level_; }
  void Log(LogLevel level, std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_ += std::string(LogLevelName(level)) + " " + std::string(line) + "\n";
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  const LogLevel level_;
  mutable std::mutex mu_;
  std::string text_;
};

// Opens a bus, failing the test (and returning null) when it cannot.
std::unique_ptr<Bus> OpenBus(const Options& options);

// Options most tests share: a bus in `dir`, column families "orders" and
// "effects", checkpoints every 5 ms.
Options TestOptions(const TempDir& dir, Durability durability = Durability::kBuffered);

// Creates an empty walbus database in `dir` with the on-disk format
// `format_version` (storage/db.h), as a build of that format left it, so
// that a test can run today's code on a database an older build created.
// Fails the test when it cannot.
void CreateDatabaseOfFormat(const std::string& dir, uint32_t format_version);

// Rewrites the inbox of the (closed) format 2 database in `dir` as format
// 1 keyed it, and marks it format 1: what an older build would have left
// after handling the same events. Fails the test when it cannot.
void RewriteInboxInFormat1(const std::string& dir);

// The on-disk formats today's code reads, oldest first, and their names
// in test names: for suites run on each,
//   INSTANTIATE_TEST_SUITE_P(Formats, Suite, ::testing::ValuesIn(ReadableFormats()), FormatName);
std::vector<uint32_t> ReadableFormats();
std::string FormatName(const ::testing::TestParamInfo<uint32_t>& info);

// An event made by another system, for Bus::IngestEvent: a fresh id, the
// time now.
Event IncomingEvent(std::string type, std::string subject, std::string source, std::string data = {});

// Publishes `spec` in a transaction of its own and commits it; the event's
// id (nil, and the test failed, when either was refused).
EventId PublishAlone(Bus& bus, const EventSpec& spec);
// Publishes `n` events of `type`, each alone, of subjects "order-0",
// "order-1", ... and data "x".
void PublishEach(Bus& bus, const std::string& type, int n);

// Opens the walbus database in `dir`, which no bus holds, to read its
// records directly; fails the test (and returns null) when it cannot.
std::unique_ptr<storage::Db> OpenStoppedDatabase(const std::string& dir);
// How many events `db`'s outbox keeps.
size_t OutboxSize(storage::Db& db);

// `n` bytes that storage cannot compress (as real readings rarely can),
// the same for the same seed.
std::string IncompressibleBytes(uint64_t seed, size_t n = 1024);

// The value of `series` ("name{labels}" or "name") in Prometheus text;
// -1 when it is missing.
double MetricSample(const std::string& text, const std::string& series);

// Polls `done` until it returns true or `timeout` passes.
bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_TEST_UTIL_H_
