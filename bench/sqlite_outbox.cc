#include "bench/sqlite_outbox.h"

#include <sqlite3.h>

#include <random>

#include "bench/bench_common.h"

namespace bench {
namespace {

const char* const kSchema = R"sql(
  CREATE TABLE domain (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
  CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY,
    id BLOB NOT NULL,
    type TEXT NOT NULL,
    subject TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    data BLOB NOT NULL,
    done_mask INTEGER NOT NULL DEFAULT 0);
  CREATE TABLE inbox (
    subscriber INTEGER NOT NULL,
    event_id BLOB NOT NULL,
    handled_ms INTEGER NOT NULL,
    PRIMARY KEY (subscriber, event_id)) WITHOUT ROWID;
  CREATE TABLE effects (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
)sql";

// Bound with SQLITE_STATIC: must outlive the statement's step.
const std::string kEffectValue = "1";

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string NewEventId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(16, '\0');
  for (size_t i = 0; i < 16; i += 8) {
    uint64_t v = rng();
    for (size_t b = 0; b < 8; ++b, v >>= 8) id[i + b] = static_cast<char>(v & 0xff);
  }
  return id;
}

void BindText(sqlite3_stmt* st, int i, const std::string& s) {
  sqlite3_bind_text(st, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}
void BindBlob(sqlite3_stmt* st, int i, const std::string& s) {
  sqlite3_bind_blob(st, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}
std::string ColumnBytes(sqlite3_stmt* st, int i) {
  const void* p = sqlite3_column_blob(st, i);
  return p == nullptr ? std::string()
                      : std::string(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st, i)));
}

// Runs a statement that returns no rows, and resets it.
bool StepDone(sqlite3_stmt* st) {
  const int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE;
}

}  // namespace

std::string SqliteSyncName(SqliteSync s) { return s == SqliteSync::kFull ? "full" : "normal"; }

std::unique_ptr<SqliteOutbox> SqliteOutbox::Create(const std::string& path, SqliteSync sync, std::string* error) {
  std::unique_ptr<SqliteOutbox> outbox(new SqliteOutbox(path, sync));
  sqlite3* db = outbox->OpenHandle(error);
  if (db == nullptr) return nullptr;
  char* message = nullptr;
  const bool created = sqlite3_exec(db, kSchema, nullptr, nullptr, &message) == SQLITE_OK;
  if (!created) *error = std::string("sqlite schema: ") + (message != nullptr ? message : "?");
  sqlite3_free(message);
  sqlite3_close(db);
  return created ? std::move(outbox) : nullptr;
}

SqliteOutbox::~SqliteOutbox() = default;

sqlite3* SqliteOutbox::OpenHandle(std::string* error) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path_.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    *error = std::string("sqlite open: ") + sqlite3_errmsg(db);
    sqlite3_close(db);
    return nullptr;
  }
  const std::string pragmas = std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=") +
                              (sync_ == SqliteSync::kFull ? "FULL" : "NORMAL") +
                              "; PRAGMA cache_size=-65536; PRAGMA busy_timeout=10000;";
  char* message = nullptr;
  if (sqlite3_exec(db, pragmas.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    *error = std::string("sqlite pragmas: ") + (message != nullptr ? message : "?");
    sqlite3_free(message);
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

std::unique_ptr<SqliteOutbox::Connection> SqliteOutbox::Connect(std::string* error) {
  sqlite3* db = OpenHandle(error);
  if (db == nullptr) return nullptr;
  std::unique_ptr<Connection> c(new Connection(this, db));
  if (std::string e = c->Prepare(); !e.empty()) {
    *error = e;
    return nullptr;
  }
  return c;
}

void SqliteOutbox::Published(int64_t seq) {
  int64_t seen = last_seq_.load(std::memory_order_relaxed);
  while (seen < seq && !last_seq_.compare_exchange_weak(seen, seq, std::memory_order_acq_rel)) {
  }
  std::lock_guard<std::mutex> lock(published_mu_);
  published_cv_.notify_all();
}

void SqliteOutbox::WaitForSeqAbove(int64_t seq, std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(published_mu_);
  published_cv_.wait_for(lock, timeout, [&] { return last_seq() > seq; });
}

SqliteOutbox::Connection::~Connection() {
  for (sqlite3_stmt* st : {begin_, commit_, rollback_, put_domain_, put_outbox_, read_outbox_, put_inbox_, put_effect_,
                           mark_outbox_, delete_outbox_}) {
    sqlite3_finalize(st);
  }
  sqlite3_close(db_);
}

std::string SqliteOutbox::Connection::Fail(const char* what) {
  return std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_);
}

std::string SqliteOutbox::Connection::Prepare() {
  struct {
    sqlite3_stmt** st;
    const char* sql;
  } const statements[] = {
      {&begin_, "BEGIN IMMEDIATE"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&put_domain_, "INSERT OR REPLACE INTO domain (key, value) VALUES (?1, ?2)"},
      {&put_outbox_, "INSERT INTO outbox (id, type, subject, time_ms, data) VALUES (?1, ?2, ?3, ?4, ?5)"},
      {&read_outbox_, "SELECT seq, id, subject, data FROM outbox WHERE seq > ?1 ORDER BY seq LIMIT ?2"},
      {&put_inbox_, "INSERT OR IGNORE INTO inbox (subscriber, event_id, handled_ms) VALUES (?1, ?2, ?3)"},
      {&put_effect_, "INSERT OR REPLACE INTO effects (key, value) VALUES (?1, ?2)"},
      {&mark_outbox_, "UPDATE outbox SET done_mask = done_mask | ?1 WHERE seq BETWEEN ?2 AND ?3"},
      {&delete_outbox_, "DELETE FROM outbox WHERE seq <= ?1"},
  };
  for (const auto& s : statements) {
    if (sqlite3_prepare_v3(db_, s.sql, -1, SQLITE_PREPARE_PERSISTENT, s.st, nullptr) != SQLITE_OK) {
      return Fail("prepare");
    }
  }
  return {};
}

std::string SqliteOutbox::Connection::Publish(const std::string& domain_key, const std::string& subject,
                                              const std::string& data) {
  const std::string id = NewEventId();
  const std::string type = kEventType;
  int64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(owner_->write_mu_);
    if (!StepDone(begin_)) return Fail("begin");
    BindText(put_domain_, 1, domain_key);
    BindBlob(put_domain_, 2, DomainValue());
    bool ok = StepDone(put_domain_);
    if (ok) {
      BindBlob(put_outbox_, 1, id);
      BindText(put_outbox_, 2, type);
      BindText(put_outbox_, 3, subject);
      sqlite3_bind_int64(put_outbox_, 4, NowMillis());
      BindBlob(put_outbox_, 5, data);
      ok = StepDone(put_outbox_);
      seq = sqlite3_last_insert_rowid(db_);
    }
    if (!ok || !StepDone(commit_)) {
      std::string e = Fail("publish");
      StepDone(rollback_);
      return e;
    }
  }
  owner_->Published(seq);
  return {};
}

std::string SqliteOutbox::Connection::ReadAfter(int64_t after, size_t limit, std::vector<OutboxRow>* rows) {
  sqlite3_bind_int64(read_outbox_, 1, after);
  sqlite3_bind_int64(read_outbox_, 2, static_cast<int64_t>(limit));
  int rc;
  while ((rc = sqlite3_step(read_outbox_)) == SQLITE_ROW) {
    OutboxRow& row = rows->emplace_back();
    row.seq = sqlite3_column_int64(read_outbox_, 0);
    row.id = ColumnBytes(read_outbox_, 1);
    row.subject = ColumnBytes(read_outbox_, 2);
    row.data = ColumnBytes(read_outbox_, 3);
  }
  sqlite3_reset(read_outbox_);
  return rc == SQLITE_DONE ? std::string() : Fail("read outbox");
}

std::string SqliteOutbox::Connection::Apply(int subscriber, const std::vector<OutboxRow>& rows) {
  if (rows.empty()) return {};
  const std::string prefix = "sub-" + std::to_string(subscriber) + "/";
  const int64_t now = NowMillis();
  std::lock_guard<std::mutex> lock(owner_->write_mu_);
  if (!StepDone(begin_)) return Fail("begin");
  bool ok = true;
  for (const OutboxRow& row : rows) {
    sqlite3_bind_int(put_inbox_, 1, subscriber);
    BindBlob(put_inbox_, 2, row.id);
    sqlite3_bind_int64(put_inbox_, 3, now);
    ok = StepDone(put_inbox_);
    if (!ok) break;
    if (sqlite3_changes(db_) == 0) continue;  // handled before: no effect again
    const std::string key = prefix + row.subject + "/" + std::to_string(row.seq);
    BindText(put_effect_, 1, key);
    BindBlob(put_effect_, 2, kEffectValue);
    ok = StepDone(put_effect_);
    if (!ok) break;
  }
  if (ok) {
    sqlite3_bind_int64(mark_outbox_, 1, int64_t{1} << subscriber);
    sqlite3_bind_int64(mark_outbox_, 2, rows.front().seq);
    sqlite3_bind_int64(mark_outbox_, 3, rows.back().seq);
    ok = StepDone(mark_outbox_);
  }
  if (!ok || !StepDone(commit_)) {
    std::string e = Fail("apply");
    StepDone(rollback_);
    return e;
  }
  return {};
}

std::string SqliteOutbox::Connection::DeleteThrough(int64_t seq) {
  std::lock_guard<std::mutex> lock(owner_->write_mu_);
  sqlite3_bind_int64(delete_outbox_, 1, seq);
  return StepDone(delete_outbox_) ? std::string() : Fail("delete outbox");
}

}  // namespace bench
