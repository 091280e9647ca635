#include "bus/dispatch/retention.h"

#include <algorithm>
#include <cassert>
#include <optional>
#include <string>

#include "bus/core/envelope.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

// Entries read to learn the mean entry size (Options::retain_bytes).
constexpr uint64_t kSizeSamples = 16;

// The smallest seq in [lo, hi) for which `keep(seq)` holds, given that it
// holds for every seq above one where it holds; hi when none.
template <typename Keep>
uint64_t FirstKept(uint64_t lo, uint64_t hi, Keep keep) {
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (keep(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The time of the outbox's event at `seq` into *time: nullopt when the
// entry is missing or unreadable. An error only when storage fails.
Status ReadEventTime(const storage::Db& db, uint64_t seq, size_t max_payload_bytes,
                     std::optional<std::chrono::system_clock::time_point>* time) {
  time->reset();
  std::string bytes;
  bool found = false;
  if (Status s = db.Get(db.cf(storage::Cf::kOutbox), storage::OutboxKey(seq), &bytes, &found); !s.ok()) return s;
  Event event;
  if (found && DecodeEnvelope(bytes, max_payload_bytes, &event).ok()) *time = event.time;
  return Status::OK();
}

}  // namespace

uint64_t RetentionFloor(const storage::Db& db, const RetentionPolicy& policy, uint64_t trimmed_below, uint64_t safe,
                        std::chrono::system_clock::time_point now, size_t max_payload_bytes) {
  assert(trimmed_below <= safe);
  if (policy.keeps_nothing()) return safe;
  // Each limit set removes what lies beyond it: the floor is the highest.
  uint64_t floor = trimmed_below;
  if (policy.events > 0) floor = std::max(floor, safe > policy.events ? safe - policy.events : 0);
  if (policy.age.count() > 0) {
    const auto cutoff = now - policy.age;
    floor = std::max(floor, FirstKept(floor, safe, [&](uint64_t seq) {
                       std::optional<std::chrono::system_clock::time_point> time;
                       if (!ReadEventTime(db, seq, max_payload_bytes, &time).ok()) return true;
                       // A missing or unreadable entry tells nothing: judge it by the next.
                       return time.has_value() && *time >= cutoff;
                     }));
  }
  if (policy.bytes > 0 && floor < safe) {
    // Storage's own size estimates of recent (in-memory) entries are off
    // by an order of magnitude; the entries themselves are not. The mean
    // size of a sample spread over the range sets how many fit.
    const uint64_t span = safe - floor;
    uint64_t sampled_bytes = 0, sampled = 0;
    for (uint64_t i = 0; i < kSizeSamples; ++i) {
      std::string bytes;
      bool found = false;
      const uint64_t seq = floor + span * i / kSizeSamples;
      if (db.Get(db.cf(storage::Cf::kOutbox), storage::OutboxKey(seq), &bytes, &found).ok() && found) {
        sampled_bytes += sizeof(uint64_t) + bytes.size();
        ++sampled;
      }
    }
    if (sampled > 0) {
      const uint64_t fit = policy.bytes / std::max<uint64_t>(1, sampled_bytes / sampled);
      floor = std::max(floor, safe > fit ? safe - fit : 0);
    }
  }
  return std::min(floor, safe);
}

std::optional<std::chrono::system_clock::time_point> AgesOutAt(const storage::Db& db, const RetentionPolicy& policy,
                                                               uint64_t oldest_kept, size_t max_payload_bytes) {
  assert(policy.age.count() > 0);
  std::optional<std::chrono::system_clock::time_point> time;
  if (!ReadEventTime(db, oldest_kept, max_payload_bytes, &time).ok() || !time) return std::nullopt;
  return *time + policy.age;
}

InboxWindow::InboxWindow(std::chrono::milliseconds window, const Clock* clock) : window_(window), clock_(clock) {
  assert(window_.count() > 0 && clock_ != nullptr);
}

void InboxWindow::SetCheckpoint(uint32_t subscriber_id, uint64_t checkpoint) {
  MutexLock lock(&mu_);
  checkpoints_[subscriber_id] = checkpoint;
}

void InboxWindow::Forget(uint32_t subscriber_id) { SetCheckpoint(subscriber_id, kRemoved); }

bool InboxWindow::MayDrop(uint32_t subscriber_id, uint64_t seq, uint64_t handled_unix_ms) const {
  uint64_t checkpoint = 0;
  {
    MutexLock lock(&mu_);
    auto it = checkpoints_.find(subscriber_id);
    if (it == checkpoints_.end()) return false;
    checkpoint = it->second;
  }
  if (checkpoint == kRemoved) return true;
  const int64_t cutoff_ms = ToUnixMillis(clock_->WallNow()) - window_.count();
  if (cutoff_ms <= 0 || handled_unix_ms >= static_cast<uint64_t>(cutoff_ms)) return false;  // inside the window
  return seq <= checkpoint;
}

}  // namespace walbus::internal
