// Ingestion: events that come from elsewhere (Bus::IngestEnvelope,
// IngestEvent: the bridge, files, another bus) are verified as a producer's
// would be, quarantined when they fail, and committed once per dedup scope,
// in their sender's order per order key when they carry one.
//
// Threading: thread-safe; concurrent ingests of one id or one order key are
// decided by the committer's expectations (one commits, the other sees a
// conflict and what it means). REQUIRES of every call: an admitted call.
#ifndef WALBUS_BUS_API_INGESTION_H_
#define WALBUS_BUS_API_INGESTION_H_

#include <functional>
#include <memory>
#include <string_view>

#include "bus/core/quarantine.h"
#include "bus/core/schema_registry.h"
#include "bus/core/write_set.h"
#include "storage/db.h"
#include "walbus/bus.h"

namespace walbus::internal {

class Ingestion {
 public:
  // Commits writes as a Transaction's commit would (the bus's durability).
  using CommitFn = std::function<Result<Receipt>(WriteSet* writes)>;

  // REQUIRES: every pointer outlives it.
  Ingestion(const storage::Db* db, const SchemaRegistry* schemas, Quarantine* quarantine, size_t max_payload_bytes,
            CommitFn commit);

  Result<IngestResult> FromEnvelope(std::string_view envelope, const IngestOptions& options);
  Result<IngestResult> FromEvent(const Event& event, const IngestOptions& options);

 private:
  // Quarantines `input` (what arrived) when `verified` failed; the error
  // the caller returns then, or OK.
  Status QuarantineUnless(const Status& verified, std::string_view input, const IngestOptions& options);
  // Commits one verified event, with its dedup record when dedup_scope is
  // not empty.
  Result<IngestResult> Commit(std::shared_ptr<Event> event, const IngestOptions& options);
  // One try of Commit with an order key, against `last_taken`.
  Result<IngestResult> CommitOrdered(const std::shared_ptr<Event>& event, const IngestOptions& options,
                                     uint64_t last_taken);

  const storage::Db* const db_;
  const SchemaRegistry* const schemas_;
  Quarantine* const quarantine_;
  const size_t max_payload_bytes_;
  const CommitFn commit_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_INGESTION_H_
