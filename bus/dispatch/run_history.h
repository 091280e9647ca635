// What memory knows of an event's earlier handler runs, for one subscriber.
//
// One value with one meaning wherever it travels: the event's key queue
// keeps it between runs (KeyQueueHead), the WorkItem carries it into a run,
// and a run that is to run again (kRetry, kWait, kRerun) answers with the
// history the next run starts from (Message::next), which the queue keeps.
//
// Threading: a plain value, copied between the dispatcher thread and the
// workers with the item or message that holds it.
#ifndef WALBUS_BUS_DISPATCH_RUN_HISTORY_H_
#define WALBUS_BUS_DISPATCH_RUN_HISTORY_H_

#include <cstdint>

namespace walbus::internal {

struct RunHistory {
  uint32_t runs = 0;              // runs charged to the event so far; the next is attempt runs + 1
  uint32_t conflict_reruns = 0;   // consecutive effect conflicts of the current attempt
  uint64_t first_failure_ms = 0;  // wall clock; 0 before any failure
  bool check_stored = false;      // an inbox or retry record may exist: look before running

  uint32_t attempt() const { return runs + 1; }

  // A run that starts afresh: nothing stored to look for, nothing charged.
  bool Fresh() const { return runs == 0 && conflict_reruns == 0 && !check_stored; }

  // This attempt failed and counts. `outcome_unknown`: its commit may or
  // may not have happened, so the next run looks at what is stored first.
  RunHistory Failed(bool outcome_unknown) const { return {runs + 1, 0, first_failure_ms, outcome_unknown}; }
  // This attempt could not start (reading or recording stored state
  // failed): the same attempt again, looking at what is stored first.
  RunHistory NotRun() const { return {runs, 0, first_failure_ms, true}; }
  // The attempt's effects conflicted with a concurrent update: not a
  // failure, so the rerun keeps its number. Its commit wrote nothing.
  RunHistory Conflicted() const { return {runs, conflict_reruns + 1, first_failure_ms, false}; }
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_RUN_HISTORY_H_
