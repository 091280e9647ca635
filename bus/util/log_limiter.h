// LogLimiter: at most N log lines a second from one place, so a failing
// handler or a full disk cannot flood the log. The lines it holds back are
// counted and reported with the next line it lets through.
//
// Threading: thread-safe; lock-free.
#ifndef WALBUS_BUS_UTIL_LOG_LIMITER_H_
#define WALBUS_BUS_UTIL_LOG_LIMITER_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace walbus::internal {

class LogLimiter {
 public:
  explicit LogLimiter(uint32_t per_second) : per_second_(per_second) {}

  // True when this line may be logged; *suppressed then holds how many
  // were held back since the last one that was.
  bool Allow(uint64_t* suppressed) {
    const int64_t second =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t current = second_.load(std::memory_order_relaxed);
    if (current != second && second_.compare_exchange_strong(current, second)) {
      used_.store(0, std::memory_order_relaxed);
    }
    if (used_.fetch_add(1, std::memory_order_relaxed) >= per_second_) {
      held_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    *suppressed = held_.exchange(0, std::memory_order_relaxed);
    return true;
  }

 private:
  const uint32_t per_second_;
  std::atomic<int64_t> second_{0};
  std::atomic<uint32_t> used_{0};
  std::atomic<uint64_t> held_{0};
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_LOG_LIMITER_H_
