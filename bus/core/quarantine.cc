#include "bus/core/quarantine.h"

#include "bus/core/write_set.h"
#include "bus/util/log_limiter.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "walbus/clock.h"

namespace walbus::internal {
namespace {

// Counters live with the subscribers' in the checkpoints column family,
// under subscriber id 0, which no subscriber has.
constexpr uint32_t kQuarantineCounterId = 0;
constexpr auto kAddedField = storage::CheckpointField::kQuarantined;
constexpr auto kEvictedField = storage::CheckpointField::kQuarantineEvicted;

}  // namespace

Quarantine::Quarantine(storage::Db* db, Committer* committer, const Clock* clock, const BusLog* log, size_t max_entries,
                       size_t max_bytes)
    : db_(db),
      committer_(committer),
      clock_(clock),
      log_(log),
      max_entries_(std::max<size_t>(1, max_entries)),
      max_bytes_(std::max<size_t>(1, max_bytes)) {}

Status Quarantine::Load() {
  MutexLock lock(&mu_);
  // The scan calls back on this thread, with mu_ held.
  Status s = db_->Scan(storage::Cf::kQuarantine, {}, SIZE_MAX,
                       [&](std::string_view key, std::string_view value) REQUIRES(mu_) {
                         uint64_t arrival = 0;
                         if (storage::ParseQuarantineKey(key, &arrival)) {
                           entries_.push_back({arrival, value.size()});
                           bytes_ += value.size();
                           next_arrival_ = arrival + 1;
                         }
                         return true;
                       });
  if (!s.ok()) return s;
  for (auto [field, counter] : {std::pair{kAddedField, &added_}, std::pair{kEvictedField, &evicted_}}) {
    std::string v;
    bool found = false;
    s = db_->Get(db_->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(kQuarantineCounterId, field), &v, &found);
    if (!s.ok()) return s;
    uint64_t n = 0;
    if (found && storage::DecodeCounter(v, &n)) counter->store(n);
  }
  added_at_open_ = added_.load();
  evicted_at_open_ = evicted_.load();
  return Status::OK();
}

Status Quarantine::Add(std::string_view raw, std::string_view source, std::string_view reason) {
  storage::QuarantineRecord record;
  record.arrived_ms = ToUnixMillisUnsigned(clock_->WallNow());
  record.original_bytes = raw.size();
  record.source = std::string(source.substr(0, 256));
  record.reason = std::string(reason.substr(0, storage::kMaxErrorBytes));
  record.raw = std::string(raw.substr(0, storage::kMaxQuarantineRawBytes));
  const std::string value = storage::EncodeQuarantine(record);

  MutexLock lock(&mu_);
  WriteSet scope;
  storage::CfHandle* cf = db_->cf(storage::Cf::kQuarantine);
  size_t evict = 0;
  size_t bytes = bytes_;
  while (evict < entries_.size() && (entries_.size() - evict + 1 > max_entries_ || bytes + value.size() > max_bytes_)) {
    bytes -= entries_[evict].bytes;
    scope.Delete(cf, storage::QuarantineKey(entries_[evict].arrival));
    ++evict;
  }
  const uint64_t arrival = next_arrival_;
  scope.Put(cf, storage::QuarantineKey(arrival), value);
  storage::CfHandle* counters = db_->cf(storage::Cf::kCheckpoints);
  scope.AddCounter(counters, storage::CheckpointKey(kQuarantineCounterId, kAddedField), 1);
  if (evict > 0) {
    scope.AddCounter(counters, storage::CheckpointKey(kQuarantineCounterId, kEvictedField), evict);
  }
  if (Status s = committer_->CommitOne(&scope, /*sync=*/false); !s.ok()) return s;
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(evict));
  entries_.push_back({arrival, value.size()});
  bytes_ = bytes + value.size();
  next_arrival_ = arrival + 1;
  added_.fetch_add(1, std::memory_order_relaxed);
  evicted_.fetch_add(evict, std::memory_order_relaxed);
  static LogLimiter limiter(10);
  if (uint64_t held = 0; limiter.Allow(&held)) {
    log_->logger().warn("walbus: quarantined {} bytes from {}: {} ({} similar lines held back)", raw.size(),
                        record.source, record.reason, held);
  }
  return Status::OK();
}

}  // namespace walbus::internal
