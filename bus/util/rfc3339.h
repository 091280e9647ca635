// RFC 3339 times as CloudEvents carry them (`time`): the bridge's ce-time
// header and the CloudEvents JSON export write and read them here.
#ifndef WALBUS_BUS_UTIL_RFC3339_H_
#define WALBUS_BUS_UTIL_RFC3339_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace walbus::internal {

// UTC with microseconds: "2026-11-29T23:46:34.123456Z".
std::string FormatRfc3339(std::chrono::system_clock::time_point t);
// UTC with milliseconds, "2026-11-29T23:46:34.123Z", for any count of
// milliseconds (a stored record's); empty outside the years 0 to 9999.
std::string FormatRfc3339Millis(int64_t unix_ms);
// Accepts 'Z' or a numeric offset, and a fraction of any length (digits
// past the nanosecond are dropped). False for
// anything else, for a day the month does not have, and for times outside
// the clock's range (about the years 1678 to 2262).
bool ParseRfc3339(std::string_view text, std::chrono::system_clock::time_point* out);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_RFC3339_H_
