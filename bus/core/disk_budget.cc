#include "bus/core/disk_budget.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>
#include <utility>

namespace walbus::internal {
namespace {

constexpr uint64_t kMeasuresPerBudget = 64;

// The kinds storage measures whole.
void MeasureStores(const storage::Db& db, DiskUse* use) {
  use->dead_letters = db.CfBytes(storage::Cf::kDeadLetters);
  use->quarantine = db.CfBytes(storage::Cf::kQuarantine);
  use->scheduled = db.CfBytes(storage::Cf::kTimers);
  use->log = db.LogBytes();
}

}  // namespace

uint64_t MaxLogBytes(uint64_t budget) {
  if (budget == 0) return storage::kDefaultMaxLogBytes;
  return std::clamp(budget / 16, kMinLogBound, storage::kDefaultMaxLogBytes);
}

DiskUse MeasureDiskUse(const storage::Db& db, uint64_t trimmed_below) {
  DiskUse use;
  use.outbox = db.OutboxBytesFrom(trimmed_below);
  MeasureStores(db, &use);
  return use;
}

void WriteDiskUseMetrics(MetricsWriter& w, const DiskUse& use) {
  w.Family("walbus_disk_use_bytes", MetricType::kGauge,
           "What Options::disk_budget bounds, by kind: outbox (from its trim point), dead_letters, quarantine, "
           "scheduled, log (the write-ahead log's files).");
  const std::pair<const char*, uint64_t> kinds[] = {{"outbox", use.outbox},
                                                    {"dead_letters", use.dead_letters},
                                                    {"quarantine", use.quarantine},
                                                    {"scheduled", use.scheduled},
                                                    {"log", use.log}};
  for (const auto& [kind, bytes] : kinds) {
    w.Sample("walbus_disk_use_bytes", MetricsWriter::Label("kind", kind), static_cast<double>(bytes));
  }
}

DiskBudget::DiskBudget(storage::Db* db, uint64_t budget, uint64_t trimmed_below, uint64_t last_seq)
    : db_(db), budget_(budget), remeasure_every_(std::max<uint64_t>(1, budget / kMeasuresPerBudget)) {
  if (last_seq < trimmed_below) return;  // an empty outbox
  const uint64_t at_open = db_->OutboxBytesFrom(trimmed_below);
  MutexLock lock(&mu_);
  outbox_blocks_[last_seq >> kSeqsPerBlockShift] = Block{trimmed_below, last_seq, at_open};
  outbox_bytes_ = at_open;
}

void DiskBudget::NoteCommitted(uint64_t first_seq, uint64_t last_seq, uint64_t bytes) {
  assert(first_seq <= last_seq);
  MutexLock lock(&mu_);
  auto [it, fresh] = outbox_blocks_.try_emplace(last_seq >> kSeqsPerBlockShift, Block{first_seq, last_seq, 0});
  assert(fresh || first_seq > it->second.last);
  it->second.last = last_seq;
  it->second.bytes += bytes;
  outbox_bytes_ += bytes;
}

uint64_t DiskBudget::NoteOutboxTrimmed(uint64_t seq) {
  MutexLock lock(&mu_);
  const uint64_t before = outbox_bytes_;
  while (!outbox_blocks_.empty() && outbox_blocks_.begin()->second.first < seq) {
    Block& b = outbox_blocks_.begin()->second;
    if (b.last < seq) {  // passed whole
      outbox_bytes_ -= b.bytes;
      outbox_blocks_.erase(outbox_blocks_.begin());
      continue;
    }
    // The trim ends in it: its seqs below `seq` go, their share of its
    // bytes with them (its events taken as alike in size).
    const uint64_t freed = static_cast<uint64_t>(static_cast<double>(b.bytes) * static_cast<double>(seq - b.first) /
                                                 static_cast<double>(b.last - b.first + 1));
    b.bytes -= freed;
    outbox_bytes_ -= freed;
    b.first = seq;
    break;
  }
  return before - outbox_bytes_;
}

uint64_t DiskBudget::NoteDropped(uint64_t seq, uint64_t bytes) {
  MutexLock lock(&mu_);
  // The block holding `seq` is the first that ends at or after it (their
  // ranges ascend), when that one begins at or before it.
  auto it = outbox_blocks_.lower_bound(seq >> kSeqsPerBlockShift);
  while (it != outbox_blocks_.end() && it->second.last < seq) ++it;
  if (it == outbox_blocks_.end() || it->second.first > seq) return 0;
  const uint64_t freed = std::min(bytes, it->second.bytes);
  it->second.bytes -= freed;
  outbox_bytes_ -= freed;
  return freed;
}

DiskUse DiskBudget::MeasureLocked() {
  DiskUse use;
  use.outbox = outbox_bytes_;
  MeasureStores(*db_, &use);
  return use;
}

DiskUse DiskBudget::Measure() {
  MutexLock lock(&mu_);
  return MeasureLocked();
}

double DiskBudget::SecondsToFull(const DiskUse& use, std::chrono::steady_clock::time_point now) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  MutexLock lock(&mu_);
  if (!window_start_) {
    window_start_.emplace(now, use.total());
  } else if (now - window_start_->first >= kRateWindow) {
    const double seconds = std::chrono::duration<double>(now - window_start_->first).count();
    bytes_per_second_ = (static_cast<double>(use.total()) - static_cast<double>(window_start_->second)) / seconds;
    window_start_.emplace(now, use.total());
  }
  if (budget_ == 0) return kNever;
  if (use.total() >= budget_) return 0;
  if (bytes_per_second_ <= 0) return kNever;
  return static_cast<double>(budget_ - use.total()) / bytes_per_second_;
}

Status DiskBudget::Admit(uint64_t bytes, bool count_refusal, uint64_t* short_by) {
  if (budget_ == 0) return Status::OK();
  MutexLock lock(&mu_);
  // The outbox as counted now, the stores as last measured.
  const auto used = [&]() REQUIRES(mu_) {
    return outbox_bytes_ + measured_.dead_letters + measured_.quarantine + measured_.scheduled + measured_.log;
  };
  // Before a refusal, a measure older than kFreshMeasure: an application
  // that retries a refused commit in a loop does not walk storage each
  // time.
  // The clock is read only then: an admitted commit does not pay for it.
  const bool due = !measured_at_ || admitted_since_ >= remeasure_every_;
  if (due || (used() + bytes > budget_ && std::chrono::steady_clock::now() - *measured_at_ >= kFreshMeasure)) {
    measured_ = MeasureLocked();
    admitted_since_ = 0;
    measured_at_ = std::chrono::steady_clock::now();
  }
  if (used() + bytes <= budget_) {
    admitted_since_ += bytes;
    return Status::OK();
  }
  if (count_refusal) CountRefusal();
  if (short_by != nullptr) *short_by = used() + bytes - budget_;
  return Status::ResourceExhausted(
      "disk budget of " + std::to_string(budget_) + " bytes reached (outbox " + std::to_string(outbox_bytes_) +
      ", dead letters " + std::to_string(measured_.dead_letters) + ", quarantine " +
      std::to_string(measured_.quarantine) + ", scheduled " + std::to_string(measured_.scheduled) +
      ", write-ahead log " + std::to_string(measured_.log) + "); a commit adding " + std::to_string(bytes) +
      " bytes of events was refused and wrote nothing");
}

}  // namespace walbus::internal
