// walbus/operations.h: what an operator does to a bus (Bus::Operator()):
// act on dead letters (redrive, skip, purge), replay retained events,
// remove a subscriber, cancel a scheduled event, abandon a process
// instance; each recorded with who did it and why before it takes effect.
#ifndef WALBUS_OPERATIONS_H_
#define WALBUS_OPERATIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/event.h"
#include "walbus/export.h"
#include "walbus/status.h"

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
  kCancelled,  // stopped by OperatorActions::CancelReplay
  kRefused,    // could not run (the reason is in `error`)
};

// A replay's record (walbus.replays) and its counts so far.
struct ReplayReport {
  uint64_t replay_id = 0;                           // 0 for a dry run
  std::string subscriber;                           // whose replay
  ReplayMode mode = ReplayMode::kSameInbox;         // as requested
  ReplayState state = ReplayState::kRunning;        // where it stands
  std::string operator_name;                        // who asked for it
  std::string reason;                               // why
  std::string handler_version;                      // the subscriber's when it started
  std::string selection;                            // the request's filters, as text
  std::chrono::system_clock::time_point started{};  // when it was recorded
  std::chrono::system_clock::time_point ended{};    // zero while running
  uint64_t selected = 0;                            // events that matched so far
  uint64_t delivered = 0;                           // ran the handler, and its effects committed
  uint64_t skipped = 0;                             // the inbox had them (kSameInbox) or not taken
  uint64_t failed = 0;                              // dead-lettered by this replay
  uint64_t next_seq = 0;                            // resumes here after a crash
  std::string error;                                // kRefused: why
  std::vector<std::string> cleared;                 // the column families a rebuild cleared
  // kCancelled: who cancelled it and why (OperatorActions::CancelReplay).
  // @{
  std::string cancelled_by;
  std::string cancel_reason;
  // @}
  // Dry run: the selected events' seqs (at most 10000).
  std::vector<uint64_t> seqs;
};

// The operator's actions on a bus, from Bus::Operator(). Each takes an
// OperatorAction (who and why, both required: InvalidArgument otherwise)
// and is recorded in walbus.replays before it takes effect, in the same
// commit when it writes. With action.dry_run it reports what it would do
// and changes nothing. Closed after Bus::Close().
//
// Threading: every method is thread-safe. Actions run one at a time (they
// share one sequence of ids). Lives as long as its Bus.
class WALBUS_EXPORT OperatorActions {
 public:
  OperatorActions() = default;
  OperatorActions(const OperatorActions&) = delete;
  OperatorActions& operator=(const OperatorActions&) = delete;
  virtual ~OperatorActions() = default;

  // Sends the selected dead letters back to their (active) subscriber, in
  // their original per-subject order and before any later event of their
  // subject; a parked subject is released once its held events are back
  // in line. Each redriven event runs under the subscriber's retry policy
  // again. A selection of nothing is no action: OK, action_id 0, no record.
  [[nodiscard]] virtual Result<ActionReport> RedriveDeadLetters(const DeadLetterSelection& selection,
                                                                const OperatorAction& action) = 0;
  // Releases the parked subjects of the selection without running their
  // dead letters again; the dead letters stay for inspection.
  [[nodiscard]] virtual Result<ActionReport> SkipDeadLetters(const DeadLetterSelection& selection,
                                                             const OperatorAction& action) = 0;
  // Deletes the selected dead letters; the action record keeps their seqs
  // and event ids.
  [[nodiscard]] virtual Result<ActionReport> PurgeDeadLetters(const DeadLetterSelection& selection,
                                                              const OperatorAction& action) = 0;

  // Removes a registered subscriber that is not active in this process
  // (one subscribed by mistake, or retired): its checkpoint, counters,
  // retries, dead letters and parked subjects go in one commit, so the
  // outbox is no longer held for it. Its inbox records are deleted after
  // that commit (the next open finishes what a crash left). Its id is
  // never given again: the same name subscribed later is a new subscriber,
  // starting at its SubscriberOptions::start. The report lists the dead
  // letters and parked subjects dropped. InvalidArgument for an unknown
  // name; Busy while it is active here or a replay of it is running
  // (cancel that first).
  [[nodiscard]] virtual Result<ActionReport> RemoveSubscriber(std::string_view name, const OperatorAction& action) = 0;

  // Runs retained events through one subscriber again. Returns once it is
  // recorded (the report's replay_id); it runs in the background, subject
  // by subject in seq order, never beside a live event of the same subject
  // for that subscriber (a subject's replayed events run while it is idle,
  // before its next live event). Exactly once per replay: a replay cut
  // short by a crash resumes at the next open once its subscriber is
  // active, and events it completed are not run again. A replayed event
  // that exhausts the retry policy is dead-lettered (counted failed)
  // without parking its subject. One replay at a time per subscriber:
  // Busy otherwise. A registered subscriber that is not active in this
  // process (an operator's tool on a stopped database) gets the replay
  // recorded; it starts when the subscriber is next subscribed (and a
  // kFreshScope one of a subscriber that has become not side_effect_safe
  // by then ends as kRefused). InvalidArgument for a bad request or an
  // unknown subscriber; NotSupported for kFreshScope on a subscriber not
  // side_effect_safe, as active here or, when not, as it was last
  // subscribed (a database from before registrations were stored:
  // recorded, decided at Subscribe).
  [[nodiscard]] virtual Result<ReplayReport> StartReplay(const ReplayRequest& request) = 0;
  // Stops a running replay, recording who and why (action.dry_run is
  // ignored); what it completed stays. NotFound for an unknown id; OK (and
  // no change) when it has ended already.
  [[nodiscard]] virtual Status CancelReplay(uint64_t replay_id, const OperatorAction& action) = 0;
  // The record of one replay, its counts up to date. NotFound when none.
  [[nodiscard]] virtual Result<ReplayReport> Replay(uint64_t replay_id) = 0;

  // Cancels a scheduled event (`walbus scheduled cancel`):
  // WriteScope::CancelScheduled in a unit of its own, with the action's
  // record in the same commit. Returns the action's id; 0 for a dry run,
  // which only checks that the event is pending. NotFound and Conflict as
  // WriteScope::CancelScheduled.
  [[nodiscard]] virtual Result<uint64_t> CancelScheduled(const EventId& id, const OperatorAction& action) = 0;

  // Abandons the running instance of process `process` (walbus/process.h)
  // under `key`: the process ends it without calling its handler,
  // cancelling its pending timeouts and removing its state. The
  // abandonment reaches the instance as its events do, in their order
  // under `key` (its subject), so it never races a step; it takes effect
  // once the process's subscriber runs and has handled what came before
  // it. An instance stuck behind a failing event is abandoned once that
  // event is dead-lettered, or redriven or skipped when
  // PoisonPolicy::kParkKey holds its subject. Returns the action's id (0
  // for a dry run). NotFound when no instance runs under `key` now;
  // InvalidArgument for a bad process name.
  [[nodiscard]] virtual Result<uint64_t> AbandonProcess(std::string_view process, std::string_view key,
                                                        const OperatorAction& action) = 0;
};

}  // namespace walbus

#endif  // WALBUS_OPERATIONS_H_
