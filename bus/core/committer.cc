#include "bus/core/committer.h"

#include <algorithm>
#include <cassert>

#include "bus/core/fault_point.h"
#include "bus/core/timer_writes.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

constexpr size_t kMaxSummedCounters = 64;
// Short spins before sleeping, as the dispatcher's queues (QueueTraits).
constexpr int kWakerSpins = 64;
// The longest a synced write waits for its group to fill (see
// LingerForSyncedGroup); half the previous synced write's time otherwise.
constexpr std::chrono::microseconds kMaxSyncLinger{1000};

// Each thread sleeps on a semaphore of its own while a leader writes its
// requests. The leader signals it after releasing the queue's lock: a
// condition variable notified under the lock would wake the thread only to
// block it again on that lock.
const std::shared_ptr<Semaphore>& ThisThreadWaker() {
  thread_local const auto waker = std::make_shared<Semaphore>(kWakerSpins);
  return waker;
}

}  // namespace

Committer::Committer(storage::Db* db, CommitLimits limits, uint64_t last_seq, CommitListener* listener,
                     WalSyncer* wal_syncer, DiskBudget* disk_budget)
    : db_(db),
      limits_(limits),
      listener_(listener),
      wal_syncer_(wal_syncer),
      disk_budget_(disk_budget),
      last_seq_(last_seq) {
  assert(db_ != nullptr && listener_ != nullptr);
  assert(limits_.max_group_commits >= 1);
}

// The lock is let go and taken again along paths the thread-safety
// analysis cannot follow (a request may be done by the time this thread
// looks again); LeadGroup's REQUIRES(mu_) is checked where it is called.
void Committer::Commit(std::span<CommitRequest* const> requests) NO_THREAD_SAFETY_ANALYSIS {
  if (requests.empty()) return;
  const auto& waker = ThisThreadWaker();
  MutexLock lock(&mu_);
  for (CommitRequest* r : requests) {
    assert(r->writes != nullptr && !r->done.load(std::memory_order_relaxed));
    r->waker = waker;
    queue_.push_back(r);
  }
  if (lingering_leader_ != nullptr && queue_.size() >= synced_group_target_) {
    std::shared_ptr<Semaphore> leader = std::move(lingering_leader_);
    lingering_leader_.reset();
    lock.Unlock();
    leader->Signal();
  }
  // Our requests are contiguous in the queue, so the first one not done is
  // either at the front (we lead) or behind someone else's. A wake-up
  // means done or at the front; a stale one (a signal meant for an earlier
  // wait) costs one more look. A thread woken because its request is done
  // returns without the lock.
  for (CommitRequest* r : requests) {
    while (!r->done.load(std::memory_order_acquire)) {
      if (!lock.holds()) {
        lock.Lock();
        continue;  // done meanwhile?
      }
      if (queue_.front() == r) {
        LeadGroup();
        continue;
      }
      lock.Unlock();
      waker->Wait();
    }
  }
}

Status Committer::CommitOne(WriteSet* writes, bool sync, uint64_t* first_seq) {
  CommitRequest request;
  request.writes = writes;
  request.sync = sync;
  CommitRequest* requests[] = {&request};
  Commit(requests);
  if (first_seq != nullptr) *first_seq = request.first_seq;
  return request.status;
}

Status Committer::CommitUnsynced(WriteSet* writes) {
  CommitRequest request;
  request.writes = writes;
  request.unsynced_group = true;
  CommitRequest* requests[] = {&request};
  Commit(requests);
  return request.status;
}

std::map<std::string, uint64_t> Committer::PublishedByType() const {
  MutexLock lock(&types_mu_);
  return published_by_type_;
}

void Committer::LingerForSyncedGroup() {
  if (queue_.size() >= synced_group_target_) return;
  if (std::none_of(queue_.begin(), queue_.end(), [](const CommitRequest* r) { return r->sync; })) return;
  const auto budget = std::min(last_synced_write_ / 2, kMaxSyncLinger);
  const auto deadline = std::chrono::steady_clock::now() + budget;
  const auto& self = ThisThreadWaker();
  lingering_leader_ = self;
  while (queue_.size() < synced_group_target_ && std::chrono::steady_clock::now() < deadline) {
    mu_.Unlock();
    // Signalled by the arrival that completes the group. (A monotonic
    // wait: a wall clock stepped back meanwhile does not stretch it.)
    (void)self->WaitUntil(deadline);
    mu_.Lock();
  }
  lingering_leader_.reset();
}

void Committer::LeadGroup() {
  // A synced request behind an unsynced group's leader gets a leader of
  // its own, who lingers for the others if it should.
  const bool unsynced = queue_.front()->unsynced_group;
  assert(!unsynced || !queue_.front()->sync);
  if (!unsynced) LingerForSyncedGroup();
  std::vector<CommitRequest*> group;
  size_t bytes = 0;
  for (CommitRequest* r : queue_) {
    if (unsynced && r->sync) break;
    if (!group.empty() &&
        (group.size() >= limits_.max_group_commits || bytes + r->writes->bytes > limits_.max_group_bytes)) {
      break;
    }
    group.push_back(r);
    bytes += r->writes->bytes;
  }
  const auto started = std::chrono::steady_clock::now();
  mu_.Unlock();
  const bool fsynced = WriteGroup(group);
  mu_.Lock();
  if (fsynced) {
    // Everyone who committed while this write lasted will commit again
    // soon: the next synced write waits for as many requests. (The group
    // itself is still at the queue's front.) Requests, not threads: a
    // worker's batch of completions counts as many, so beside a busy
    // handler the next synced write waits out its budget. Counting threads
    // instead was measured: end to end under kSync lost 10-15% (smaller
    // groups, more fsyncs) and latency did not improve.
    synced_group_target_ = std::min(queue_.size(), limits_.max_group_commits);
    last_synced_write_ =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
  }
  const auto& self = ThisThreadWaker();
  std::vector<std::shared_ptr<Semaphore>> wake;
  wake.reserve(group.size() + 1);
  // One signal per other thread: a caller's requests are contiguous.
  auto wake_later = [&](const std::shared_ptr<Semaphore>& w) {
    if (w != self && (wake.empty() || wake.back() != w)) wake.push_back(w);
  };
  for (CommitRequest* r : group) {
    assert(queue_.front() == r);
    queue_.pop_front();
    wake_later(r->waker);  // taken before `done`: once it is set, the request may be gone
    r->done.store(true, std::memory_order_release);
  }
  if (!queue_.empty()) wake_later(queue_.front()->waker);  // the next leader
  mu_.Unlock();
  for (const auto& w : wake) w->Signal();
  mu_.Lock();
}

Status Committer::CheckExpectations(const WriteSet& writes) {
  for (const Expectation& e : writes.expects) {
    uint64_t current = 0;
    auto it = group_versions_.find(e.version_key);
    if (it != group_versions_.end()) {
      current = it->second;
    } else {
      std::string value;
      bool found = false;
      Status s = db_->Get(db_->cf(storage::Cf::kVersions), e.version_key, &value, &found);
      if (!s.ok()) return s;
      if (found) {
        if (value.size() != 8) return Status::Corruption("version record of " + e.description);
        current = storage::GetBe64(value);
      }
    }
    if (current != e.version && e.timer_state) return TimerStateConflict(e.description, current);
    if (current != e.version) {
      return Status::Conflict(e.description + " expected version " + std::to_string(e.version) + ", found " +
                              std::to_string(current));
    }
  }
  return Status::OK();
}

void Committer::AddToCounter(const Op& op) {
  // A group touches a handful of counters: a linear search beats hashing.
  for (CounterSum& c : group_counters_) {
    if (c.cf == op.cf && c.key == op.key) {
      c.delta += op.delta;
      return;
    }
  }
  if (group_counters_.size() >= kMaxSummedCounters) {
    // Unusual: many distinct counters. Merged; its known value is stale.
    batch_.AddCounter(op.cf, op.key, op.delta);
    auto known = counter_values_.find(op.cf);
    if (known != counter_values_.end()) {
      auto it = known->second.find(op.key);
      if (it != known->second.end()) known->second.erase(it);
    }
    return;
  }
  group_counters_.push_back(CounterSum{.cf = op.cf, .key = op.key, .delta = op.delta});
}

void Committer::AddCounterWrite(CounterSum* sum) {
  auto& values = counter_values_[sum->cf];
  auto it = values.find(sum->key);
  if (it == values.end()) {
    std::string stored;
    bool found = false;
    uint64_t current = 0;
    if (!db_->Get(sum->cf, sum->key, &stored, &found).ok() || (found && !storage::DecodeCounter(stored, &current))) {
      batch_.AddCounter(sum->cf, sum->key, sum->delta);  // storage sums it, as before
      return;
    }
    it = values.emplace(sum->key, current).first;
  }
  sum->value = it->second + sum->delta;  // wraps as the merge does: a delta may be -1
  sum->known = &it->second;
  batch_.Put(sum->cf, sum->key, storage::EncodeCounter(sum->value));
}

void Committer::AddToBatch(CommitRequest* r, uint64_t* next) {
  WriteSet& writes = *r->writes;
  for (const Op& op : writes.ops) {
    switch (op.kind) {
      case Op::Kind::kPut: batch_.Put(op.cf, op.key, op.value); break;
      case Op::Kind::kDelete: batch_.Delete(op.cf, op.key); break;
      case Op::Kind::kAddCounter: AddToCounter(op); break;
      case Op::Kind::kDeleteRange: batch_.DeleteRange(op.cf, op.key, op.value); break;
    }
  }
  for (const Expectation& e : writes.expects) {
    std::string v;
    storage::PutBe64(&v, e.Next());
    batch_.Put(db_->cf(storage::Cf::kVersions), e.version_key, v);
    group_versions_[e.version_key] = e.Next();
  }
  r->first_seq = writes.events.empty() ? 0 : *next;
  for (size_t i = 0; i < writes.events.size(); ++i) {
    writes.events[i]->seq = *next;
    const std::string key = storage::OutboxKey(*next);
    batch_.Put(db_->cf(storage::Cf::kOutbox), key, writes.envelopes[i]);
    group_outbox_bytes_ += key.size() + writes.envelopes[i].size();
    group_events_.push_back(writes.events[i]);
    ++*next;
  }
  group_timers_.insert(group_timers_.end(), writes.timers.begin(), writes.timers.end());
}

bool Committer::WriteGroup(const std::vector<CommitRequest*>& group) {
  batch_.Clear();
  group_versions_.clear();
  group_events_.clear();
  group_timers_.clear();
  group_outbox_bytes_ = 0;
  group_counters_.clear();
  const uint64_t first = last_seq_.load(std::memory_order_relaxed) + 1;
  uint64_t next = first;
  bool sync = false;
  size_t accepted = 0;
  for (CommitRequest* r : group) {
    WriteSet& writes = *r->writes;
    // `after` came earlier in the queue, so its status is final (a failed
    // write of this group later fails both).
    r->status = r->after != nullptr && !r->after->status.ok()
                    ? Status::Conflict("the commit it was made on top of failed")
                    : CheckExpectations(writes);
    if (!r->status.ok()) continue;
    ++accepted;
    AddToBatch(r, &next);
    sync |= r->sync;
  }
  if (accepted == 0) return false;
  for (CounterSum& c : group_counters_) AddCounterWrite(&c);
  WALBUS_FAULT_POINT("commit.before_write");
  const auto started = std::chrono::steady_clock::now();
  Status written = batch_.Commit(db_, sync);
  write_seconds_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  WALBUS_FAULT_POINT("commit.after_write");
  writes_failing_.store(!written.ok(), std::memory_order_relaxed);
  if (!written.ok()) {
    counter_values_.clear();
    (written.IsResourceExhausted() ? no_space_failures_ : other_write_failures_)
        .fetch_add(1, std::memory_order_relaxed);
    for (CommitRequest* r : group)
      if (r->status.ok()) r->status = written;
    return false;
  }
  if (!sync && wal_syncer_ != nullptr) wal_syncer_->NoteUnsyncedWrite();
  for (const CounterSum& c : group_counters_) {
    if (c.known != nullptr) *c.known = c.value;
  }
  commits_.fetch_add(accepted, std::memory_order_relaxed);
  groups_.fetch_add(1, std::memory_order_relaxed);
  group_sizes_.Observe(static_cast<double>(accepted));
  if (!group_events_.empty()) {
    MutexLock lock(&types_mu_);
    for (const auto& e : group_events_) ++published_by_type_[e->type];
  }
  if (!group_timers_.empty()) listener_->OnTimersChanged(group_timers_);
  if (next != first) {
    if (disk_budget_ != nullptr) disk_budget_->NoteCommitted(first, next - 1, group_outbox_bytes_);
    last_seq_.store(next - 1, std::memory_order_release);
    listener_->OnCommitted(group_events_);
  }
  return sync;
}

}  // namespace walbus::internal
