// Wall-clock times as walbus stores and reports them: whole milliseconds
// since the Unix epoch. The one conversion; every record, C struct and
// report field named *_ms / *_unix_ms goes through it.
#ifndef WALBUS_BUS_UTIL_UNIX_TIME_H_
#define WALBUS_BUS_UTIL_UNIX_TIME_H_

#include <chrono>
#include <cstdint>

namespace walbus::internal {

// Milliseconds since the epoch, rounded down (a time before the epoch is
// negative).
inline int64_t ToUnixMillis(std::chrono::system_clock::time_point t) {
  return std::chrono::floor<std::chrono::milliseconds>(t).time_since_epoch().count();
}

// The same for times that are after the epoch by contract (a clock's now,
// a record's stamp): 0 for an earlier one.
inline uint64_t ToUnixMillisUnsigned(std::chrono::system_clock::time_point t) {
  const int64_t ms = ToUnixMillis(t);
  return ms < 0 ? 0 : static_cast<uint64_t>(ms);
}

inline std::chrono::system_clock::time_point FromUnixMillis(int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_UNIX_TIME_H_
