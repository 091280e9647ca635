#include "bus/api/ingestion.h"

#include <cassert>
#include <string>

#include "bus/core/envelope.h"
#include "storage/keys.h"

namespace walbus::internal {

namespace {

constexpr size_t kMaxOrderKeyBytes = 2048;

Status ValidateIngestOptions(const IngestOptions& options) {
  if (!options.dedup_scope.empty()) {
    if (Status s = ValidateSubscriberName(options.dedup_scope); !s.ok()) {
      return Status::InvalidArgument("dedup scope: " + s.message());
    }
  }
  if (options.order_key.empty()) return Status::OK();
  if (options.dedup_scope.empty()) return Status::InvalidArgument("an order key needs a dedup scope");
  if (options.position == 0) return Status::InvalidArgument("an order key needs a position (1 or more)");
  if (options.order_key.size() > kMaxOrderKeyBytes) {
    return Status::InvalidArgument("order key of " + std::to_string(options.order_key.size()) + " bytes exceeds " +
                                   std::to_string(kMaxOrderKeyBytes));
  }
  return Status::OK();
}

// "This scope has not taken this event id": the committer checks it in
// commit order, so two concurrent ingests of one id cannot both pass.
Expectation NotTakenYet(const std::string& scope, const Event& event) {
  return Expectation{storage::IngestDedupKey(scope, event.id), 0,
                     "event " + event.id.ToString() + " in dedup scope " + scope};
}

std::string OrderVersionKey(const IngestOptions& options) {
  return storage::IngestOrderKey(options.dedup_scope, options.order_key);
}

}  // namespace

Ingestion::Ingestion(const storage::Db* db, const SchemaRegistry* schemas, Quarantine* quarantine,
                     size_t max_payload_bytes, CommitFn commit)
    : db_(db),
      schemas_(schemas),
      quarantine_(quarantine),
      max_payload_bytes_(max_payload_bytes),
      commit_(std::move(commit)) {
  assert(db_ != nullptr && schemas_ != nullptr && quarantine_ != nullptr && commit_);
}

Result<IngestResult> Ingestion::FromEnvelope(std::string_view envelope, const IngestOptions& options) {
  if (Status s = ValidateIngestOptions(options); !s.ok()) return s;
  auto event = std::make_shared<Event>();
  Status verified = DecodeEnvelope(envelope, max_payload_bytes_, event.get());
  if (verified.ok()) verified = ValidateNewEvent(*event, max_payload_bytes_);
  if (verified.ok()) verified = schemas_->Verify(event->type, event->data, &event->schema_version);
  if (Status s = QuarantineUnless(verified, envelope, options); !s.ok()) return s;
  return Commit(std::move(event), options);
}

Result<IngestResult> Ingestion::FromEvent(const Event& input, const IngestOptions& options) {
  if (Status s = ValidateIngestOptions(options); !s.ok()) return s;
  auto event = std::make_shared<Event>(input);
  event->seq = 0;
  Status verified = event->id.IsNil() ? Status::InvalidArgument("the event has no id") : Status::OK();
  if (verified.ok()) verified = ValidateNewEvent(*event, max_payload_bytes_);
  if (verified.ok()) verified = schemas_->Verify(event->type, event->data, &event->schema_version);
  // What arrived, as an envelope: the quarantine keeps every attribute.
  if (!verified.ok()) {
    if (Status s = QuarantineUnless(verified, EncodeEnvelope(*event), options); !s.ok()) return s;
  }
  return Commit(std::move(event), options);
}

Status Ingestion::QuarantineUnless(const Status& verified, std::string_view input, const IngestOptions& options) {
  if (verified.ok()) return Status::OK();
  if (Status q = quarantine_->Add(input, options.source, verified.message()); !q.ok()) return q;
  return Status::InvalidArgument("quarantined input from " + options.source + ": " + verified.message());
}

Result<IngestResult> Ingestion::Commit(std::shared_ptr<Event> event, const IngestOptions& options) {
  if (options.order_key.empty()) {
    WriteSet scope;
    if (!options.dedup_scope.empty()) scope.expects.push_back(NotTakenYet(options.dedup_scope, *event));
    scope.envelopes.push_back(EncodeEnvelope(*event));
    scope.bytes += scope.envelopes.back().size();
    scope.events.push_back(std::move(event));
    Result<Receipt> committed = commit_(&scope);
    IngestResult result;
    if (!committed.ok()) {
      if (!committed.status().IsConflict() || options.dedup_scope.empty()) return committed.status();
      // The scope's only precondition is the dedup record.
      result.disposition = IngestDisposition::kDuplicate;
      return result;
    }
    result.receipt = std::move(*committed);
    return result;
  }
  // The order record is read, then asserted at commit: a concurrent ingest
  // of the same key makes the commit a conflict, and the next try sees it.
  for (int attempt = 0;; ++attempt) {
    std::string value;
    bool found = false;
    if (Status s = db_->Get(db_->cf(storage::Cf::kVersions), OrderVersionKey(options), &value, &found); !s.ok()) {
      return s;
    }
    if (found && value.size() != 8) return Status::Corruption("order record of " + options.dedup_scope);
    const uint64_t last_taken = found ? storage::GetBe64(value) : 0;
    Result<IngestResult> r = CommitOrdered(event, options, last_taken);
    if (r.ok() || !r.status().IsConflict() || attempt == 3) return r;
  }
}

Result<IngestResult> Ingestion::CommitOrdered(const std::shared_ptr<Event>& event, const IngestOptions& options,
                                              uint64_t last_taken) {
  IngestResult result;
  const uint64_t position = options.position;
  const bool late = position <= last_taken;
  if (!late && position > last_taken + 1 && !options.accept_gap) {
    result.disposition = IngestDisposition::kAhead;
    result.next_position = last_taken + 1;
    return result;
  }
  WriteSet scope;
  scope.expects.push_back(NotTakenYet(options.dedup_scope, *event));
  if (!late) {
    Expectation order{OrderVersionKey(options), last_taken, "order key in dedup scope " + options.dedup_scope};
    order.next_version = position;
    scope.expects.push_back(std::move(order));
  }
  scope.envelopes.push_back(EncodeEnvelope(*event));
  scope.bytes += scope.envelopes.back().size();
  scope.events.push_back(event);
  Result<Receipt> committed = commit_(&scope);
  if (!committed.ok()) {
    if (!committed.status().IsConflict()) return committed.status();
    if (!late) {
      // The order record moved (the caller tries again), or the id was
      // taken before without an order key.
      std::string value;
      bool taken = false;
      const Expectation& dedup = scope.expects.front();
      if (Status s = db_->Get(db_->cf(storage::Cf::kVersions), dedup.version_key, &value, &taken); !s.ok()) return s;
      if (!taken) return committed.status();
    }
    result.disposition = IngestDisposition::kDuplicate;
    result.next_position = last_taken + 1;
    return result;
  }
  result.receipt = std::move(*committed);
  result.disposition = late ? IngestDisposition::kLate : IngestDisposition::kTaken;
  result.next_position = late ? last_taken + 1 : position + 1;
  result.skipped_positions = late ? 0 : position - last_taken - 1;
  return result;
}

}  // namespace walbus::internal
