#include "bus/dispatch/worker_pool.h"

#include <pthread.h>

#include <cassert>
#include <span>

namespace walbus::internal {
namespace {

// The pool whose worker this thread is: set once, when it starts.
// (threads_ itself may be being filled by Start() on another thread.)
thread_local const WorkerPool* worker_of = nullptr;

}  // namespace

WorkerPool::WorkerPool(HandlerRunner* runner, std::function<void()> wake_dispatcher, bool count_unanswered)
    : runner_(runner), wake_dispatcher_(std::move(wake_dispatcher)), count_unanswered_(count_unanswered) {
  assert(runner_ != nullptr && wake_dispatcher_);
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Start(size_t threads) {
  assert(threads_.empty() && threads >= 1);
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      // Named, so that top -H, perf and debuggers tell the bus's threads apart.
      pthread_setname_np(pthread_self(), "walbus-worker");
      worker_of = this;
      Loop();
    });
  }
}

void WorkerPool::Stop() {
  assert(!OnWorkerThread());
  if (threads_.empty() || stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  WakeOneToStop();
  for (auto& t : threads_) t.join();
}

bool WorkerPool::OnWorkerThread() const { return worker_of == this; }

void WorkerPool::Submit(std::vector<WorkItem>* items) {
  if (items->empty()) return;
  if (count_unanswered_) unanswered_.fetch_add(items->size(), std::memory_order_relaxed);
  bool queued = queue_.enqueue_bulk(std::make_move_iterator(items->begin()), items->size());
  assert(queued);
  (void)queued;
  items->clear();
}

bool WorkerPool::OweWakeWhileBusy() {
  // Each side stores, then loads what the other stores (a worker: takes
  // items, then reads wake_owed_; here: sets wake_owed_, then reads the
  // queue's size), with a full fence between: one of the two is bound to
  // see the other's store, so a drained queue never leaves the wake owed
  // and unpaid. The first fence also orders the committed seq (stored
  // before the commit's call) before the wake flags, against the one in
  // Dispatcher::Loop.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (queue_.size_approx() == 0) return false;
  wake_owed_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Emptied meanwhile by a worker that found nothing owed: the caller pays.
  return queue_.size_approx() != 0 || !wake_owed_.exchange(false, std::memory_order_relaxed);
}

void WorkerPool::Loop() {
  std::vector<WorkItem> items(kBulk);
  while (true) {
    // Asleep until work comes: a bulk Submit, or Stop's empty item.
    const size_t n = queue_.wait_dequeue_bulk(items.begin(), kBulk);
    assert(n > 0);
    if (stopping_.load()) {  // queued work is redelivered on the next open
      WakeOneToStop();       // the next one, which may be asleep
      break;
    }
    // The queue is drained: the dispatcher's deferred wake is due now, so
    // that the events committed meanwhile reach the idle workers. (The
    // fence pairs with OweWakeWhileBusy's.)
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (wake_owed_.load(std::memory_order_relaxed) && queue_.size_approx() == 0 &&
        wake_owed_.exchange(false, std::memory_order_relaxed)) {
      wake_dispatcher_();
    }
    runner_->RunBatch(std::span<WorkItem>(items.data(), n));
    // Every answer of the batch is sent. When counted, the last busy
    // worker to finish wakes the dispatcher, which may now find the bus
    // settled (ProgressBoard::WaitSettled).
    if (count_unanswered_ && unanswered_.fetch_sub(n, std::memory_order_acq_rel) == n) wake_dispatcher_();
  }
}

void WorkerPool::WakeOneToStop() {
  // An empty item, never run: whoever takes it sees stopping_.
  bool queued = queue_.enqueue(WorkItem{});
  assert(queued);
  (void)queued;
}

}  // namespace walbus::internal
