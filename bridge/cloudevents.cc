#include "bridge/cloudevents.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>

namespace walbus::bridge {
namespace {

constexpr std::string_view kSpecVersion = "1.0";

void AppendLengthPrefixed(std::string* out, std::string_view field) {
  const uint32_t n = static_cast<uint32_t>(field.size());
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((n >> shift) & 0xff));
  out->append(field);
}

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

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

const std::string* Find(const Headers& headers, std::string_view name) {
  auto it = headers.find(std::string(name));
  return it == headers.end() ? nullptr : &it->second;
}

}  // namespace

std::string FormatTime(std::chrono::system_clock::time_point t) {
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
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(fraction));
  return buf;
}

bool ParseTime(std::string_view text, std::chrono::system_clock::time_point* out) {
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
  *out = system_clock::time_point(duration_cast<system_clock::duration>(
      seconds(unix_seconds) + nanoseconds(nanos)));
  return true;
}

Headers ToHeaders(const Event& event) {
  Headers h;
  const std::string id = event.id.ToString();
  h["ce-specversion"] = std::string(kSpecVersion);
  h["ce-id"] = id;
  h["ce-source"] = event.source;
  h["ce-type"] = event.type;
  h["ce-subject"] = event.subject;
  h["ce-time"] = FormatTime(event.time);
  if (!event.content_type.empty()) h["ce-datacontenttype"] = event.content_type;
  if (!event.traceparent.empty()) h["ce-traceparent"] = event.traceparent;
  if (event.subject_version != 0) h["ce-subjectversion"] = std::to_string(event.subject_version);
  if (event.correlation_id) h["ce-correlationid"] = event.correlation_id->ToString();
  if (event.causation_id) h["ce-causationid"] = event.causation_id->ToString();
  h[std::string(kMsgIdHeader)] = id;
  return h;
}

Status FromHeaders(const Headers& headers, std::string body, Event* out) {
  const std::string* spec = Find(headers, "ce-specversion");
  if (spec == nullptr) return Status::InvalidArgument("no ce-specversion header: not a CloudEvent in binary mode");
  if (*spec != kSpecVersion) return Status::InvalidArgument("unsupported ce-specversion '" + *spec + "'");
  Event e;
  for (const char* required : {"ce-id", "ce-source", "ce-type", "ce-subject", "ce-time"}) {
    const std::string* v = Find(headers, required);
    if (v == nullptr || v->empty()) return Status::InvalidArgument(std::string("missing header ") + required);
  }
  auto id = EventId::Parse(*Find(headers, "ce-id"));
  if (!id) return Status::InvalidArgument("ce-id is not a UUID: '" + *Find(headers, "ce-id") + "'");
  e.id = *id;
  e.source = *Find(headers, "ce-source");
  e.type = *Find(headers, "ce-type");
  e.subject = *Find(headers, "ce-subject");
  if (!ParseTime(*Find(headers, "ce-time"), &e.time)) {
    return Status::InvalidArgument("ce-time is not an RFC 3339 time: '" + *Find(headers, "ce-time") + "'");
  }
  if (const std::string* v = Find(headers, "ce-datacontenttype")) e.content_type = *v;
  if (const std::string* v = Find(headers, "ce-traceparent")) e.traceparent = *v;
  if (const std::string* v = Find(headers, "ce-subjectversion")) {
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), e.subject_version);
    if (ec != std::errc() || end != v->data() + v->size()) {
      return Status::InvalidArgument("ce-subjectversion is not a number: '" + *v + "'");
    }
  }
  for (auto [name, field] : {std::pair{"ce-correlationid", &e.correlation_id}, std::pair{"ce-causationid", &e.causation_id}}) {
    if (const std::string* v = Find(headers, name)) {
      auto parsed = EventId::Parse(*v);
      if (!parsed) return Status::InvalidArgument(std::string(name) + " is not a UUID: '" + *v + "'");
      *field = *parsed;
    }
  }
  e.data = std::move(body);
  *out = std::move(e);
  return Status::OK();
}

std::string Sign(const Event& event, std::string_view secret) {
  std::string canonical;
  AppendLengthPrefixed(&canonical, event.id.ToString());
  AppendLengthPrefixed(&canonical, event.type);
  AppendLengthPrefixed(&canonical, event.source);
  AppendLengthPrefixed(&canonical, event.subject);
  AppendLengthPrefixed(&canonical, FormatTime(event.time));
  AppendLengthPrefixed(&canonical, event.data);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), mac, &mac_len);
  return Hex(mac, mac_len);
}

bool SignatureMatches(const Event& event, std::string_view secret, std::string_view signature) {
  const std::string expected = Sign(event, secret);
  return signature.size() == expected.size() && CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) == 0;
}

std::string MessageBytes(const Headers& headers, std::string_view body) {
  std::string out;
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  out.append(body);
  return out;
}

bool ParseMessageBytes(std::string_view bytes, Headers* headers, std::string* body) {
  headers->clear();
  for (;;) {
    const size_t end = bytes.find("\r\n");
    if (end == std::string_view::npos) return false;
    const std::string_view line = bytes.substr(0, end);
    bytes.remove_prefix(end + 2);
    if (line.empty()) break;
    const size_t colon = line.find(": ");
    if (colon == std::string_view::npos) return false;
    (*headers)[std::string(line.substr(0, colon))] = std::string(line.substr(colon + 2));
  }
  body->assign(bytes);
  return true;
}

std::string DefaultSubject(std::string_view prefix, const Event& event) {
  auto token = [](std::string_view text, bool dots_too) {
    std::string t(text.empty() ? "_" : text);
    for (char& c : t) {
      if (c == '*' || c == '>' || std::isspace(static_cast<unsigned char>(c)) || (dots_too && c == '.')) c = '_';
    }
    return t;
  };
  std::string subject(prefix);
  subject += '.';
  subject += token(event.source, true);
  subject += '.';
  subject += token(event.type, false);
  return subject;
}

}  // namespace walbus::bridge
