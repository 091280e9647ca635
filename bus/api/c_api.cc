// The C API (walbus/c.h) over the C++ one. Every entry point catches what
// the C++ side may throw (allocation failures, mostly) and turns it into a
// code and a message: no exception crosses into C.
#include "walbus/c.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/util/unix_time.h"

#include "walbus/bus.h"
#include "walbus/version.h"

struct walbus_t {
  std::unique_ptr<walbus::Bus> bus;
};

struct walbus_tx_t {
  explicit walbus_tx_t(walbus::Transaction t) : tx(std::move(t)) {}
  walbus::Transaction tx;
};

struct walbus_view_t {
  explicit walbus_view_t(walbus::ReadView v) : view(std::move(v)) {}
  walbus::ReadView view;
};

struct walbus_ctx_t {
  walbus::HandlerContext* ctx = nullptr;
  uint64_t retry_after_ms = 0;
  std::string reject_reason;
};

namespace {

static_assert(static_cast<int>(walbus::Status::Code::kResourceExhausted) == WALBUS_RESOURCE_EXHAUSTED);
static_assert(static_cast<int>(walbus::Status::Code::kInvalidArgument) == WALBUS_INVALID_ARGUMENT);

char* CopyString(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

walbus_code Fail(char** err, walbus_code code, std::string_view message) {
  if (err != nullptr) *err = CopyString(message);
  return code;
}

walbus_code Report(const walbus::Status& s, char** err) {
  if (s.ok()) return WALBUS_OK;
  return Fail(err, static_cast<walbus_code>(s.code()), s.ToString());
}

// Runs `body` (which returns a walbus_code) and turns an exception into one.
template <typename Body>
walbus_code Guard(char** err, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(err, WALBUS_RESOURCE_EXHAUSTED, "ResourceExhausted: out of memory");
  } catch (const std::exception& e) {
    try {
      return Fail(err, WALBUS_INTERNAL, std::string("Internal: ") + e.what());
    } catch (...) {
      return Fail(err, WALBUS_INTERNAL, "Internal");
    }
  } catch (...) {
    return Fail(err, WALBUS_INTERNAL, "Internal: unknown exception");
  }
}

std::string_view Bytes(const char* p, size_t n) { return n == 0 ? std::string_view() : std::string_view(p, n); }

// Does not allocate but for the message: safe outside Guard.
walbus_code MissingArgument(char** err, const char* what) {
  char message[128];
  std::snprintf(message, sizeof(message), "InvalidArgument: %s is NULL", what);
  return Fail(err, WALBUS_INVALID_ARGUMENT, message);
}

// Parses an event id argument; a code other than WALBUS_OK when it is none.
walbus_code ParseId(const char* id, walbus::EventId* out, char** err) {
  if (id == nullptr) return MissingArgument(err, "id");
  std::optional<walbus::EventId> parsed = walbus::EventId::Parse(id);
  if (!parsed) return Fail(err, WALBUS_INVALID_ARGUMENT, std::string("InvalidArgument: not an event id: ") + id);
  *out = *parsed;
  return WALBUS_OK;
}

walbus_code ScopePut(walbus::WriteScope* scope, const char* cf, const char* key, size_t key_len, const char* value,
                     size_t value_len, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (key == nullptr && key_len > 0) return MissingArgument(err, "key");
    if (value == nullptr && value_len > 0) return MissingArgument(err, "value");
    return Report(scope->Put(cf, Bytes(key, key_len), Bytes(value, value_len)), err);
  });
}

// Hands a value out as a malloc'd copy (NULL for none).
void GiveValue(const std::optional<std::string>& found, char** value, size_t* value_len) {
  *value = nullptr;
  if (value_len != nullptr) *value_len = 0;
  if (!found.has_value()) return;
  char* copy = CopyString(*found);
  if (copy == nullptr) throw std::bad_alloc();
  *value = copy;
  if (value_len != nullptr) *value_len = found->size();
}

// `Reader`: a WriteScope or a const ReadView, which read alike.
template <typename Reader>
walbus_code ReaderGet(Reader* reader, const char* cf, const char* key, size_t key_len, char** value, size_t* value_len,
                      char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (key == nullptr && key_len > 0) return MissingArgument(err, "key");
    if (value == nullptr) return MissingArgument(err, "value");
    walbus::Result<std::optional<std::string>> r = reader->Get(cf, Bytes(key, key_len));
    if (!r.ok()) return Report(r.status(), err);
    GiveValue(*r, value, value_len);
    return WALBUS_OK;
  });
}

template <typename Reader>
walbus_code ReaderGetWithVersion(Reader* reader, const char* cf, const char* key, size_t key_len, char** value,
                                 size_t* value_len, uint64_t* version, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (key == nullptr && key_len > 0) return MissingArgument(err, "key");
    if (value == nullptr) return MissingArgument(err, "value");
    if (version == nullptr) return MissingArgument(err, "version");
    walbus::Result<walbus::VersionedValue> r = reader->GetWithVersion(cf, Bytes(key, key_len));
    if (!r.ok()) return Report(r.status(), err);
    GiveValue(r->value, value, value_len);
    *version = r->version;
    return WALBUS_OK;
  });
}

// Scans through the C++ visitor with one row more than the limit asks:
// the extra row is not handed out, it only says that rows are left.
template <typename Reader>
walbus_code ReaderScan(Reader* reader, const char* cf, const walbus_scan_options* options, walbus_row_fn row,
                       void* user, char** resume_after, size_t* resume_after_len, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (options == nullptr) return MissingArgument(err, "options");
    if (row == nullptr) return MissingArgument(err, "row");
    if (resume_after != nullptr) *resume_after = nullptr;
    if (resume_after_len != nullptr) *resume_after_len = 0;
    walbus::ScanOptions o;
    o.start.assign(Bytes(options->start, options->start_len));
    o.end.assign(Bytes(options->end, options->end_len));
    o.prefix.assign(Bytes(options->prefix, options->prefix_len));
    o.resume_after.assign(Bytes(options->resume_after, options->resume_after_len));
    o.reverse = options->reverse != 0;
    o.limit = options->limit != 0 ? options->limit + 1 : 0;
    size_t handed = 0;
    std::string last;
    bool more = false;
    walbus::Status s = reader->Scan(cf, o, [&](std::string_view k, std::string_view v) {
      if (options->limit != 0 && handed == options->limit) {
        more = true;
        return false;
      }
      if (++handed == options->limit) last.assign(k);
      return row(user, k.data(), k.size(), v.data(), v.size()) == 0;
    });
    if (!s.ok()) return Report(s, err);
    if (more && resume_after != nullptr) {
      *resume_after = CopyString(last);
      if (*resume_after == nullptr) throw std::bad_alloc();
      if (resume_after_len != nullptr) *resume_after_len = last.size();
    }
    return WALBUS_OK;
  });
}

walbus_code ScopeDeleteRange(walbus::WriteScope* scope, const char* cf, const char* start, size_t start_len,
                             const char* end, size_t end_len, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (start == nullptr && start_len > 0) return MissingArgument(err, "start");
    if (end == nullptr && end_len > 0) return MissingArgument(err, "end");
    return Report(scope->DeleteRange(cf, Bytes(start, start_len), Bytes(end, end_len)), err);
  });
}

walbus_code ScopeClear(walbus::WriteScope* scope, const char* cf, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    return Report(scope->Clear(cf), err);
  });
}

walbus_code ScopePublish(walbus::WriteScope* scope, const char* type, const char* subject, const char* data,
                         size_t data_len, char** err) {
  return Guard(err, [&] {
    if (type == nullptr) return MissingArgument(err, "type");
    if (subject == nullptr) return MissingArgument(err, "subject");
    if (data == nullptr && data_len > 0) return MissingArgument(err, "data");
    walbus::EventSpec spec;
    spec.type = type;
    spec.subject = subject;
    spec.data.assign(Bytes(data, data_len));
    return Report(scope->Publish(spec).status(), err);
  });
}

walbus_code ScopeDelete(walbus::WriteScope* scope, const char* cf, const char* key, size_t key_len, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (key == nullptr && key_len > 0) return MissingArgument(err, "key");
    return Report(scope->Delete(cf, Bytes(key, key_len)), err);
  });
}

walbus_code ScopeGetVersion(walbus::WriteScope* scope, const char* cf, const char* key, size_t key_len,
                            uint64_t* version, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (key == nullptr && key_len > 0) return MissingArgument(err, "key");
    if (version == nullptr) return MissingArgument(err, "version");
    walbus::Result<uint64_t> r = scope->GetVersion(cf, Bytes(key, key_len));
    if (!r.ok()) return Report(r.status(), err);
    *version = *r;
    return WALBUS_OK;
  });
}

walbus_code ScopeExpectVersion(walbus::WriteScope* scope, const char* cf, const char* key, size_t key_len,
                               uint64_t version, char** err) {
  return Guard(err, [&] {
    if (cf == nullptr) return MissingArgument(err, "column_family");
    if (key == nullptr && key_len > 0) return MissingArgument(err, "key");
    return Report(scope->ExpectVersion(cf, Bytes(key, key_len), version), err);
  });
}

// When a published event falls due: at once when neither is set.
struct Due {
  std::optional<int64_t> at_unix_ms;
  std::optional<uint64_t> after_ms;
};

// Sets e's deliver_at or deliver_after from `due`; a code other than
// WALBUS_OK when the moment lies beyond what the clock can hold.
walbus_code ApplyDue(const Due& due, walbus::EventSpec* e, char** err) {
  using std::chrono::milliseconds;
  constexpr int64_t kClockMs =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::duration::max()).count();
  if (due.at_unix_ms) {
    if (*due.at_unix_ms > kClockMs || *due.at_unix_ms < -kClockMs) {
      return Fail(err, WALBUS_INVALID_ARGUMENT,
                  "InvalidArgument: deliver_at_unix_ms " + std::to_string(*due.at_unix_ms) +
                      " lies beyond the clock's range (about the years 1678 to 2262)");
    }
    e->deliver_at = walbus::internal::FromUnixMillis(*due.at_unix_ms);
  }
  if (due.after_ms) {
    if (*due.after_ms > static_cast<uint64_t>(kClockMs)) {
      return Fail(err, WALBUS_INVALID_ARGUMENT,
                  "InvalidArgument: delay_ms " + std::to_string(*due.after_ms) + " lies beyond the clock's range");
    }
    e->deliver_after = milliseconds(static_cast<int64_t>(*due.after_ms));
  }
  return WALBUS_OK;
}

walbus_code ScopePublishSpec(walbus::WriteScope* scope, const walbus_event_spec* spec, const Due& due, char* id,
                             char** err) {
  return Guard(err, [&] {
    if (spec == nullptr) return MissingArgument(err, "spec");
    if (spec->type == nullptr) return MissingArgument(err, "spec->type");
    if (spec->subject == nullptr) return MissingArgument(err, "spec->subject");
    if (spec->data == nullptr && spec->data_len > 0) return MissingArgument(err, "spec->data");
    walbus::EventSpec e;
    e.type = spec->type;
    e.subject = spec->subject;
    e.subject_version = spec->subject_version;
    e.data.assign(Bytes(spec->data, spec->data_len));
    if (spec->content_type != nullptr) e.content_type = spec->content_type;
    if (spec->source != nullptr) e.source = spec->source;
    if (spec->traceparent != nullptr) e.traceparent = spec->traceparent;
    if (walbus_code code = ApplyDue(due, &e, err); code != WALBUS_OK) return code;
    walbus::Result<walbus::EventId> r = scope->Publish(e);
    if (!r.ok()) return Report(r.status(), err);
    if (id != nullptr) std::snprintf(id, 37, "%s", r->ToString().c_str());
    return WALBUS_OK;
  });
}

walbus_code ScopeCancelScheduled(walbus::WriteScope* scope, const char* id, char** err) {
  return Guard(err, [&] {
    walbus::EventId parsed;
    if (walbus_code code = ParseId(id, &parsed, err); code != WALBUS_OK) return code;
    return Report(scope->CancelScheduled(parsed), err);
  });
}

walbus_code ScopeGetScheduled(walbus::WriteScope* scope, const char* id, int* state, int64_t* at_unix_ms, char** err) {
  return Guard(err, [&] {
    if (state == nullptr) return MissingArgument(err, "state");
    walbus::EventId parsed;
    if (walbus_code code = ParseId(id, &parsed, err); code != WALBUS_OK) return code;
    walbus::Result<walbus::ScheduledStatus> status = scope->GetScheduled(parsed);
    if (!status.ok()) return Report(status.status(), err);
    static_assert(static_cast<int>(walbus::ScheduledStatus::State::kCancelled) == WALBUS_SCHEDULED_CANCELLED);
    *state = static_cast<int>(status->state);
    if (at_unix_ms != nullptr) {
      *at_unix_ms =
          status->state == walbus::ScheduledStatus::State::kUnknown ? 0 : walbus::internal::ToUnixMillis(status->at);
    }
    return WALBUS_OK;
  });
}

// States in one allocation: the array, then the strings.
walbus_delivery* CopyDeliveries(const std::vector<walbus::DeliveryState>& states) {
  size_t bytes = std::max<size_t>(1, states.size()) * sizeof(walbus_delivery);
  for (const walbus::DeliveryState& d : states) bytes += d.subscriber.size() + 1 + d.last_error.size() + 1;
  auto* out = static_cast<walbus_delivery*>(std::malloc(bytes));
  if (out == nullptr) throw std::bad_alloc();
  char* text = reinterpret_cast<char*>(out + std::max<size_t>(1, states.size()));
  const auto copy = [&text](const std::string& s) {
    char* at = text;
    std::memcpy(text, s.c_str(), s.size() + 1);
    text += s.size() + 1;
    return at;
  };
  for (size_t i = 0; i < states.size(); ++i) {
    const walbus::DeliveryState& d = states[i];
    walbus_delivery& c = out[i];
    c = walbus_delivery{};
    c.subscriber = copy(d.subscriber);
    std::snprintf(c.id, sizeof c.id, "%s", d.id.ToString().c_str());
    c.seq = d.seq;
    c.state = static_cast<int>(d.state);
    c.attempts = d.attempts;
    c.last_error = copy(d.last_error);
    c.next_attempt_unix_ms = d.next_attempt ? walbus::internal::ToUnixMillis(*d.next_attempt) : 0;
    c.parked_behind = d.parked_behind;
  }
  return out;
}

static_assert(static_cast<int>(walbus::Delivery::kParked) == WALBUS_DELIVERY_PARKED);
static_assert(static_cast<int>(walbus::Delivery::kRetrying) == WALBUS_DELIVERY_RETRYING);
static_assert(static_cast<int>(walbus::Delivery::kNotDelivered) == WALBUS_DELIVERY_NOT_DELIVERED);

std::string IdText(const std::optional<walbus::EventId>& id) { return id ? id->ToString() : std::string(); }

walbus::Outcome RunHandler(walbus_handler_fn handler, void* user, const walbus::Event& e,
                           walbus::HandlerContext& context) {
  const std::string id = e.id.ToString();
  const std::string correlation = IdText(e.correlation_id);
  const std::string causation = IdText(e.causation_id);
  walbus_event ev{};
  ev.seq = e.seq;
  ev.id = id.c_str();
  ev.type = e.type.c_str();
  ev.source = e.source.c_str();
  ev.subject = e.subject.c_str();
  ev.subject_version = e.subject_version;
  ev.time_unix_ms = walbus::internal::ToUnixMillis(e.time);
  ev.content_type = e.content_type.c_str();
  ev.data = e.data.c_str();
  ev.data_len = e.data.size();
  ev.correlation_id = correlation.c_str();
  ev.causation_id = causation.c_str();
  ev.traceparent = e.traceparent.c_str();
  walbus_ctx_t ctx;
  ctx.ctx = &context;
  switch (handler(user, &ev, &ctx)) {
    case WALBUS_DONE: return walbus::Outcome::Done();
    case WALBUS_REJECT:
      return walbus::Outcome::Reject(ctx.reject_reason.empty() ? "rejected by the C handler" : ctx.reject_reason);
    default:
      // A zero delay leaves it to the subscriber's backoff.
      return walbus::Outcome::RetryAfter(std::chrono::milliseconds(ctx.retry_after_ms));
  }
}

}  // namespace

extern "C" {

const char* walbus_version(void) { return WALBUS_VERSION_STRING; }

void walbus_options_init(walbus_options* options) {
  if (options == nullptr) return;
  *options = walbus_options{};
  options->create_if_missing = 1;
  options->durability = WALBUS_DURABILITY_SYNC;
}

walbus_code walbus_open(const walbus_options* options, walbus_t** bus, char** err) {
  return Guard(err, [&] {
    if (options == nullptr) return MissingArgument(err, "options");
    if (bus == nullptr) return MissingArgument(err, "bus");
    if (options->dir == nullptr) return MissingArgument(err, "options->dir");
    if (options->column_families == nullptr && options->ncolumn_families > 0) {
      return MissingArgument(err, "options->column_families");
    }
    walbus::Options opt;
    opt.dir = options->dir;
    opt.create_if_missing = options->create_if_missing != 0;
    switch (options->durability) {
      case WALBUS_DURABILITY_SYNC: opt.durability = walbus::Durability::kSync; break;
      case WALBUS_DURABILITY_BUFFERED: opt.durability = walbus::Durability::kBuffered; break;
      default: return Fail(err, WALBUS_INVALID_ARGUMENT, "InvalidArgument: unknown durability");
    }
    for (size_t i = 0; i < options->ncolumn_families; ++i) {
      if (options->column_families[i] == nullptr) return MissingArgument(err, "a column family name");
      opt.column_families.emplace_back(options->column_families[i]);
    }
    if (options->source != nullptr) opt.source = options->source;
    if (options->worker_threads != 0) opt.worker_threads = options->worker_threads;
    if (options->memory_budget != 0) opt.memory_budget = options->memory_budget;
    auto handle = std::make_unique<walbus_t>();
    if (walbus_code code = Report(walbus::Bus::Open(opt, &handle->bus), err); code != WALBUS_OK) return code;
    *bus = handle.release();
    return WALBUS_OK;
  });
}

walbus_code walbus_close(walbus_t* bus, char** err) {
  if (bus == nullptr) return WALBUS_OK;
  std::unique_ptr<walbus_t> owned(bus);
  return Guard(err, [&] { return Report(owned->bus->Close(), err); });
}

walbus_tx_t* walbus_begin(walbus_t* bus) {
  if (bus == nullptr) return nullptr;
  try {
    return new walbus_tx_t(bus->bus->Begin());
  } catch (...) {
    return nullptr;
  }
}

walbus_code walbus_tx_put(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len,
                          const char* value, size_t value_len, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopePut(&tx->tx, column_family, key, key_len, value, value_len, err);
}

walbus_code walbus_tx_get(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len, char** value,
                          size_t* value_len, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ReaderGet(&tx->tx, column_family, key, key_len, value, value_len, err);
}

walbus_code walbus_tx_publish(walbus_tx_t* tx, const char* type, const char* subject, const char* data, size_t data_len,
                              char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopePublish(&tx->tx, type, subject, data, data_len, err);
}

namespace {

// Commits and frees `tx` (walbus_tx_commit, walbus_tx_commit_sync).
walbus_code CommitTx(walbus_tx_t* tx, const walbus::CommitOptions& options, uint64_t* first_seq, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  std::unique_ptr<walbus_tx_t> owned(tx);
  return Guard(err, [&] {
    walbus::Result<walbus::Receipt> r = owned->tx.Commit(options);
    if (!r.ok()) return Report(r.status(), err);
    if (first_seq != nullptr) *first_seq = r->first_seq;
    return WALBUS_OK;
  });
}

}  // namespace

walbus_code walbus_tx_commit(walbus_tx_t* tx, uint64_t* first_seq, char** err) {
  return CommitTx(tx, walbus::CommitOptions{}, first_seq, err);
}

walbus_code walbus_tx_commit_sync(walbus_tx_t* tx, uint64_t* first_seq, char** err) {
  return CommitTx(tx, walbus::CommitOptions{.sync = true}, first_seq, err);
}

void walbus_tx_abort(walbus_tx_t* tx) { delete tx; }

walbus_code walbus_tx_delete(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopeDelete(&tx->tx, column_family, key, key_len, err);
}

walbus_code walbus_tx_get_version(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len,
                                  uint64_t* version, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopeGetVersion(&tx->tx, column_family, key, key_len, version, err);
}

walbus_code walbus_tx_expect_version(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len,
                                     uint64_t version, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopeExpectVersion(&tx->tx, column_family, key, key_len, version, err);
}

void walbus_scan_options_init(walbus_scan_options* options) {
  if (options != nullptr) *options = walbus_scan_options{};
}

walbus_code walbus_tx_scan(walbus_tx_t* tx, const char* column_family, const walbus_scan_options* options,
                           walbus_row_fn row, void* user, char** resume_after, size_t* resume_after_len, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ReaderScan(&tx->tx, column_family, options, row, user, resume_after, resume_after_len, err);
}

walbus_code walbus_ctx_scan(walbus_ctx_t* ctx, const char* column_family, const walbus_scan_options* options,
                            walbus_row_fn row, void* user, char** resume_after, size_t* resume_after_len, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ReaderScan(ctx->ctx, column_family, options, row, user, resume_after, resume_after_len, err);
}

walbus_code walbus_tx_get_with_version(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len,
                                       char** value, size_t* value_len, uint64_t* version, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ReaderGetWithVersion(&tx->tx, column_family, key, key_len, value, value_len, version, err);
}

walbus_code walbus_ctx_get_with_version(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len,
                                        char** value, size_t* value_len, uint64_t* version, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ReaderGetWithVersion(ctx->ctx, column_family, key, key_len, value, value_len, version, err);
}

walbus_code walbus_tx_delete_range(walbus_tx_t* tx, const char* column_family, const char* start, size_t start_len,
                                   const char* end, size_t end_len, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopeDeleteRange(&tx->tx, column_family, start, start_len, end, end_len, err);
}

walbus_code walbus_tx_clear(walbus_tx_t* tx, const char* column_family, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopeClear(&tx->tx, column_family, err);
}

walbus_code walbus_ctx_delete_range(walbus_ctx_t* ctx, const char* column_family, const char* start, size_t start_len,
                                    const char* end, size_t end_len, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopeDeleteRange(ctx->ctx, column_family, start, start_len, end, end_len, err);
}

walbus_code walbus_ctx_clear(walbus_ctx_t* ctx, const char* column_family, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopeClear(ctx->ctx, column_family, err);
}

int walbus_ctx_replay(const walbus_ctx_t* ctx, uint64_t* replay_id, int* fresh_scope) {
  if (ctx == nullptr) return 0;
  const std::optional<walbus::HandlerContext::ReplayRun> run = ctx->ctx->Replaying();
  if (!run.has_value()) return 0;
  if (replay_id != nullptr) *replay_id = run->replay_id;
  if (fresh_scope != nullptr) *fresh_scope = run->mode == walbus::ReplayMode::kFreshScope ? 1 : 0;
  return 1;
}

walbus_view_t* walbus_read(walbus_t* bus) {
  if (bus == nullptr) return nullptr;
  try {
    return new walbus_view_t(bus->bus->Read());
  } catch (...) {
    return nullptr;
  }
}

void walbus_free_view(walbus_view_t* view) { delete view; }

walbus_code walbus_view_get(const walbus_view_t* view, const char* column_family, const char* key, size_t key_len,
                            char** value, size_t* value_len, char** err) {
  if (view == nullptr) return MissingArgument(err, "view");
  return ReaderGet(&view->view, column_family, key, key_len, value, value_len, err);
}

walbus_code walbus_view_get_with_version(const walbus_view_t* view, const char* column_family, const char* key,
                                         size_t key_len, char** value, size_t* value_len, uint64_t* version,
                                         char** err) {
  if (view == nullptr) return MissingArgument(err, "view");
  return ReaderGetWithVersion(&view->view, column_family, key, key_len, value, value_len, version, err);
}

walbus_code walbus_view_scan(const walbus_view_t* view, const char* column_family, const walbus_scan_options* options,
                             walbus_row_fn row, void* user, char** resume_after, size_t* resume_after_len, char** err) {
  if (view == nullptr) return MissingArgument(err, "view");
  return ReaderScan(&view->view, column_family, options, row, user, resume_after, resume_after_len, err);
}

void walbus_event_spec_init(walbus_event_spec* spec) {
  if (spec != nullptr) *spec = walbus_event_spec{};
}

walbus_code walbus_tx_publish_spec(walbus_tx_t* tx, const walbus_event_spec* spec, char* id, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopePublishSpec(&tx->tx, spec, Due{}, id, err);
}

walbus_code walbus_tx_publish_at(walbus_tx_t* tx, const walbus_event_spec* spec, int64_t deliver_at_unix_ms, char* id,
                                 char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopePublishSpec(&tx->tx, spec, Due{deliver_at_unix_ms, std::nullopt}, id, err);
}

walbus_code walbus_tx_publish_after(walbus_tx_t* tx, const walbus_event_spec* spec, uint64_t delay_ms, char* id,
                                    char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopePublishSpec(&tx->tx, spec, Due{std::nullopt, delay_ms}, id, err);
}

walbus_code walbus_tx_cancel_scheduled(walbus_tx_t* tx, const char* id, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopeCancelScheduled(&tx->tx, id, err);
}

walbus_code walbus_tx_get_scheduled(walbus_tx_t* tx, const char* id, int* state, int64_t* at_unix_ms, char** err) {
  if (tx == nullptr) return MissingArgument(err, "tx");
  return ScopeGetScheduled(&tx->tx, id, state, at_unix_ms, err);
}

walbus_code walbus_ctx_delete(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len,
                              char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopeDelete(ctx->ctx, column_family, key, key_len, err);
}

walbus_code walbus_ctx_get_version(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len,
                                   uint64_t* version, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopeGetVersion(ctx->ctx, column_family, key, key_len, version, err);
}

walbus_code walbus_ctx_expect_version(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len,
                                      uint64_t version, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopeExpectVersion(ctx->ctx, column_family, key, key_len, version, err);
}

walbus_code walbus_ctx_publish_spec(walbus_ctx_t* ctx, const walbus_event_spec* spec, char* id, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopePublishSpec(ctx->ctx, spec, Due{}, id, err);
}

walbus_code walbus_ctx_publish_at(walbus_ctx_t* ctx, const walbus_event_spec* spec, int64_t deliver_at_unix_ms,
                                  char* id, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopePublishSpec(ctx->ctx, spec, Due{deliver_at_unix_ms, std::nullopt}, id, err);
}

walbus_code walbus_ctx_publish_after(walbus_ctx_t* ctx, const walbus_event_spec* spec, uint64_t delay_ms, char* id,
                                     char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopePublishSpec(ctx->ctx, spec, Due{std::nullopt, delay_ms}, id, err);
}

walbus_code walbus_ctx_cancel_scheduled(walbus_ctx_t* ctx, const char* id, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopeCancelScheduled(ctx->ctx, id, err);
}

walbus_code walbus_ctx_get_scheduled(walbus_ctx_t* ctx, const char* id, int* state, int64_t* at_unix_ms, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopeGetScheduled(ctx->ctx, id, state, at_unix_ms, err);
}

void walbus_subscriber_options_init(walbus_subscriber_options* options) {
  if (options == nullptr) return;
  const walbus::SubscriberOptions defaults;
  *options = walbus_subscriber_options{};
  options->max_attempts = defaults.retry.max_attempts;
  options->retry_base_ms = static_cast<uint64_t>(defaults.retry.base.count());
  options->retry_cap_ms = static_cast<uint64_t>(defaults.retry.cap.count());
  options->retry_max_age_ms = static_cast<uint64_t>(defaults.retry.max_age.count());
  options->on_poison = WALBUS_POISON_DEAD_LETTER;
}

walbus_code walbus_subscribe_with(walbus_t* bus, const walbus_subscriber_options* options, char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    if (options == nullptr) return MissingArgument(err, "options");
    if (options->name == nullptr) return MissingArgument(err, "options->name");
    if (options->handler == nullptr) return MissingArgument(err, "options->handler");
    if (options->types == nullptr && options->ntypes > 0) return MissingArgument(err, "options->types");
    walbus::SubscriberOptions sub;
    sub.name = options->name;
    for (size_t i = 0; i < options->ntypes; ++i) {
      if (options->types[i] == nullptr) return MissingArgument(err, "an event type");
      sub.types.emplace_back(options->types[i]);
    }
    sub.retry.max_attempts = options->max_attempts;
    sub.retry.base = std::chrono::milliseconds(options->retry_base_ms);
    sub.retry.cap = std::chrono::milliseconds(options->retry_cap_ms);
    sub.retry.max_age = std::chrono::milliseconds(options->retry_max_age_ms);
    switch (options->on_poison) {  // an int: a C caller may pass any value
      case WALBUS_POISON_DEAD_LETTER: sub.on_poison = walbus::PoisonPolicy::kDeadLetterAndContinue; break;
      case WALBUS_POISON_PARK_KEY: sub.on_poison = walbus::PoisonPolicy::kParkKey; break;
      default: return Fail(err, WALBUS_INVALID_ARGUMENT, "InvalidArgument: unknown poison policy");
    }
    sub.skip_stale = options->skip_stale != 0;
    if (options->handler_version != nullptr) sub.handler_version = options->handler_version;
    sub.side_effect_safe = options->side_effect_safe != 0;
    walbus_handler_fn handler = options->handler;
    void* user = options->user;
    sub.handler = [handler, user](const walbus::Event& e, walbus::HandlerContext& ctx) {
      return RunHandler(handler, user, e, ctx);
    };
    return Report(bus->bus->Subscribe(std::move(sub)), err);
  });
}

walbus_code walbus_wait_caught_up(walbus_t* bus, uint64_t timeout_ms, char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    return Report(bus->bus->WaitCaughtUp(std::chrono::milliseconds(timeout_ms)), err);
  });
}

walbus_code walbus_wait_event(walbus_t* bus, uint64_t seq, const char* id, uint64_t timeout_ms, char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    walbus::EventId parsed;
    if (walbus_code code = ParseId(id, &parsed, err); code != WALBUS_OK) return code;
    walbus::Receipt receipt;
    receipt.first_seq = seq;
    receipt.event_ids = {parsed};
    std::vector<walbus::DeliveryState> states;
    return Report(bus->bus->WaitHandled(receipt, {}, std::chrono::milliseconds(timeout_ms), &states), err);
  });
}

walbus_code walbus_event_status(walbus_t* bus, const char* id, walbus_delivery** deliveries, size_t* count,
                                char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    if (deliveries == nullptr || count == nullptr) return MissingArgument(err, "deliveries");
    walbus::EventId parsed;
    if (walbus_code code = ParseId(id, &parsed, err); code != WALBUS_OK) return code;
    walbus::Result<std::vector<walbus::DeliveryState>> states = bus->bus->EventStatus(parsed);
    if (walbus_code code = Report(states.status(), err); code != WALBUS_OK) return code;
    *deliveries = CopyDeliveries(*states);
    *count = states->size();
    return WALBUS_OK;
  });
}

walbus_code walbus_pending(walbus_t* bus, const char* subscriber, size_t limit, walbus_delivery** deliveries,
                           size_t* count, char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    if (subscriber == nullptr) return MissingArgument(err, "subscriber");
    if (deliveries == nullptr || count == nullptr) return MissingArgument(err, "deliveries");
    walbus::Result<std::vector<walbus::DeliveryState>> states = bus->bus->Pending(subscriber, limit);
    if (!states.ok()) return Report(states.status(), err);
    *deliveries = CopyDeliveries(*states);
    *count = states->size();
    return WALBUS_OK;
  });
}

void walbus_free_deliveries(walbus_delivery* deliveries) { std::free(deliveries); }

walbus_code walbus_subscribe(walbus_t* bus, const char* name, const char* const* types, size_t ntypes,
                             walbus_handler_fn handler, void* user, char** err) {
  walbus_subscriber_options options;
  walbus_subscriber_options_init(&options);
  options.name = name;
  options.types = types;
  options.ntypes = ntypes;
  options.handler = handler;
  options.user = user;
  return walbus_subscribe_with(bus, &options, err);
}

walbus_code walbus_ctx_put(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len,
                           const char* value, size_t value_len, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopePut(ctx->ctx, column_family, key, key_len, value, value_len, err);
}

walbus_code walbus_ctx_get(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len, char** value,
                           size_t* value_len, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ReaderGet(ctx->ctx, column_family, key, key_len, value, value_len, err);
}

walbus_code walbus_ctx_publish(walbus_ctx_t* ctx, const char* type, const char* subject, const char* data,
                               size_t data_len, char** err) {
  if (ctx == nullptr) return MissingArgument(err, "ctx");
  return ScopePublish(ctx->ctx, type, subject, data, data_len, err);
}

const char* walbus_ctx_idempotency_key(const walbus_ctx_t* ctx) {
  return ctx == nullptr ? "" : ctx->ctx->IdempotencyKey().c_str();
}

uint32_t walbus_ctx_attempt(const walbus_ctx_t* ctx) { return ctx == nullptr ? 0 : ctx->ctx->Attempt(); }

void walbus_ctx_retry_after(walbus_ctx_t* ctx, uint64_t delay_ms) {
  if (ctx != nullptr) ctx->retry_after_ms = delay_ms;
}

void walbus_ctx_reject_reason(walbus_ctx_t* ctx, const char* reason) {
  if (ctx == nullptr || reason == nullptr) return;
  try {
    ctx->reject_reason = reason;
  } catch (...) {
    // Out of memory: the default reason is recorded instead.
  }
}

walbus_code walbus_start(walbus_t* bus, char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    return Report(bus->bus->Start(), err);
  });
}

walbus_code walbus_wait_idle(walbus_t* bus, uint64_t timeout_ms, char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    return Report(bus->bus->WaitIdle(std::chrono::milliseconds(timeout_ms)), err);
  });
}

walbus_code walbus_stats(walbus_t* bus, walbus_bus_stats** stats, char** err) {
  return Guard(err, [&] {
    if (bus == nullptr) return MissingArgument(err, "bus");
    if (stats == nullptr) return MissingArgument(err, "stats");
    walbus::BusStats s = bus->bus->Stats();
    // One allocation: the header, the subscriber array, then the names.
    size_t bytes = sizeof(walbus_bus_stats) + s.subscribers.size() * sizeof(walbus_subscriber_stats);
    for (const walbus::SubscriberStats& sub : s.subscribers) bytes += sub.name.size() + 1;
    auto* out = static_cast<walbus_bus_stats*>(std::malloc(bytes));
    if (out == nullptr) throw std::bad_alloc();
    auto* subs = reinterpret_cast<walbus_subscriber_stats*>(out + 1);
    char* names = reinterpret_cast<char*>(subs + s.subscribers.size());
    out->last_seq = s.last_seq;
    out->commits = s.commits;
    out->nsubscribers = s.subscribers.size();
    out->subscribers = subs;
    out->scheduled_pending = s.scheduled_pending;
    out->scheduled_fired = s.scheduled_fired;
    out->scheduled_cancelled = s.scheduled_cancelled;
    for (size_t i = 0; i < s.subscribers.size(); ++i) {
      const walbus::SubscriberStats& from = s.subscribers[i];
      std::memcpy(names, from.name.c_str(), from.name.size() + 1);
      subs[i] = walbus_subscriber_stats{names,        from.checkpoint,    from.handled,  from.duplicates,
                                        from.retries, from.dead_lettered, from.in_flight};
      names += from.name.size() + 1;
    }
    *stats = out;
    return WALBUS_OK;
  });
}

void walbus_free_stats(walbus_bus_stats* stats) { std::free(stats); }

void walbus_free_error(char* err) { std::free(err); }

void walbus_free(void* p) { std::free(p); }

}  // extern "C"
