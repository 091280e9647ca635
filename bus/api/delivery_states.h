// DeliveryStates: where an event stands for a registered subscriber
// (Bus::EventStatus, WaitHandled, Pending), told from what storage holds:
// its inbox record, dead letter, retry record, the parked subjects, and the
// subscriber's watermark. Reads only.
//
// Threading: thread-safe (it reads storage and the subscriber's atomics).
// REQUIRES of every method: an admitted call (storage is open).
#ifndef WALBUS_BUS_API_DELIVERY_STATES_H_
#define WALBUS_BUS_API_DELIVERY_STATES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bus/dispatch/subscriber.h"
#include "storage/db.h"
#include "storage/records.h"
#include "walbus/bus.h"

namespace walbus::internal {

class DeliveryStates {
 public:
  // REQUIRES: db outlives it.
  DeliveryStates(const storage::Db* db, size_t max_payload_bytes) : db_(db), max_payload_bytes_(max_payload_bytes) {}

  // The state of event `id` for the subscriber `name` registered as
  // `entry`. `seq` is 0 when unknown (then completion cannot be told
  // without an inbox record).
  Status StateOf(std::string_view name, const Registry::Entry& entry, const EventId& id, uint64_t seq,
                 DeliveryState* out) const;
  // What the subscriber has not completed, in seq order, at most `limit`
  // (0: all): pending, retrying and paused events above its watermark, and
  // the events parked behind its dead letters.
  Result<std::vector<DeliveryState>> Pending(std::string_view name, const Registry::Entry& entry, uint64_t limit) const;

 private:
  // The seq of event `id` when it has a retry record of the subscriber's;
  // 0 when it has none.
  Status SeqOfRetrying(uint32_t subscriber_id, const EventId& id, uint64_t* seq) const;
  // *out (its seq set) as kParked when `letter` holds a parked subject's
  // later event, else kDeadLettered.
  Status ParkedOrDeadLettered(uint32_t subscriber_id, const storage::DeadLetterRecord& letter,
                              DeliveryState* out) const;
  // Appends the subscriber's parked events (kept in the dead-letter store).
  Status AddParked(std::string_view name, uint32_t subscriber_id, std::vector<DeliveryState>* out) const;

  const storage::Db* const db_;
  const size_t max_payload_bytes_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_DELIVERY_STATES_H_
