// Reading a database's walbus state back: the last sequence number, the
// trimmed point and every registered subscriber with its durable progress.
// Used on Open and by the read-only inspection of the command-line tool.
#ifndef WALBUS_BUS_DISPATCH_RECOVERY_H_
#define WALBUS_BUS_DISPATCH_RECOVERY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bus/dispatch/subscriber.h"
#include "storage/db.h"

namespace walbus::internal {

struct RecoveredState {
  uint64_t last_seq = 0;
  uint64_t trimmed_below = 0;  // the outbox holds nothing below it
  uint32_t next_subscriber_id = 1;
  std::map<std::string, Registry::Entry, std::less<>> subscribers;  // `active` unset
  // OperatorActions::RemoveSubscriber's, and those of them whose inbox
  // records may not all be deleted yet.
  // @{
  std::vector<uint32_t> removed_subscriber_ids;
  std::vector<uint32_t> removed_with_inbox_left;
  // @}
};

// Corruption when a record has a bad size or the records disagree (an
// outbox entry or a checkpoint above the last seq).
Status ReadRecoveredState(const storage::Db& db, RecoveredState* state);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_RECOVERY_H_
