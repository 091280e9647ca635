// walbus/operations.h: what an operator does to a bus: act on dead
// letters (redrive, skip, purge) and replay retained events, each recorded
// with who did it and why.
#ifndef WALBUS_OPERATIONS_H_
#define WALBUS_OPERATIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "walbus/event.h"

namespace walbus {

// Which dead letters of one subscriber an operator acts on.
struct DeadLetterSelection {
  std::string subscriber;      // whose dead letters (required):
  std::vector<uint64_t> seqs;  // these ones; or, when empty,
  std::string type;            // those of this type (empty: any) and
  std::string subject;         // of this subject (empty: any)
};

// Who acts and why: recorded with the action, before it takes effect.
struct OperatorAction {
  std::string operator_name;  // required
  std::string reason;         // required
  bool dry_run = false;       // report what would be done; change nothing
};

// What an operator action selected (in seq order) and its record's id.
struct ActionReport {
  uint64_t action_id = 0;                      // 0 for a dry run, and when nothing was selected (nothing recorded)
  std::vector<uint64_t> seqs;                  // the dead letters selected
  std::vector<std::string> released_subjects;  // unparked (PoisonPolicy::kParkKey)
};

// How a replay treats the subscriber's record of handled events.
enum class ReplayMode : uint8_t {
  // The subscriber's inbox applies: events it handled before are skipped
  // (counted), the others run. "Run again what failed or was missed."
  kSameInbox,
  // A new inbox scope, the replay's own: every selected event runs again,
  // once per replay. Refused unless the subscriber is side_effect_safe.
  kFreshScope,
};

// Which retained events a replay runs, for one subscriber. Every filter
// set must match; an empty one matches all. Only events the subscriber has
// passed (at or below its checkpoint when the replay starts) and the
// outbox still holds (see Options::retain_events and friends) are taken.
struct ReplayRequest {
  std::string subscriber;                    // required; a registered subscriber
  ReplayMode mode = ReplayMode::kSameInbox;  // see ReplayMode
  uint64_t from_seq = 0;                     // inclusive; 0: from the oldest kept
  uint64_t to_seq = 0;                       // inclusive; 0: up to the checkpoint
  // Event time range [since, until): zero means unbounded.
  // @{
  std::chrono::system_clock::time_point since{};
  std::chrono::system_clock::time_point until{};
  // @}
  std::vector<std::string> types;  // any of these types
  std::string subject;             // exactly this subject
  std::vector<EventId> ids;        // any of these event ids
  uint64_t max_events = 0;         // stop after this many selected; 0: no cap
  // A rebuild: these application column families (the subscriber's
  // projection) are cleared in the same commit that records the replay,
  // and the subscriber's record of what it handled after its checkpoint
  // is dropped too, so that every event it ever took is applied once to
  // the cleared state: by this replay up to the checkpoint, live after it.
  // Needs kFreshScope, no filters above (a partial history would leave a
  // partial state), the whole history still kept (nothing trimmed: see
  // Options::retain_events), no dead letters of the subscriber waiting
  // (they would run here and again when redriven; purge them first), and
  // the subscriber not active in this process (record the rebuild before
  // Subscribe, or with the walbus tool on a stopped database): Busy when
  // it is, NotSupported for a history or dead letters in the way.
  std::vector<std::string> clear_column_families;
  OperatorAction action;  // who and why (required); dry_run
};

// Where a replay stands.
enum class ReplayState : uint8_t {
  kRunning,    // recorded, and running (or resuming at the next open)
  kDone,       // reached the end of its selection or its cap
  kCancelled,  // stopped by Bus::CancelReplay
  kRefused,    // could not run (the reason is in `error`)
};

// A replay's record (walbus.replays) and its counts so far.
struct ReplayReport {
  uint64_t replay_id = 0;                     // 0 for a dry run
  std::string subscriber;                     // whose replay
  ReplayMode mode = ReplayMode::kSameInbox;   // as requested
  ReplayState state = ReplayState::kRunning;  // where it stands
  std::string operator_name;                  // who asked for it
  std::string reason;                         // why
  std::string handler_version;                // the subscriber's when it started
  std::string selection;                      // the request's filters, as text
  uint64_t started_ms = 0;                    // unix ms
  uint64_t ended_ms = 0;                      // unix ms; 0 while running
  uint64_t selected = 0;                      // events that matched so far
  uint64_t delivered = 0;                     // ran the handler, and its effects committed
  uint64_t skipped = 0;                       // the inbox had them (kSameInbox) or not taken
  uint64_t failed = 0;                        // dead-lettered by this replay
  uint64_t next_seq = 0;                      // resumes here after a crash
  std::string error;                          // kRefused: why
  std::vector<std::string> cleared;           // the column families a rebuild cleared
  // kCancelled: who cancelled it and why (Bus::CancelReplay).
  // @{
  std::string cancelled_by;
  std::string cancel_reason;
  // @}
  // Dry run: the selected events' seqs (at most 10000).
  std::vector<uint64_t> seqs;
};

}  // namespace walbus

#endif  // WALBUS_OPERATIONS_H_
