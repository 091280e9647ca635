// walbus/process.h: process managers. A process is a durable state machine
// with one instance per business key (an order, a sale), driven by the
// events it takes and by named timeouts, each step committed as one unit
// with the event's inbox record. docs/processes.md.
//
//   walbus::ProcessDefinition sale;
//   sale.name = "sale";
//   sale.steps = {{.type = "shop.sale-opened.v1", .starts = true},
//                 {.type = "shop.payment-taken.v1"}};
//   sale.handler = [](const walbus::Event& e, walbus::ProcessContext& p) {
//     if (p.IsNew()) {
//       p.SetState("awaiting payment");
//       return p.SetTimeout("payment", std::chrono::minutes(15)).ok() ? walbus::Outcome::Done() : ...;
//     }
//     if (p.FiredTimeout() == "payment") { ...; p.Complete(); }
//     ...
//   };
//   auto process = walbus::Process::Define(std::move(sale));
//   walbus::Status s = bus->Subscribe((*process)->subscriber());
#ifndef WALBUS_PROCESS_H_
#define WALBUS_PROCESS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/event.h"
#include "walbus/export.h"
#include "walbus/operations.h"
#include "walbus/scope.h"
#include "walbus/status.h"
#include "walbus/subscriber.h"

namespace walbus {

class Bus;
class ProcessContext;

namespace internal {
struct ProcessRun;
}  // namespace internal

// One event type a process takes.
struct ProcessStep {
  // The event type, as SubscriberOptions::types lists it.
  std::string type;
  // An event of this type may start an instance when none runs for its key.
  bool starts = false;
  // The key of the instance an event belongs to; absent: its subject. The
  // key must be a valid subject (walbus/event.h): the instance's timeouts
  // are delivered under it. An event whose key is invalid is
  // dead-lettered.
  //
  // Instances are handled one event at a time in commit order when each
  // event's key is its subject (the default): that is the order of the
  // subject. With a key computed otherwise, events of different subjects
  // may reach one instance concurrently; their steps are then serialized
  // by a version check (the later is run again), in no promised order.
  std::function<std::string(const Event&)> correlate;
};

// What becomes of an event that finds no running instance for its key
// (none started, or it completed) and may not start one.
enum class UnmatchedPolicy : uint8_t {
  kIgnore,      // handled and counted (ProcessStats::unmatched), nothing else (default)
  kDeadLetter,  // dead-lettered, with the reason
};

// A handler's verdict is an Outcome, as a subscriber's: Done commits the
// step (state, effects, events, timeouts); any other drops all of it.
using ProcessHandler = std::function<Outcome(const Event&, ProcessContext&)>;

// Brings an instance's state, written under schema version `from` of the
// definition's state_type, forward to the current version: returns the
// new bytes. An error fails the step (retried, then dead-lettered).
using StateUpgrade = std::function<Result<std::string>(uint32_t from, std::string_view state)>;

// A process: its durable name, what it takes, and its handler.
struct ProcessDefinition {
  // Durable identity: 1..64 bytes of [a-z0-9-]. Its instances live under
  // it; it runs as the subscriber "process.<name>".
  std::string name;
  // The version of the definition new instances start under (>= 1). Each
  // instance keeps the version it started under, so that a handler
  // changed in a release can still finish the instances already running:
  // ProcessContext::DefinitionVersion. docs/processes.md.
  uint32_t version = 1;
  // The event types it takes; at least one must start an instance.
  std::vector<ProcessStep> steps;
  // Runs once per step. Required.
  ProcessHandler handler;
  // What becomes of an event that finds no running instance.
  UnmatchedPolicy on_unmatched = UnmatchedPolicy::kIgnore;
  // Retries of a failed step, as a subscriber's.
  RetryPolicy retry;
  // A type with a payload contract (EventContracts::RegisterSchema) the state must
  // verify against; its schema version is kept with the state. Empty:
  // the state is bytes the bus does not look into.
  std::string state_type;
  // Brings state of an older schema version of state_type forward before
  // the handler sees it. Absent: the handler sees it as stored
  // (ProcessContext::StateVersion says which).
  StateUpgrade upgrade_state;
};

// A named timeout of an instance.
struct ProcessTimeout {
  std::string name;                           // unique in its instance
  EventId id;                                 // the scheduled event that delivers it
  std::chrono::system_clock::time_point due;  // when it falls due (wall clock)
};

// One of the last events an instance handled.
struct ProcessEventHandled {
  EventId id;                                // the event's id
  uint64_t seq = 0;                          // its place in the outbox
  std::string type;                          // its type; a timeout's is its process's timeout type
  std::chrono::system_clock::time_point at;  // when the step committed
};

// A running instance, as stored.
struct ProcessInstance {
  std::string key;                                // the instance's key
  uint32_t definition_version = 0;                // the definition it started under
  uint32_t state_version = 0;                     // its state's schema version; 0 without a state_type
  std::string state;                              // as the last step set it
  std::chrono::system_clock::time_point started;  // when its first step committed
  std::chrono::system_clock::time_point updated;  // when its last step committed
  uint64_t events_handled = 0;                    // steps committed, timeouts included
  std::vector<ProcessTimeout> timeouts;           // pending, by name
  std::vector<ProcessEventHandled> recent;        // the last few handled, oldest first
};

// A page of instances in key order (ListProcessInstances).
struct ProcessPage {
  std::vector<ProcessInstance> instances;  // in key order
  // Pass as ProcessListOptions::resume_after for the next page; empty
  // when this page is the last.
  std::string resume_after;
};

// Which instances ListProcessInstances returns.
struct ProcessListOptions {
  size_t limit = 100;        // at most this many; 1..10000
  std::string resume_after;  // the previous page's resume_after
};

// What a process did over the life of the database: counts committed
// with the steps they count, so a step run again counts once.
struct ProcessStats {
  uint64_t started = 0;         // instances started
  uint64_t completed = 0;       // instances completed
  uint64_t abandoned = 0;       // instances an operator abandoned (OperatorActions::AbandonProcess)
  uint64_t running = 0;         // started, neither completed nor abandoned
  uint64_t unmatched = 0;       // events that found no instance, ignored
  uint64_t stale_timeouts = 0;  // timeouts delivered after they were replaced or cancelled, ignored
};

// A handler's view of its instance, besides the event: the state, the
// timeouts, completion, and the unit of work the step commits with.
//
// Threading: valid only inside the handler call, on the handler's thread.
class WALBUS_EXPORT ProcessContext {
 public:
  // Not copyable: a view of one step.
  // @{
  ProcessContext(const ProcessContext&) = delete;
  ProcessContext& operator=(const ProcessContext&) = delete;
  // @}

  // The instance's key.
  const std::string& Key() const;
  // This event starts the instance: there was none for its key.
  bool IsNew() const;
  // The definition version the instance started under (for a new
  // instance, the definition's).
  uint32_t DefinitionVersion() const;
  // The schema version of State() (after any upgrade); 0 without a
  // state_type, or while a new instance has no state.
  uint32_t StateVersion() const;
  // The instance's state: what the last step set (this step's SetState
  // included); empty for a new instance.
  const std::string& State() const;
  // Replaces the state, committed with the step. With a state_type, the
  // bytes must verify against its contract: otherwise InvalidArgument, and
  // the step fails at commit. At most 1 MiB.
  Status SetState(std::string state);

  // The name of the timeout this event delivers, or nullopt for an event
  // of a step type.
  const std::optional<std::string>& FiredTimeout() const;
  // The data the fired timeout was set with (empty otherwise).
  const std::string& TimeoutData() const;
  // Sets the timeout `name` (1..200 bytes) to fire `after` from now, or at
  // `at`, delivering `data` back to this instance; one set before under
  // that name is replaced in the same commit. It never fires once the
  // step that cancelled or replaced it committed, nor after Complete.
  // @{
  Status SetTimeout(std::string_view name, std::chrono::milliseconds after, std::string_view data = {});
  Status SetTimeoutAt(std::string_view name, std::chrono::system_clock::time_point at, std::string_view data = {});
  // @}
  // Cancels the timeout `name`; OK when none is set.
  Status CancelTimeout(std::string_view name);
  // The timeouts set, as this step leaves them.
  const std::vector<ProcessTimeout>& Timeouts() const;

  // Ends the instance with this step: its state is removed and its
  // timeouts cancelled. A later event for its key finds none (and may
  // start a new one).
  void Complete();

  // The step's unit of work: application reads and writes, follow-up
  // events, the idempotency key. All of it commits with the step.
  HandlerContext& Scope();

 private:
  friend struct internal::ProcessRun;
  explicit ProcessContext(internal::ProcessRun* run) : run_(run) {}
  internal::ProcessRun* run_;
};

// A defined process: the subscriber that runs it, and what it did.
//
// Threading: thread-safe.
class WALBUS_EXPORT Process {
 public:
  // Checks the definition: InvalidArgument naming what is wrong.
  [[nodiscard]] static Result<std::shared_ptr<Process>> Define(ProcessDefinition definition);

  // Not copyable: shared (Define gives a shared_ptr).
  // @{
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  // @}

  // The subscriber that runs the process: pass it to Bus::Subscribe (or a
  // test kit's).
  SubscriberOptions subscriber() const;
  // The definition's name.
  const std::string& name() const;

 private:
  struct Rep;
  explicit Process(std::shared_ptr<Rep> rep);
  std::shared_ptr<Rep> rep_;
};

// The running instance of process `name` under `key`, or nullopt when
// none runs (never started, or completed).
[[nodiscard]] WALBUS_EXPORT Result<std::optional<ProcessInstance>> ReadProcessInstance(Bus& bus, std::string_view name,
                                                                                       std::string_view key);
// What process `name` did (all zero for one that never ran).
[[nodiscard]] WALBUS_EXPORT Result<ProcessStats> ReadProcessStats(Bus& bus, std::string_view name);
// The running instances of process `name`, in key order, a page at a time.
[[nodiscard]] WALBUS_EXPORT Result<ProcessPage> ListProcessInstances(Bus& bus, std::string_view name,
                                                                     const ProcessListOptions& options = {});

}  // namespace walbus

#endif  // WALBUS_PROCESS_H_
