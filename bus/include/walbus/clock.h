// Clock: where walbus reads the time, so tests can move it.
//
// Threading: implementations must be thread-safe; walbus calls them from
// its dispatcher and worker threads.
#ifndef WALBUS_CLOCK_H_
#define WALBUS_CLOCK_H_

#include <chrono>
#include <memory>

#include "walbus/export.h"

namespace walbus {

// A source of monotonic and wall time (Options::clock).
class WALBUS_EXPORT Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time: retry delays, timeouts, intervals.
  virtual std::chrono::steady_clock::time_point Now() const = 0;
  // Wall time: event times, failure times in records.
  virtual std::chrono::system_clock::time_point WallNow() const = 0;

  // The real clocks. Never null; shared by every bus.
  static std::shared_ptr<const Clock> System();
};

}  // namespace walbus

#endif  // WALBUS_CLOCK_H_
