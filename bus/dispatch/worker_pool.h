// WorkerPool: the threads that run handlers. The dispatcher queues work
// items in bulk (Submit); each worker takes up to kBulk at once, asleep
// until some come, and runs them through the HandlerRunner, which commits
// them as one group and sends their replies.
//
// It also keeps the dispatcher's deferred wake (Dispatcher::
// NotifyCommitted): a commit that finds work queued that no worker took
// leaves the wake owed instead of waking the dispatcher, and the worker
// that empties the queue pays it, so new events are queued by the time a
// worker is free.
//
// Threading: Submit, OweWakeWhileBusy, ForgetOwedWake, unanswered and
// OnWorkerThread are thread-safe; Start and Stop belong to the owner.
#ifndef WALBUS_BUS_DISPATCH_WORKER_POOL_H_
#define WALBUS_BUS_DISPATCH_WORKER_POOL_H_

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "bus/dispatch/handler_runner.h"
#include "bus/dispatch/work.h"

namespace walbus::internal {

// Short spins before sleeping: with more threads than cores (producers,
// dispatcher, workers on two cores), a long spin steals the core from the
// very thread that would fill the queue.
struct QueueTraits : moodycamel::ConcurrentQueueDefaultTraits {
  static const int MAX_SEMA_SPINS = 64;
};

class WorkerPool {
 public:
  static constexpr size_t kBulk = 64;  // items one worker takes at once (one group commit)

  // `wake_dispatcher` wakes the dispatcher (cheap, never blocks). With
  // `count_unanswered` the pool counts items whose replies are not all
  // sent, and wakes the dispatcher when the count falls to zero (a
  // settled bus under a manual clock); without, it pays nothing for it.
  // REQUIRES: runner outlives the pool.
  WorkerPool(HandlerRunner* runner, std::function<void()> wake_dispatcher, bool count_unanswered);
  // Stops if running.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts `threads` workers. REQUIRES: not started.
  void Start(size_t threads);
  // Lets the running batches finish (their replies are sent), drops what
  // is queued (redelivered on the next open), joins the threads.
  // REQUIRES: not on a worker thread. Idempotent.
  void Stop();

  // Queues `items` for the workers in one bulk (one wake-up for all), and
  // empties it. Never blocks; the queue is bounded by the dispatcher's
  // in-flight windows (an item per event handed out).
  void Submit(std::vector<WorkItem>* items);
  // A commit's wake for the dispatcher: true when it is left owed (work is
  // queued that no worker took: the worker that empties the queue pays
  // it), false when the caller must wake the dispatcher now.
  bool OweWakeWhileBusy();
  // The dispatcher is awake: nothing is owed.
  void ForgetOwedWake() { wake_owed_.store(false, std::memory_order_relaxed); }
  // Items submitted whose replies are not all sent (0 unless counted).
  size_t unanswered() const { return unanswered_.load(std::memory_order_acquire); }
  // Whether the calling thread is one of this pool's workers. Any thread.
  bool OnWorkerThread() const;
  // Whether Stop() began. Any thread.
  bool stopping_for_testing() const { return stopping_.load(); }

 private:
  void Loop();
  // Workers sleep until work comes, so each leaving worker wakes the next
  // (REQUIRES: stopping_ is set).
  void WakeOneToStop();

  HandlerRunner* const runner_;
  const std::function<void()> wake_dispatcher_;
  const bool count_unanswered_;
  moodycamel::BlockingConcurrentQueue<WorkItem, QueueTraits> queue_;
  std::atomic<bool> wake_owed_{false};
  std::atomic<size_t> unanswered_{0};
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_WORKER_POOL_H_
