// Replays (OperatorActions::StartReplay): the request made durable as a record, and which
// events it selects. The running part is ReplayDriver's
// (bus/dispatch/replay_driver.h), on the dispatcher thread.
#ifndef WALBUS_BUS_DISPATCH_REPLAY_H_
#define WALBUS_BUS_DISPATCH_REPLAY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>

#include "bus/core/write_set.h"
#include "bus/dispatch/subscriber.h"
#include "storage/db.h"
#include "storage/records.h"
#include "walbus/bus.h"

namespace walbus::internal {

// Checks a request and turns it into the record of a new replay over the
// seqs from its from_seq up to min(to_seq, checkpoint). `handler_version`
// is the subscriber's. InvalidArgument for a bad request.
Status RecordFromRequest(const ReplayRequest& request, uint32_t subscriber_id, uint64_t checkpoint,
                         const std::string& handler_version, uint64_t now_ms, storage::ReplayRecord* record);

// What a stored record reports.
ReplayReport ReportFromRecord(uint64_t replay_id, const storage::ReplayRecord& record);

// The replay has not ended (neither done nor cancelled).
inline bool IsRunning(const storage::ReplayRecord& record) {
  return record.state == static_cast<uint8_t>(ReplayState::kRunning);
}

// The record's ids, as a set for lookups.
std::unordered_set<std::string> SelectedIds(const storage::ReplayRecord& record);

// Whether the record's filters (times, types, subject, ids) take `event`;
// the seq range is the caller's to walk.
bool ReplaySelects(const storage::ReplayRecord& record, const std::unordered_set<std::string>& ids, const Event& event);

// Adds the write of the running replay's record to `writes` when it
// changed since it was written.
void AddReplayRecord(storage::Db* db, WriteSet* writes, ReplayJob* job);

// Visits every replay record stored (ended ones too), by id.
Status LoadReplays(const storage::Db& db, const std::function<void(uint64_t id, storage::ReplayRecord&)>& visit);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_REPLAY_H_
