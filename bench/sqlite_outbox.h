// The SQLite baseline: the transactional outbox as an application would
// build it on SQLite in WAL mode, done well.
//
//   publish: BEGIN IMMEDIATE; a domain row; an outbox row; COMMIT.
//   relay (one per subscriber): read outbox rows past its cursor in a
//     batch, then in one transaction per batch an inbox row per event (the
//     exactly-once guard), its effect when the inbox row is new, and the
//     batch's outbox rows marked with the subscriber's bit.
//
// Done well means: prepared statements reused per connection; one
// connection per thread; synchronous=NORMAL for the buffered comparison and
// FULL for the synced one (NORMAL in WAL mode syncs only at checkpoints,
// the same crash-but-not-power-loss promise as walbus's kBuffered); a
// 64 MiB page cache; and writers serialized by a mutex in the process.
// SQLite admits one writer at a time anyway, and waiting on a mutex beats
// its busy handler, which sleeps 1, 2, 5, 10... ms between retries.
#ifndef WALBUS_BENCH_SQLITE_OUTBOX_H_
#define WALBUS_BENCH_SQLITE_OUTBOX_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace bench {

enum class SqliteSync { kNormal, kFull };
std::string SqliteSyncName(SqliteSync s);

struct OutboxRow {
  int64_t seq = 0;
  std::string id;
  std::string subject;
  std::string data;
};

class SqliteOutbox {
 public:
  class Connection;

  // Creates the database file and its schema. Null and *error on failure.
  static std::unique_ptr<SqliteOutbox> Create(const std::string& path, SqliteSync sync, std::string* error);
  ~SqliteOutbox();

  // A connection for one thread. Null and *error on failure.
  std::unique_ptr<Connection> Connect(std::string* error);

  // The newest committed outbox seq, and a wait for a newer one (relays
  // sleep on it instead of polling the table).
  int64_t last_seq() const { return last_seq_.load(std::memory_order_acquire); }
  void WaitForSeqAbove(int64_t seq, std::chrono::microseconds timeout);

 private:
  friend class Connection;
  SqliteOutbox(std::string path, SqliteSync sync) : path_(std::move(path)), sync_(sync) {}
  // A handle with the pragmas set; null and *error on failure.
  sqlite3* OpenHandle(std::string* error);
  void Published(int64_t seq);

  const std::string path_;
  const SqliteSync sync_;
  std::mutex write_mu_;  // held from BEGIN IMMEDIATE to COMMIT
  std::atomic<int64_t> last_seq_{0};
  std::mutex published_mu_;
  std::condition_variable published_cv_;
};

class SqliteOutbox::Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One transaction: a domain row (DomainValue) and an outbox row with a
  // fresh 16-byte event id. Returns an error message, empty on success.
  std::string Publish(const std::string& domain_key, const std::string& subject, const std::string& data);

  // Appends up to `limit` outbox rows with seq > after, in seq order.
  std::string ReadAfter(int64_t after, size_t limit, std::vector<OutboxRow>* rows);

  // One transaction for a batch of one subscriber (0..62): per row an inbox
  // row and, when that row is new, an effect; then the rows' mark.
  std::string Apply(int subscriber, const std::vector<OutboxRow>& rows);

  // Deletes the outbox rows up to `seq` (every relay has passed them).
  std::string DeleteThrough(int64_t seq);

 private:
  friend class SqliteOutbox;
  Connection(SqliteOutbox* owner, sqlite3* db) : owner_(owner), db_(db) {}
  std::string Prepare();
  std::string Fail(const char* what);

  SqliteOutbox* const owner_;
  sqlite3* db_;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* rollback_ = nullptr;
  sqlite3_stmt* put_domain_ = nullptr;
  sqlite3_stmt* put_outbox_ = nullptr;
  sqlite3_stmt* read_outbox_ = nullptr;
  sqlite3_stmt* put_inbox_ = nullptr;
  sqlite3_stmt* put_effect_ = nullptr;
  sqlite3_stmt* mark_outbox_ = nullptr;
  sqlite3_stmt* delete_outbox_ = nullptr;
};

}  // namespace bench

#endif  // WALBUS_BENCH_SQLITE_OUTBOX_H_
