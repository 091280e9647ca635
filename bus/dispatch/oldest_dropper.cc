#include "bus/dispatch/oldest_dropper.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "bus/core/envelope.h"
#include "bus/core/schema_registry.h"
#include "bus/core/write_set.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

// Counters of the whole bus live under subscriber id 0 (storage/keys.h).
constexpr uint32_t kBusCounterId = 0;
// Entries one MakeRoom reads at most: a device whose outbox holds nothing
// it may drop is refused after a bounded look, not a scan of days.
constexpr size_t kMaxScan = size_t{1} << 16;
// The budget's share freed at least per MakeRoom: the next commits find
// room without a drop each.
constexpr uint64_t kDropShareOfBudget = 64;

}  // namespace

Status ReadDroppedByType(const storage::Db& db, std::map<std::string, uint64_t>* out) {
  out->clear();
  const std::string prefix = storage::CheckpointKey(kBusCounterId, storage::CheckpointField::kDroppedOfType);
  Status bad;
  Status s = db.Scan(storage::Cf::kCheckpoints, prefix, SIZE_MAX, [&](std::string_view key, std::string_view value) {
    uint64_t count = 0;
    if (!storage::DecodeCounter(value, &count)) {
      bad = Status::Corruption("dropped-events counter of " + std::to_string(value.size()) + " bytes");
      return false;
    }
    (*out)[std::string(key.substr(prefix.size()))] = count;
    return true;
  });
  return s.ok() ? bad : s;
}

OldestDropper::OldestDropper(Parts parts, std::vector<std::string> types) : parts_(parts), types_(std::move(types)) {
  assert(parts_.db != nullptr && parts_.committer != nullptr && parts_.disk_budget != nullptr &&
         parts_.source != nullptr && parts_.log != nullptr);
}

Status OldestDropper::Load() {
  std::map<std::string, uint64_t> counts;
  if (Status s = ReadDroppedByType(*parts_.db, &counts); !s.ok()) return s;
  MutexLock lock(&mu_);
  dropped_at_open_ = counts;
  dropped_by_type_ = std::move(counts);
  return Status::OK();
}

std::map<std::string, uint64_t> OldestDropper::DroppedByType() const {
  MutexLock lock(&mu_);
  return dropped_by_type_;
}

std::map<std::string, uint64_t> OldestDropper::DroppedSinceOpen() const {
  MutexLock lock(&mu_);
  std::map<std::string, uint64_t> since;
  for (const auto& [type, n] : dropped_by_type_) {
    auto at_open = dropped_at_open_.find(type);
    since[type] = n - (at_open == dropped_at_open_.end() ? 0 : at_open->second);
  }
  return since;
}

bool OldestDropper::Drops(std::string_view type) const {
  const std::string_view base = TypeBaseName(type);
  return std::any_of(types_.begin(), types_.end(), [&](const std::string& t) { return t == type || t == base; });
}

bool OldestDropper::Held(const std::vector<std::shared_ptr<Subscriber>>& subs, uint64_t seq) {
  for (const auto& sub : subs) {
    const Progress& p = sub->progress;
    if (seq > p.watermark() && seq < p.next()) return true;  // fetched, not completed
    if (sub->out_of_line.Contains(seq)) return true;         // a redrive or a replay runs it
    if (sub->replay != nullptr && sub->replay->in_flight.count(seq) != 0) return true;
  }
  return false;
}

uint64_t OldestDropper::MakeRoom(uint64_t bytes, uint64_t from, uint64_t up_to,
                                 const std::vector<std::shared_ptr<Subscriber>>& subs) {
  if (!enabled()) return 0;
  const uint64_t want = std::max(bytes, parts_.disk_budget->budget() / kDropShareOfBudget);
  std::vector<Victim> victims;
  Choose(want, from, up_to, subs, &victims);
  if (victims.empty()) return 0;
  if (Status s = Delete(victims, subs); !s.ok()) {
    parts_.log->logger().error("walbus: dropping {} events of drop-oldest types failed: {}", victims.size(),
                               s.ToString());
    return 0;
  }
  return Forget(victims);
}

uint64_t OldestDropper::ChooseReleased(uint64_t bytes, uint64_t from,
                                       const std::vector<std::shared_ptr<Subscriber>>& subs,
                                       std::vector<Victim>* victims) {
  uint64_t chosen = 0;
  for (auto it = held_.begin(); it != held_.end() && chosen < bytes;) {
    if (it->first < from) {  // trimmed
      it = held_.erase(it);
    } else if (Held(subs, it->first)) {
      ++it;
    } else {
      victims->push_back(Victim{it->first, it->second.bytes, std::move(it->second.type)});
      chosen += it->second.bytes;
      it = held_.erase(it);
    }
  }
  return chosen;
}

void OldestDropper::Choose(uint64_t bytes, uint64_t from, uint64_t up_to,
                           const std::vector<std::shared_ptr<Subscriber>>& subs, std::vector<Victim>* victims) {
  uint64_t chosen = ChooseReleased(bytes, from, subs, victims);
  cursor_ = std::max(cursor_, from);
  if (chosen >= bytes || cursor_ > up_to) return;
  const size_t key_bytes = storage::OutboxKey(0).size();
  Status s = parts_.db->ScanOutbox(cursor_, kMaxScan, [&](uint64_t seq, std::string_view envelope) {
    if (seq > up_to || chosen >= bytes) return false;
    cursor_ = seq + 1;
    Event event;
    // An entry that fails verification is the reader's to quarantine.
    if (!DecodeEnvelope(envelope, parts_.max_payload_bytes, &event).ok() || !Drops(event.type)) return true;
    if (Held(subs, seq)) {
      held_.emplace(seq, Passed{key_bytes + envelope.size(), std::move(event.type)});
      return true;
    }
    victims->push_back(Victim{seq, key_bytes + envelope.size(), std::move(event.type)});
    chosen += victims->back().bytes;
    return true;
  });
  if (!s.ok()) {  // what was chosen before the failure still goes
    parts_.log->logger().error("walbus: reading the outbox to drop the oldest events failed: {}", s.ToString());
  }
  // Oldest first: the released ones may be above some of the scanned.
  std::sort(victims->begin(), victims->end(), [](const Victim& a, const Victim& b) { return a.seq < b.seq; });
}

Status OldestDropper::Delete(const std::vector<Victim>& victims, const std::vector<std::shared_ptr<Subscriber>>& subs) {
  WriteSet scope;
  storage::CfHandle* outbox = parts_.db->cf(storage::Cf::kOutbox);
  storage::CfHandle* counters = parts_.db->cf(storage::Cf::kCheckpoints);
  std::map<std::string_view, uint64_t> by_type;
  for (const Victim& v : victims) {
    scope.Delete(outbox, storage::OutboxKey(v.seq));
    ++by_type[v.type];
  }
  for (const auto& [type, n] : by_type) {
    scope.AddCounter(counters, storage::CheckpointKey(kBusCounterId, storage::CheckpointField::kDroppedOfType, type),
                     n);
  }
  // A subscriber misses the events of its types it had not fetched.
  std::vector<std::pair<Subscriber*, uint64_t>> missed_by;
  for (const auto& sub : subs) {
    const auto missed = static_cast<uint64_t>(std::count_if(victims.begin(), victims.end(), [&](const Victim& v) {
      return v.seq >= sub->progress.next() && sub->Matches(v.type);
    }));
    if (missed == 0) continue;
    scope.AddCounter(counters, storage::CheckpointKey(sub->id, storage::CheckpointField::kDropped), missed);
    missed_by.emplace_back(sub.get(), missed);
  }
  // The deletions go in a level-0 table of their own. Flushed with newer
  // events, their table would span the outbox from the oldest events to
  // the newest, and its compaction would rewrite every table in between:
  // all of the outbox, its disk space twice. (A commit of another thread
  // between the flushes still lands with them; the next drop's table is
  // clean again.)
  if (Status s = parts_.db->FlushOutbox(); !s.ok()) return s;
  if (Status s = parts_.committer->CommitUnsynced(&scope); !s.ok()) return s;
  if (Status s = parts_.db->FlushOutbox(); !s.ok()) {
    parts_.log->logger().warn("walbus: flushing the outbox's dropped events failed: {}", s.ToString());
  }
  for (auto [sub, missed] : missed_by) sub->dropped.fetch_add(missed, std::memory_order_relaxed);
  return Status::OK();
}

uint64_t OldestDropper::Forget(const std::vector<Victim>& victims) {
  uint64_t freed = 0;
  std::map<std::string, uint64_t> by_type;
  for (const Victim& v : victims) {
    freed += parts_.disk_budget->NoteDropped(v.seq, v.bytes);
    parts_.source->Forget(v.seq);
    ++by_type[v.type];
  }
  std::string counts;
  {
    MutexLock lock(&mu_);
    for (const auto& [type, n] : by_type) {
      dropped_by_type_[type] += n;
      counts += (counts.empty() ? "" : ", ") + type + " " + std::to_string(n);
    }
  }
  parts_.log->logger().warn(
      "walbus: disk budget reached: dropped the {} oldest events of drop-oldest types (seqs {}..{}, "
      "{} bytes): {}",
      victims.size(), victims.front().seq, victims.back().seq, freed, counts);
  // Point deletions give their space back when a compaction reaches them:
  // of their own table and the few that held the events, in the
  // background.
  if (Status s = parts_.db->SuggestOutboxCompaction(victims.front().seq, victims.back().seq + 1); !s.ok()) {
    parts_.log->logger().warn("walbus: outbox compaction not scheduled: {}", s.ToString());
  }
  return freed;
}

}  // namespace walbus::internal
