// Bounds of option values, checked from tables: every count, size and
// duration of an options struct is listed once with its range, so that all
// are checked alike and every error says the same things (the option, its
// value, its range). Options, the bridge's RelayOptions, InboundOptions
// and ConnectionOptions use it.
#ifndef WALBUS_BUS_UTIL_BOUNDS_H_
#define WALBUS_BUS_UTIL_BOUNDS_H_

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "walbus/status.h"

namespace walbus::internal {

inline constexpr int64_t kNoMax = INT64_MAX;
inline constexpr std::chrono::milliseconds kNoLongest = std::chrono::milliseconds::max();
inline constexpr std::chrono::milliseconds kDay = std::chrono::hours(24);

// A count or size, its closed range. Signed, so that a negative int option
// is shown as given.
struct CountBound {
  const char* name;
  int64_t value;
  int64_t min;
  int64_t max;
};

// A duration, its closed range.
struct DurationBound {
  const char* name;
  std::chrono::milliseconds value;
  std::chrono::milliseconds min;
  std::chrono::milliseconds max;
};

// An unsigned option's value as a CountBound takes it (past INT64_MAX it
// is shown as INT64_MAX, and out of any range).
inline int64_t CountValue(uint64_t value) { return value > uint64_t{INT64_MAX} ? INT64_MAX : int64_t(value); }

// OK when every value is within its range; otherwise InvalidArgument
// for the first that is not: "<owner>::<name> is <value>; it must be
// <range>". Thread-safe.
Status CheckBounds(std::string_view owner, std::initializer_list<CountBound> counts,
                   std::initializer_list<DurationBound> durations);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_BOUNDS_H_
