// Inspect: a read-only report on a walbus database, from a stopped
// database or one a running process holds (through a RocksDB secondary
// instance, which never takes the lock and never writes).
#ifndef WALBUS_BUS_INSPECT_H_
#define WALBUS_BUS_INSPECT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "walbus/status.h"

namespace walbus::internal {

struct SubscriberReport {
  std::string name;
  uint32_t id = 0;
  uint64_t checkpoint = 0;
  uint64_t lag_events = 0;  // last_seq - checkpoint
  uint64_t handled = 0;
  uint64_t duplicates = 0;
  uint64_t rejected = 0;
};

struct DatabaseReport {
  std::string dir;
  uint64_t last_seq = 0;
  uint64_t trimmed_below = 0;
  // Events not yet passed by every subscriber.
  uint64_t outbox_backlog = 0;
  // Age of the oldest of those, in milliseconds; nullopt when none.
  std::optional<int64_t> oldest_backlog_age_ms;
  std::vector<SubscriberReport> subscribers;
};

// NotFound for a missing directory; InvalidArgument for one that is not a
// walbus database; other errors as storage reports them.
Status InspectDatabase(const std::string& dir, DatabaseReport* report);

// The report as one JSON object, or as aligned human-readable lines.
std::string ReportJson(const DatabaseReport& report);
std::string ReportText(const DatabaseReport& report);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_INSPECT_H_
