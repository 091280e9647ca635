#include "bus/util/rfc3339.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace walbus::internal {
namespace {

// Reads exactly `digits` decimal digits at text[*pos].
bool ReadNumber(std::string_view text, size_t* pos, size_t digits, int* out) {
  if (*pos + digits > text.size()) return false;
  int v = 0;
  for (size_t i = 0; i < digits; ++i) {
    const char c = text[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += digits;
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* pos, char c) {
  if (*pos >= text.size() || (text[*pos] != c && std::tolower(static_cast<unsigned char>(text[*pos])) != c)) {
    return false;
  }
  ++*pos;
  return true;
}

// The civil time of `count` units (`per_second` of them a second) since
// the Unix epoch, with `digits` decimals; empty outside the years 0-9999.
// C++'s calendar, not gmtime: a 32-bit time_t (armhf) ends in 2038.
std::string FormatUtc(int64_t count, int64_t per_second, int digits) {
  using namespace std::chrono;
  constexpr int64_t kYear0 = -62167219200;      // 0000-01-01T00:00:00Z
  constexpr int64_t kYear10000 = 253402300800;  // 10000-01-01T00:00:00Z
  // Floor division: negating `count` would overflow near INT64_MIN.
  int64_t secs = count / per_second;
  int64_t fraction = count % per_second;
  if (fraction < 0) {
    fraction += per_second;
    --secs;
  }
  if (secs < kYear0 || secs >= kYear10000) return {};
  const sys_seconds t{seconds(secs)};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> time{t - day};
  char buf[96];  // room for any int the compiler cannot rule out
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02lld.%0*lldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(time.hours().count()), static_cast<int>(time.minutes().count()),
                static_cast<long long>(time.seconds().count()), digits, static_cast<long long>(fraction));
  return buf;
}

}  // namespace

std::string FormatRfc3339(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  // The clock's range (about 1678-2262) is inside the years 0-9999.
  return FormatUtc(floor<microseconds>(t).time_since_epoch().count(), 1000000, 6);
}

std::string FormatRfc3339Millis(int64_t unix_ms) { return FormatUtc(unix_ms, 1000, 3); }

bool ParseRfc3339(std::string_view text, std::chrono::system_clock::time_point* out) {
  size_t pos = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!ReadNumber(text, &pos, 4, &year) || !Expect(text, &pos, '-') || !ReadNumber(text, &pos, 2, &month) ||
      !Expect(text, &pos, '-') || !ReadNumber(text, &pos, 2, &day) || !Expect(text, &pos, 't') ||
      !ReadNumber(text, &pos, 2, &hour) || !Expect(text, &pos, ':') || !ReadNumber(text, &pos, 2, &minute) ||
      !Expect(text, &pos, ':') || !ReadNumber(text, &pos, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return false;
  int64_t nanos = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t scale = 100000000;
    size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 9) nanos += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return false;
  }
  int64_t offset_seconds = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = 0, om = 0;
    if (!ReadNumber(text, &pos, 2, &oh) || !Expect(text, &pos, ':') || !ReadNumber(text, &pos, 2, &om)) return false;
    if (oh > 23 || om > 59) return false;
    offset_seconds = sign * (int64_t{oh} * 3600 + int64_t{om} * 60);
  } else {
    return false;
  }
  if (pos != text.size()) return false;
  using namespace std::chrono;
  const year_month_day date{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                            std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok()) return false;  // 2026-02-30
  // The clock counts nanoseconds in 64 bits: about the years 1678 to 2262.
  constexpr int64_t kClockRangeSeconds = 9'000'000'000;
  const int64_t unix_seconds = int64_t{sys_days(date).time_since_epoch().count()} * 86400 + int64_t{hour} * 3600 +
                               int64_t{minute} * 60 + second - offset_seconds;
  if (unix_seconds <= -kClockRangeSeconds || unix_seconds >= kClockRangeSeconds) return false;
  *out = system_clock::time_point(duration_cast<system_clock::duration>(seconds(unix_seconds) + nanoseconds(nanos)));
  return true;
}

}  // namespace walbus::internal
