// EventSource: where the dispatcher reads committed events from, cheapest
// first: the tail cache (what was just committed), the backlog window
// (what a subscriber behind the tail read from the outbox, for the others
// catching up over the same seqs), and the outbox. It frees what every
// subscriber has fetched.
//
// Threading: the dispatcher thread only (the tail cache it shares is
// thread-safe).
#ifndef WALBUS_BUS_DISPATCH_EVENT_SOURCE_H_
#define WALBUS_BUS_DISPATCH_EVENT_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/quarantine.h"
#include "bus/dispatch/backlog_window.h"
#include "bus/dispatch/tail_cache.h"
#include "bus/telemetry/log.h"
#include "storage/db.h"

namespace walbus::internal {

class EventSource {
 public:
  // What the events are read from and where unreadable ones go.
  // REQUIRES: each outlives this.
  struct Parts {
    storage::Db* db;
    const Committer* committer;  // what is committed
    TailCache* tail;
    Quarantine* quarantine;
    const BusLog* log;
  };
  // `window_events`, `window_bytes`: the backlog window's bounds;
  // `max_payload_bytes`: what a stored envelope may hold.
  EventSource(Parts parts, size_t window_events, size_t window_bytes, size_t max_payload_bytes);
  EventSource(const EventSource&) = delete;
  EventSource& operator=(const EventSource&) = delete;

  // Appends the slots of seqs `from`, from + 1, ..., at most `limit`: a
  // null slot is a seq with nothing to deliver (trimmed, or unreadable and
  // quarantined). False when the outbox could not be read (logged; what
  // was read before the failure is appended): the caller tries again
  // soon.
  bool Read(uint64_t from, size_t limit, std::vector<BacklogWindow::Slot>* out);
  // Frees what is below `lowest`, the next seq of the subscriber furthest
  // behind: every subscriber's queues hold what it fetched.
  void DropBelow(uint64_t lowest);
  // The event at `seq` was deleted (Options::drop_oldest_types): no read
  // returns it from here on.
  void Forget(uint64_t seq);

 private:
  // Reads the outbox, holding what it reads in the backlog window.
  bool ReadFromOutbox(uint64_t from, size_t limit, std::vector<BacklogWindow::Slot>* out);

  const Parts parts_;
  const size_t max_payload_bytes_;
  BacklogWindow backlog_;
  // The tail cache holds nothing below this.
  uint64_t tail_dropped_below_ = 0;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_EVENT_SOURCE_H_
