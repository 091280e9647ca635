// walbus/scope.h: a unit of work. A Transaction (Bus::Begin) and a
// handler's HandlerContext read the application's column families, buffer
// writes and events, and commit them atomically.
#ifndef WALBUS_SCOPE_H_
#define WALBUS_SCOPE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "walbus/event.h"
#include "walbus/export.h"
#include "walbus/operations.h"
#include "walbus/options.h"
#include "walbus/read.h"
#include "walbus/status.h"

namespace walbus {

namespace internal {
struct ScopeRep;
struct ScopeAccess;
}  // namespace internal

// Reads and buffered writes on the application's column families, and
// events to publish; the part a Transaction and a HandlerContext share.
// Nothing is written until the owner commits. The first failed call makes
// the whole unit fail at commit with that error, so a write that was refused
// can never be half-applied.
//
// Reads are repeatable: every read of one scope (Get, GetVersion,
// GetWithVersion, Scan) sees committed state as one snapshot, taken at the
// scope's first read and kept until it commits or is destroyed, with the
// scope's own buffered writes laid over it (and, in a handler run in a
// turn, the writes of the events of its subject before it in the turn,
// which commit with it: docs/ordering.md). What the reads protect at
// commit is only what ExpectVersion asserts (docs/ordering.md): a commit
// checks the versions it expects, never the rows it scanned, so another
// commit may add or remove rows in a scanned range meanwhile (a phantom).
// To keep a list consistent, have every writer of the list assert one
// guard key's version.
//
// Threading: not thread-safe; one thread uses a scope at a time.
class WALBUS_EXPORT WriteScope {
 public:
  WriteScope(const WriteScope&) = delete;
  WriteScope& operator=(const WriteScope&) = delete;

  // Buffers a write. InvalidArgument for an unknown column family, an
  // empty key or one longer than kMaxKeyBytes.
  Status Put(std::string_view column_family, std::string_view key, std::string_view value);
  // Buffers a deletion; the same errors as Put.
  Status Delete(std::string_view column_family, std::string_view key);
  // Buffers the deletion of every key in [start, end), committed and
  // buffered before it, as one range deletion: it lands atomically with the
  // rest of the unit, never in part. Versions stay (they only advance).
  // InvalidArgument unless start < end, both valid keys.
  Status DeleteRange(std::string_view column_family, std::string_view start, std::string_view end);
  // Buffers the deletion of every key of the column family, as DeleteRange.
  Status Clear(std::string_view column_family);

  // Reads this scope's own buffered writes first, then committed state.
  // A missing key is an OK result holding nullopt.
  Result<std::optional<std::string>> Get(std::string_view column_family, std::string_view key);

  // The committed version of a key: 0 when no commit ever asserted one.
  // Versions advance only through ExpectVersion.
  //
  // Read a value and the version to assert with GetWithVersion, or in one
  // scope: a Get in one unit of work and a GetVersion in another read two
  // moments, and a commit between them makes the value stale while the
  // version still matches, so the update built on it overwrites another
  // (a lost update).
  Result<uint64_t> GetVersion(std::string_view column_family, std::string_view key);
  // The value (own writes first, as Get) and the committed version (as
  // GetVersion), from the scope's one snapshot.
  Result<VersionedValue> GetWithVersion(std::string_view column_family, std::string_view key);

  // One page of rows in key order (ScanOptions): committed state as of the
  // scope's snapshot, with its own buffered puts, deletes and range
  // deletes applied. InvalidArgument for an unknown column family.
  Result<ScanPage> Scan(std::string_view column_family, const ScanOptions& options);
  // The same rows, visited without copies; limit and resume_after apply.
  // The visitor must not write to this scope.
  Status Scan(std::string_view column_family, const ScanOptions& options, const RowVisitor& visit);

  // Optimistic precondition: the commit succeeds only while the key's
  // committed version equals `version`, and then sets it to version + 1.
  // Otherwise the commit returns Conflict and writes nothing. Every writer
  // of a key that must not lose updates asserts its version.
  Status ExpectVersion(std::string_view column_family, std::string_view key, uint64_t version);

  // Validates and buffers an event; its id is assigned now and never
  // changes. InvalidArgument (and the scope fails) on a bad type, an empty
  // subject or an oversized payload.
  Result<EventId> Publish(const EventSpec& event);

  // OK, or the error of the unit's first failed call: what its commit
  // will return (a handler's unit with one is a failed attempt, whatever
  // the handler answers).
  Status status() const;

  // Cancels a scheduled event (EventSpec::deliver_at), atomically with the
  // rest of the unit. The commit decides it in commit order against the
  // firing: it succeeds only while the event has not fired, and otherwise
  // returns Conflict saying that it fired (or was cancelled) already, and
  // writes nothing. Cancelling an event this unit scheduled itself drops
  // it. NotFound (and the unit fails) for an id never scheduled here.
  // Reschedule by cancelling and publishing anew in one unit.
  Status CancelScheduled(const EventId& id);
  // Where a scheduled event stands, as this unit's snapshot saw it (its own
  // buffered cancel and schedules laid over). A handler that must not fail
  // its commit on a timer that fired reads this before CancelScheduled.
  Result<ScheduledStatus> GetScheduled(const EventId& id);

  // Cancels the event pending under `key` (EventSpec::schedule_key)
  // atomically with the rest of the unit; when none is pending as the
  // unit sees it, nothing is cancelled and the call is OK. Every schedule
  // and cancel under a key asserts the key as ExpectVersion does: the
  // commit returns Conflict (and writes nothing) when another unit
  // scheduled or cancelled under it, or its event fired, after this
  // unit first used the key. InvalidArgument for an empty key or one
  // longer than kMaxKeyBytes.
  Status CancelScheduledByKey(std::string_view key);
  // The event pending under `key`, as this unit sees it (its own
  // schedules and cancels laid over its snapshot), or nullopt.
  Result<std::optional<EventId>> ScheduledByKey(std::string_view key);

 protected:
  // Made by the bus as a Transaction or a HandlerContext, and moved or
  // destroyed only as one of those.
  // @{
  explicit WriteScope(std::unique_ptr<internal::ScopeRep> rep);
  WriteScope(WriteScope&&) noexcept;
  WriteScope& operator=(WriteScope&&) noexcept;
  ~WriteScope();
  // @}
  // The buffered writes and events (bus/core/scope.h).
  std::unique_ptr<internal::ScopeRep> rep_;
  friend struct internal::ScopeAccess;
};

// How one commit is made (Transaction::Commit).
struct CommitOptions {
  // Return only once the commit is on stable storage, as under
  // Durability::kSync, even on a kBuffered bus: for the few commits a
  // power cut must not take (a payment taken, an acknowledgement about to
  // be sent) among many that may be redone. It shares the fsync of its
  // group, and the commits written before it become durable with it.
  // False: as Options::durability says.
  bool sync = false;
};

// A unit of domain writes and events that commits atomically.
// Destroying a Transaction without Commit() leaves nothing behind.
//
// Threading: not thread-safe; many threads may each run their own.
class WALBUS_EXPORT Transaction : public WriteScope {
 public:
  // Movable; a moved-from Transaction may only be destroyed or assigned to.
  // @{
  Transaction(Transaction&&) noexcept;
  Transaction& operator=(Transaction&&) noexcept;
  // @}
  ~Transaction();

  // Writes everything buffered in one atomic batch, durable per
  // Options::durability (or CommitOptions::sync) when it returns OK.
  // Conflict when an ExpectVersion failed; the first error of an earlier
  // call; Closed after Bus::Close(); InvalidArgument when this transaction
  // was committed before (nothing is written twice). Blocks while the
  // write is in progress (shared with concurrent commits).
  Result<Receipt> Commit(const CommitOptions& options = {});

 private:
  using WriteScope::WriteScope;
  friend struct internal::ScopeAccess;
};

// What a handler sees besides its event: the application's column families
// (reads see committed state; writes commit atomically with the inbox record
// of this event), follow-up events, and a stable key for external effects.
//
// Threading: valid only inside the handler call, on the handler's thread.
class WALBUS_EXPORT HandlerContext : public WriteScope {
 public:
  ~HandlerContext();

  // "<subscriber>/<event id>": the same on every redelivery of this event
  // to this subscriber. Pass it to external systems that deduplicate.
  const std::string& IdempotencyKey() const;
  // The name of the subscriber running the handler.
  const std::string& SubscriberName() const;
  // Which run of the handler at this event this is: 1 on the first, then
  // 2, 3, ... The count is stored with the retry record, so it goes on
  // across restarts; a run cut short by a crash counts, events waiting at
  // a clean Close are charged nothing, and a pause is not a run.
  uint32_t Attempt() const;
  // A run of the handler for a replay (OperatorActions::StartReplay).
  struct ReplayRun {
    uint64_t replay_id = 0;                    // which replay
    ReplayMode mode = ReplayMode::kSameInbox;  // and in which mode
  };
  // Set when this run is a replay's, not a live delivery's. A projection
  // rebuilt from cleared state (ReplayRequest::clear_column_families)
  // needs nothing of it; a handler that sends nothing out during replays,
  // or keeps a marker per replay, reads it here.
  std::optional<ReplayRun> Replaying() const;

 private:
  using WriteScope::WriteScope;
  friend struct internal::ScopeAccess;
};

}  // namespace walbus

#endif  // WALBUS_SCOPE_H_
