// A lock-free multi-producer queue whose consumers can sleep until an item
// comes or a monotonic deadline passes. moodycamel's BlockingConcurrentQueue
// times its waits on the wall clock (see semaphore.h); untimed waits
// (the workers') may keep using it.
#ifndef WALBUS_BUS_DISPATCH_WAITING_QUEUE_H_
#define WALBUS_BUS_DISPATCH_WAITING_QUEUE_H_

#include <concurrentqueue/concurrentqueue.h>

#include <chrono>
#include <cstddef>
#include <utility>

#include "bus/util/semaphore.h"

namespace walbus::internal {

// Threading: thread-safe. Enqueue never blocks; it allocates only when the
// queue grows past its previous peak (moodycamel's blocks are reused), so
// the bound on its length is the owner's: the caller states it.
template <typename T, typename Traits = moodycamel::ConcurrentQueueDefaultTraits>
class WaitingQueue {
 public:
  explicit WaitingQueue(int spins) : items_(spins) {}

  [[nodiscard]] bool Enqueue(T item) {
    if (!queue_.enqueue(std::move(item))) return false;
    items_.Signal();
    return true;
  }
  // Moves `n` items from `first`, waking a consumer once for all of them.
  template <typename It>
  [[nodiscard]] bool EnqueueBulk(It first, size_t n) {
    if (n == 0) return true;
    if (!queue_.enqueue_bulk(first, n)) return false;
    items_.Signal(static_cast<int64_t>(n));
    return true;
  }
  [[nodiscard]] bool TryDequeue(T& item) {
    if (!items_.TryWait()) return false;
    Take(item);
    return true;
  }
  // False when `deadline` passed first.
  [[nodiscard]] bool WaitDequeueUntil(T& item, std::chrono::steady_clock::time_point deadline) {
    if (!items_.WaitUntil(deadline)) return false;
    Take(item);
    return true;
  }
  void WaitDequeue(T& item) {
    items_.Wait();
    Take(item);
  }
  // Whether an item waits: every Enqueue that returned before the call
  // (or is ordered before it) is seen.
  bool HasItems() const { return items_.available() > 0; }

 private:
  // The count was taken, so an item was enqueued before it was signalled;
  // the loop covers a moment where this consumer does not see it yet.
  void Take(T& item) {
    while (!queue_.try_dequeue(item)) {
    }
  }

  moodycamel::ConcurrentQueue<T, Traits> queue_;
  Semaphore items_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_WAITING_QUEUE_H_
