// RFC 3339 times as CloudEvents carry them (`time`): the bridge's ce-time
// header and the CloudEvents JSON export write and read them here.
#ifndef WALBUS_BUS_UTIL_RFC3339_H_
#define WALBUS_BUS_UTIL_RFC3339_H_

#include <chrono>
#include <string>
#include <string_view>

namespace walbus::internal {

// UTC with microseconds: "2026-11-29T23:46:34.123456Z".
std::string FormatRfc3339(std::chrono::system_clock::time_point t);
// Accepts 'Z' or a numeric offset and 0..9 fraction digits. False for
// anything else, and for times outside the clock's range (about the years
// 1678 to 2262).
bool ParseRfc3339(std::string_view text, std::chrono::system_clock::time_point* out);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_RFC3339_H_
