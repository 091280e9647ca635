// WriteScope, Transaction, HandlerContext and ReadView: thin wrappers over
// ScopeRep and ViewRep.
#include <cassert>
#include <initializer_list>
#include <optional>

#include "bus/core/envelope.h"
#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "bus/core/timer_writes.h"
#include "storage/keys.h"

namespace walbus {
namespace {

using internal::ScopeCall;
using internal::ScopeRep;

// The column family of a read, its key checked. REQUIRES: an admitted call.
Result<storage::CfHandle*> CfForRead(internal::ScopeHost* host, std::string_view cf, std::string_view key) {
  auto handle = host->app_column_families().Find(cf);
  if (!handle.ok()) return handle;
  if (Status s = internal::CheckKey(cf, key, /*for_write=*/false); !s.ok()) return s;
  return handle;
}

// The column family of a buffered write, its keys checked; a failure
// fails the scope too. A committed transaction takes no more writes.
Result<storage::CfHandle*> CfForWrite(ScopeRep* rep, std::string_view cf,
                                      std::initializer_list<std::string_view> keys) {
  ScopeCall call(rep);
  if (Status s = CheckWritable(rep, call); !s.ok()) return s;
  auto handle = rep->host->app_column_families().Find(cf);
  for (std::string_view key : keys) {
    if (!handle.ok()) break;
    if (Status s = internal::CheckKey(cf, key, /*for_write=*/true); !s.ok()) handle = s;
  }
  if (!handle.ok()) rep->Fail(handle.status());
  return handle;
}

// Runs `read` (given the column family) inside an admitted call. `key`
// is checked unless null (a scan has none).
template <typename Read>
auto ReadIn(internal::ScopeHost* host, bool in_handler, std::string_view cf, const std::string_view* key, Read read)
    -> decltype(read(static_cast<storage::CfHandle*>(nullptr))) {
  ScopeCall call(host, in_handler);
  if (!call.admitted()) return internal::ClosedStatus();
  auto handle = key != nullptr ? CfForRead(host, cf, *key) : host->app_column_families().Find(cf);
  if (!handle.ok()) return handle.status();
  return read(*handle);
}

uint64_t UnixMillisOf(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  return ms < 0 ? 0 : static_cast<uint64_t>(ms);
}

// When `spec`, published at `now_ms` on the timeline, falls due there.
// InvalidArgument for both forms at once, a negative delay, or a time
// beyond what a due moment holds. REQUIRES: spec sets one of the forms.
Status DueOf(const EventSpec& spec, internal::Timeline& timeline, internal::Timeline::Reading now, uint64_t* due_ms) {
  assert(spec.deliver_at || spec.deliver_after);
  constexpr uint64_t kLatestDue = uint64_t{1} << 60;  // some 36 million years
  if (spec.deliver_at && spec.deliver_after) {
    return Status::InvalidArgument("an event sets deliver_at or deliver_after, not both");
  }
  if (spec.deliver_after) {
    if (spec.deliver_after->count() < 0) return Status::InvalidArgument("deliver_after is negative");
    const auto after = static_cast<uint64_t>(spec.deliver_after->count());
    if (after >= kLatestDue) return Status::InvalidArgument("deliver_after is too far ahead");
    // Plus one unless now is its millisecond exactly: the reading is
    // rounded down, and the delay is never cut short.
    *due_ms = now.ms + after + (now.exact ? 0 : 1);
  } else {
    *due_ms = timeline.AtWall(*spec.deliver_at);
  }
  if (*due_ms >= kLatestDue) return Status::InvalidArgument("deliver_at is too far ahead");
  return Status::OK();
}

}  // namespace

WriteScope::WriteScope(std::unique_ptr<internal::ScopeRep> rep) : rep_(std::move(rep)) {}
WriteScope::WriteScope(WriteScope&&) noexcept = default;
WriteScope& WriteScope::operator=(WriteScope&&) noexcept = default;
WriteScope::~WriteScope() = default;

Status WriteScope::Put(std::string_view column_family, std::string_view key, std::string_view value) {
  auto cf = CfForWrite(rep_.get(), column_family, {key});
  if (!cf.ok()) return cf.status();
  rep_->writes.Put(*cf, std::string(key), std::string(value));
  return Status::OK();
}

Status WriteScope::Delete(std::string_view column_family, std::string_view key) {
  auto cf = CfForWrite(rep_.get(), column_family, {key});
  if (!cf.ok()) return cf.status();
  rep_->writes.Delete(*cf, std::string(key));
  return Status::OK();
}

Status WriteScope::DeleteRange(std::string_view column_family, std::string_view start, std::string_view end) {
  auto cf = CfForWrite(rep_.get(), column_family, {start, end});
  if (!cf.ok()) return cf.status();
  if (start >= end) {
    Status s = Status::InvalidArgument("DeleteRange in '" + std::string(column_family) +
                                       "': start is not below end (the range is [start, end))");
    rep_->Fail(s);
    return s;
  }
  rep_->writes.DeleteRange(*cf, std::string(start), std::string(end));
  return Status::OK();
}

Status WriteScope::Clear(std::string_view column_family) {
  auto cf = CfForWrite(rep_.get(), column_family, {});
  if (!cf.ok()) return cf.status();
  rep_->writes.AddOp(internal::ClearAll(*cf));
  return Status::OK();
}

Result<std::optional<std::string>> WriteScope::Get(std::string_view column_family, std::string_view key) {
  ScopeRep* rep = rep_.get();
  return ReadIn(rep->host, rep->parent != nullptr, column_family, &key,
                [&](storage::CfHandle* cf) { return rep->reader.Get(rep->host->db(), cf, key, &rep->writes); });
}

Result<uint64_t> WriteScope::GetVersion(std::string_view column_family, std::string_view key) {
  ScopeRep* rep = rep_.get();
  return ReadIn(rep->host, rep->parent != nullptr, column_family, &key,
                [&](storage::CfHandle* cf) { return rep->reader.Version(rep->host->db(), cf, column_family, key); });
}

namespace {
Result<VersionedValue> ReadWithVersion(internal::StateReader* reader, storage::Db* db, storage::CfHandle* cf,
                                       std::string_view column_family, std::string_view key,
                                       const internal::WriteSet* own) {
  auto value = reader->Get(db, cf, key, own);
  if (!value.ok()) return value.status();
  auto version = reader->Version(db, cf, column_family, key);
  if (!version.ok()) return version.status();
  return VersionedValue{std::move(*value), *version};
}
}  // namespace

Result<VersionedValue> WriteScope::GetWithVersion(std::string_view column_family, std::string_view key) {
  ScopeRep* rep = rep_.get();
  return ReadIn(rep->host, rep->parent != nullptr, column_family, &key, [&](storage::CfHandle* cf) {
    return ReadWithVersion(&rep->reader, rep->host->db(), cf, column_family, key, &rep->writes);
  });
}

Result<ScanPage> WriteScope::Scan(std::string_view column_family, const ScanOptions& options) {
  ScopeRep* rep = rep_.get();
  return ReadIn(rep->host, rep->parent != nullptr, column_family, nullptr, [&](storage::CfHandle* cf) {
    return rep->reader.ScanPageOf(rep->host->db(), cf, options, &rep->writes);
  });
}

Status WriteScope::Scan(std::string_view column_family, const ScanOptions& options, const RowVisitor& visit) {
  ScopeRep* rep = rep_.get();
  // The visitor may write to this scope: the scan reads a copy of the
  // writes buffered when it started.
  return ReadIn(rep->host, rep->parent != nullptr, column_family, nullptr, [&](storage::CfHandle* cf) {
    return rep->reader.Scan(rep->host->db(), cf, options, &rep->writes, visit, nullptr);
  });
}

Status WriteScope::status() const { return rep_->error; }

Status WriteScope::ExpectVersion(std::string_view column_family, std::string_view key, uint64_t version) {
  auto cf = CfForWrite(rep_.get(), column_family, {key});
  if (!cf.ok()) return cf.status();
  rep_->writes.expects.push_back(internal::Expectation{storage::VersionKey(storage::Db::CfId(*cf), key), version,
                                                       internal::DescribeKey(column_family, key)});
  rep_->writes.bytes += key.size() + 16;
  return Status::OK();
}

Result<EventId> WriteScope::Publish(const EventSpec& spec) {
  ScopeRep* rep = rep_.get();
  ScopeCall call(rep);
  if (Status s = CheckWritable(rep, call); !s.ok()) return s;
  const Options& options = rep->host->options();
  auto event = std::make_shared<Event>();
  event->id = EventId::Generate();
  event->type = spec.type;
  event->source = spec.source.empty() ? options.source : spec.source;
  event->subject = spec.subject;
  event->subject_version = spec.subject_version;
  event->time = options.clock->WallNow();
  event->content_type = spec.content_type;
  event->data = spec.data;
  event->traceparent = spec.traceparent;
  event->correlation_id = spec.correlation_id;
  if (rep->parent != nullptr) {
    // A follow-up: caused by the handled event, in the same flow and trace.
    event->causation_id = rep->parent->id;
    if (!event->correlation_id) event->correlation_id = rep->parent->correlation_id.value_or(rep->parent->id);
    if (event->traceparent.empty()) event->traceparent = rep->parent->traceparent;
  }
  Status valid = internal::ValidateNewEvent(*event, options.max_payload_bytes);
  if (valid.ok()) valid = rep->host->schemas().Verify(event->type, event->data, &event->schema_version);
  const bool scheduled = spec.deliver_at || spec.deliver_after;
  if (valid.ok() && !scheduled && !spec.schedule_key.empty()) {
    valid = Status::InvalidArgument("a schedule key is for a scheduled event (deliver_at or deliver_after)");
  }
  // One reading of the timeline: the moment it was scheduled, and the
  // base of a deliver_after.
  const internal::Timeline::Reading now = scheduled ? rep->host->timeline().Read() : internal::Timeline::Reading{};
  const uint64_t now_ms = now.ms;
  uint64_t due_ms = 0;
  if (valid.ok() && scheduled) valid = DueOf(spec, rep->host->timeline(), now, &due_ms);
  if (!valid.ok()) {
    rep->Fail(valid);
    return valid;
  }
  std::string envelope = internal::EncodeEnvelope(*event);
  if (scheduled) {
    internal::AddSchedule(&rep->writes, rep->host->db(), *event, std::move(envelope), due_ms, now_ms,
                          UnixMillisOf(event->time), spec.schedule_key);
    if (!spec.schedule_key.empty()) {
      if (Status s = internal::ScheduleUnderKey(rep, spec.schedule_key, event->id); !s.ok()) return s;
    }
    return event->id;
  }
  rep->writes.bytes += envelope.size() + 16;
  rep->writes.envelopes.push_back(std::move(envelope));
  rep->writes.events.push_back(std::move(event));
  return rep->writes.events.back()->id;
}

Transaction::Transaction(Transaction&&) noexcept = default;
Transaction& Transaction::operator=(Transaction&&) noexcept = default;
Transaction::~Transaction() = default;

Result<Receipt> Transaction::Commit(const CommitOptions& options) {
  assert(rep_ != nullptr);
  return rep_->host->CommitTransaction(rep_.get(), options.sync);
}

HandlerContext::~HandlerContext() = default;
const std::string& HandlerContext::IdempotencyKey() const {
  // Made on first use: most handlers never ask, and it costs a string per event.
  if (rep_->idempotency_key.empty()) {
    assert(rep_->parent != nullptr);
    rep_->idempotency_key = rep_->subscriber_name + "/" + rep_->parent->id.ToString();
  }
  return rep_->idempotency_key;
}
const std::string& HandlerContext::SubscriberName() const { return rep_->subscriber_name; }
uint32_t HandlerContext::Attempt() const { return rep_->attempt; }
std::optional<HandlerContext::ReplayRun> HandlerContext::Replaying() const { return rep_->replay; }

ReadView::ReadView(std::unique_ptr<internal::ViewRep> rep) : rep_(std::move(rep)) {}
ReadView::ReadView(ReadView&&) noexcept = default;
ReadView& ReadView::operator=(ReadView&&) noexcept = default;
ReadView::~ReadView() = default;

// The view's reader is used const-ly here: its snapshot was taken when the
// view was made, so no read takes one (which is what lets reads run at once).
Result<std::optional<std::string>> ReadView::Get(std::string_view column_family, std::string_view key) const {
  internal::ViewRep* rep = rep_.get();
  return ReadIn(rep->host, false, column_family, &key,
                [&](storage::CfHandle* cf) { return rep->reader.Get(rep->host->db(), cf, key, nullptr); });
}

Result<VersionedValue> ReadView::GetWithVersion(std::string_view column_family, std::string_view key) const {
  internal::ViewRep* rep = rep_.get();
  return ReadIn(rep->host, false, column_family, &key, [&](storage::CfHandle* cf) {
    return ReadWithVersion(&rep->reader, rep->host->db(), cf, column_family, key, nullptr);
  });
}

Result<ScanPage> ReadView::Scan(std::string_view column_family, const ScanOptions& options) const {
  internal::ViewRep* rep = rep_.get();
  return ReadIn(rep->host, false, column_family, nullptr,
                [&](storage::CfHandle* cf) { return rep->reader.ScanPageOf(rep->host->db(), cf, options, nullptr); });
}

Status ReadView::Scan(std::string_view column_family, const ScanOptions& options, const RowVisitor& visit) const {
  internal::ViewRep* rep = rep_.get();
  return ReadIn(rep->host, false, column_family, nullptr, [&](storage::CfHandle* cf) {
    return rep->reader.Scan(rep->host->db(), cf, options, nullptr, visit, nullptr);
  });
}

}  // namespace walbus
