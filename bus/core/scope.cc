// WriteScope, Transaction and HandlerContext: thin wrappers over ScopeRep.
#include <cassert>
#include <optional>

#include "bus/core/envelope.h"
#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "storage/keys.h"

namespace walbus {
namespace {

using internal::Op;
using internal::ScopeRep;

// Held by each call of a Transaction made on an application thread, for
// as long as it uses storage: Close() waits for it, or it gets Closed. A
// handler's context needs none: Close() lets running handlers finish
// before it closes storage.
class ScopeCall {
 public:
  explicit ScopeCall(ScopeRep* rep) {
    if (rep->parent == nullptr) call_.emplace(&rep->host->gate());
  }
  bool admitted() const { return !call_.has_value() || call_->admitted(); }

 private:
  std::optional<internal::CallGate::Call> call_;
};

// Resolves an application column family. REQUIRES: `call` is admitted.
Result<storage::CfHandle*> ResolveCf(ScopeRep* rep, std::string_view cf, std::string_view key) {
  storage::CfHandle* handle = rep->host->db()->AppCf(cf);
  if (handle == nullptr) {
    return Status::InvalidArgument("unknown column family '" + std::string(cf) +
                                   "': list it in Options::column_families");
  }
  if (key.empty()) return Status::InvalidArgument("empty key in column family '" + std::string(cf) + "'");
  return handle;
}

// For messages: cf/key with a long or binary key shortened.
std::string Describe(std::string_view cf, std::string_view key) {
  std::string out(cf);
  out += '/';
  for (char c : key.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (key.size() > 64) out += "...";
  return out;
}

}  // namespace

WriteScope::WriteScope(std::unique_ptr<internal::ScopeRep> rep) : rep_(std::move(rep)) {}
WriteScope::WriteScope(WriteScope&&) noexcept = default;
WriteScope& WriteScope::operator=(WriteScope&&) noexcept = default;
WriteScope::~WriteScope() = default;

Status WriteScope::Put(std::string_view column_family, std::string_view key, std::string_view value) {
  ScopeCall call(rep_.get());
  auto cf = call.admitted() ? ResolveCf(rep_.get(), column_family, key) : internal::ClosedStatus();
  if (!cf.ok()) {
    rep_->Fail(cf.status());
    return cf.status();
  }
  rep_->writes.AddOp(Op{Op::Kind::kPut, *cf, std::string(key), std::string(value)});
  return Status::OK();
}

Status WriteScope::Delete(std::string_view column_family, std::string_view key) {
  ScopeCall call(rep_.get());
  auto cf = call.admitted() ? ResolveCf(rep_.get(), column_family, key) : internal::ClosedStatus();
  if (!cf.ok()) {
    rep_->Fail(cf.status());
    return cf.status();
  }
  rep_->writes.AddOp(Op{Op::Kind::kDelete, *cf, std::string(key), {}});
  return Status::OK();
}

Result<std::optional<std::string>> WriteScope::Get(std::string_view column_family, std::string_view key) {
  ScopeCall call(rep_.get());
  if (!call.admitted()) return internal::ClosedStatus();
  auto cf = ResolveCf(rep_.get(), column_family, key);
  if (!cf.ok()) return cf.status();
  for (auto it = rep_->writes.ops.rbegin(); it != rep_->writes.ops.rend(); ++it) {
    if (it->cf == *cf && it->key == key) {
      if (it->kind == Op::Kind::kDelete) return std::optional<std::string>();
      return std::optional<std::string>(it->value);
    }
  }
  std::string value;
  bool found = false;
  if (Status s = rep_->host->db()->Get(*cf, key, &value, &found); !s.ok()) return s;
  if (!found) return std::optional<std::string>();
  return std::optional<std::string>(std::move(value));
}

Result<uint64_t> WriteScope::GetVersion(std::string_view column_family, std::string_view key) {
  ScopeCall call(rep_.get());
  if (!call.admitted()) return internal::ClosedStatus();
  auto cf = ResolveCf(rep_.get(), column_family, key);
  if (!cf.ok()) return cf.status();
  storage::Db* db = rep_->host->db();
  std::string value;
  bool found = false;
  Status s = db->Get(db->cf(storage::Cf::kVersions), storage::VersionKey(storage::Db::CfId(*cf), key), &value, &found);
  if (!s.ok()) return s;
  if (!found) return uint64_t{0};
  if (value.size() != 8) return Status::Corruption("version record of " + Describe(column_family, key));
  return storage::GetBe64(value);
}

Status WriteScope::ExpectVersion(std::string_view column_family, std::string_view key, uint64_t version) {
  ScopeCall call(rep_.get());
  auto cf = call.admitted() ? ResolveCf(rep_.get(), column_family, key) : internal::ClosedStatus();
  if (!cf.ok()) {
    rep_->Fail(cf.status());
    return cf.status();
  }
  rep_->writes.expects.push_back(
      internal::Expectation{storage::VersionKey(storage::Db::CfId(*cf), key), version, Describe(column_family, key)});
  rep_->writes.bytes += key.size() + 16;
  return Status::OK();
}

Result<EventId> WriteScope::Publish(const EventSpec& spec) {
  ScopeRep* rep = rep_.get();
  ScopeCall call(rep);
  if (!call.admitted()) {
    rep->Fail(internal::ClosedStatus());
    return rep->error;
  }
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
  if (valid.ok()) valid = rep->host->schemas().Verify(event->type, event->data);
  if (!valid.ok()) {
    rep->Fail(valid);
    return valid;
  }
  std::string envelope = internal::EncodeEnvelope(*event);
  rep->writes.bytes += envelope.size() + 16;
  rep->writes.envelopes.push_back(std::move(envelope));
  rep->writes.events.push_back(std::move(event));
  return rep->writes.events.back()->id;
}

Transaction::Transaction(Transaction&&) noexcept = default;
Transaction& Transaction::operator=(Transaction&&) noexcept = default;
Transaction::~Transaction() = default;

Result<Receipt> Transaction::Commit() {
  assert(rep_ != nullptr);
  return rep_->host->CommitTransaction(rep_.get());
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

}  // namespace walbus
