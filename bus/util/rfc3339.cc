#include "bus/util/rfc3339.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <ctime>

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

}  // namespace

std::string FormatRfc3339(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto micros = duration_cast<microseconds>(t.time_since_epoch()).count();
  int64_t seconds = micros / 1000000;
  int64_t fraction = micros % 1000000;
  if (fraction < 0) {
    fraction += 1000000;
    --seconds;
  }
  const std::time_t tt = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(fraction));
  return buf;
}

bool ParseRfc3339(std::string_view text, std::chrono::system_clock::time_point* out) {
  size_t pos = 0;
  std::tm tm{};
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
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else {
    return false;
  }
  if (pos != text.size()) return false;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t utc = timegm(&tm);
  // The clock counts nanoseconds in 64 bits: about the years 1678 to 2262.
  constexpr int64_t kClockRangeSeconds = 9'000'000'000;
  const int64_t unix_seconds = static_cast<int64_t>(utc) - offset_seconds;
  if (unix_seconds <= -kClockRangeSeconds || unix_seconds >= kClockRangeSeconds) return false;
  using namespace std::chrono;
  *out = system_clock::time_point(duration_cast<system_clock::duration>(seconds(unix_seconds) + nanoseconds(nanos)));
  return true;
}

}  // namespace walbus::internal
