#include "bridge/cloudevents.h"

#include "bus/util/hex.h"
#include "bus/util/rfc3339.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <vector>

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

bool SameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

const std::string* FindHeader(const Headers& headers, std::string_view name) {
  auto it = headers.find(std::string(name));
  if (it != headers.end()) return &it->second;
  for (const auto& [key, value] : headers) {
    if (SameName(key, name)) return &value;
  }
  return nullptr;
}

std::string PercentEncode(std::string_view value) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > 0x20 && c < 0x7f && c != '"' && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 0xf]);
    }
  }
  return out;
}

Result<std::string> PercentDecode(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out.push_back(value[i]);
      continue;
    }
    const int hi = i + 1 < value.size() ? internal::HexDigitValue(value[i + 1]) : -1;
    const int lo = i + 2 < value.size() ? internal::HexDigitValue(value[i + 2]) : -1;
    if (hi < 0 || lo < 0) return Status::InvalidArgument("malformed percent escape at byte " + std::to_string(i));
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

namespace {

// A ce-* attribute's value, percent-decoded; nullopt when absent.
Result<std::optional<std::string>> Attribute(const Headers& headers, std::string_view name) {
  const std::string* raw = FindHeader(headers, name);
  if (raw == nullptr) return std::optional<std::string>();
  Result<std::string> decoded = PercentDecode(*raw);
  if (!decoded.ok()) return Status::InvalidArgument(std::string(name) + ": " + decoded.status().message());
  return std::optional<std::string>(std::move(*decoded));
}

}  // namespace

Headers ToHeaders(const Event& event, std::string_view dataschema) {
  Headers h;
  const std::string id = event.id.ToString();
  h["ce-specversion"] = std::string(kSpecVersion);
  h["ce-id"] = id;
  h["ce-source"] = PercentEncode(event.source);
  h["ce-type"] = PercentEncode(event.type);
  h["ce-subject"] = PercentEncode(event.subject);
  h["ce-time"] = internal::FormatRfc3339(event.time);
  if (!event.content_type.empty()) h["ce-datacontenttype"] = PercentEncode(event.content_type);
  if (!event.traceparent.empty()) h["ce-traceparent"] = PercentEncode(event.traceparent);
  if (event.subject_version != 0) h["ce-subjectversion"] = std::to_string(event.subject_version);
  if (event.correlation_id) h["ce-correlationid"] = event.correlation_id->ToString();
  if (event.causation_id) h["ce-causationid"] = event.causation_id->ToString();
  if (!dataschema.empty()) h["ce-dataschema"] = PercentEncode(dataschema);
  h[std::string(kMsgIdHeader)] = id;
  return h;
}

void SetPosition(const SenderPosition& position, Headers* headers) {
  (*headers)[std::string(kSeqOriginHeader)] = PercentEncode(position.origin);
  (*headers)[std::string(kSubjectSeqHeader)] = std::to_string(position.position);
}

Result<std::optional<SenderPosition>> ReadPosition(const Headers& headers) {
  Result<std::optional<std::string>> origin_value = Attribute(headers, kSeqOriginHeader);
  Result<std::optional<std::string>> seq_value = Attribute(headers, kSubjectSeqHeader);
  if (!origin_value.ok()) return origin_value.status();
  if (!seq_value.ok()) return seq_value.status();
  const std::string* origin = origin_value->has_value() ? &**origin_value : nullptr;
  const std::string* seq = seq_value->has_value() ? &**seq_value : nullptr;
  if (origin == nullptr && seq == nullptr) return std::optional<SenderPosition>();
  if (origin == nullptr || seq == nullptr) {
    return Status::InvalidArgument("ce-subjectseq and ce-seqorigin must come together");
  }
  if (origin->empty() || origin->size() > 64) return Status::InvalidArgument("ce-seqorigin must be 1..64 bytes");
  SenderPosition p;
  p.origin = *origin;
  auto [end, ec] = std::from_chars(seq->data(), seq->data() + seq->size(), p.position);
  if (ec != std::errc() || end != seq->data() + seq->size() || p.position == 0) {
    return Status::InvalidArgument("ce-subjectseq is not a positive integer: '" + *seq + "'");
  }
  return std::optional<SenderPosition>(std::move(p));
}

Status FromHeaders(const Headers& headers, std::string body, Event* out) {
  std::map<std::string_view, std::string> attr;
  for (const char* name :
       {"ce-specversion", "ce-id", "ce-source", "ce-type", "ce-subject", "ce-time", "ce-datacontenttype",
        "ce-traceparent", "ce-subjectversion", "ce-correlationid", "ce-causationid"}) {
    Result<std::optional<std::string>> v = Attribute(headers, name);
    if (!v.ok()) return v.status();
    if (v->has_value()) attr[name] = std::move(**v);
  }
  auto get = [&attr](std::string_view name) -> const std::string* {
    auto it = attr.find(name);
    return it == attr.end() ? nullptr : &it->second;
  };
  const std::string* spec = get("ce-specversion");
  if (spec == nullptr) return Status::InvalidArgument("no ce-specversion header: not a CloudEvent in binary mode");
  if (*spec != kSpecVersion) return Status::InvalidArgument("unsupported ce-specversion '" + *spec + "'");
  for (const char* required : {"ce-id", "ce-source", "ce-type", "ce-time"}) {
    const std::string* v = get(required);
    if (v == nullptr || v->empty()) return Status::InvalidArgument(std::string("missing header ") + required);
  }
  Event e;
  auto id = EventId::Parse(*get("ce-id"));
  if (!id) return Status::InvalidArgument("ce-id is not a UUID: '" + *get("ce-id") + "'");
  e.id = *id;
  e.source = *get("ce-source");
  e.type = *get("ce-type");
  // The subject is optional in CloudEvents: without one, an event is
  // ordered by its source.
  const std::string* subject = get("ce-subject");
  e.subject = subject != nullptr && !subject->empty() ? *subject : e.source;
  if (!internal::ParseRfc3339(*get("ce-time"), &e.time)) {
    return Status::InvalidArgument("ce-time is not an RFC 3339 time: '" + *get("ce-time") + "'");
  }
  if (const std::string* v = get("ce-datacontenttype")) {
    e.content_type = *v;
  } else if (const std::string* c = FindHeader(headers, "content-type")) {
    e.content_type = *c;  // a header of its own, not a ce- attribute: as it is
  }
  if (const std::string* v = get("ce-traceparent")) e.traceparent = *v;
  if (const std::string* v = get("ce-subjectversion")) {
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), e.subject_version);
    if (ec != std::errc() || end != v->data() + v->size()) {
      return Status::InvalidArgument("ce-subjectversion is not a number: '" + *v + "'");
    }
  }
  for (auto [name, field] :
       {std::pair{"ce-correlationid", &e.correlation_id}, std::pair{"ce-causationid", &e.causation_id}}) {
    if (const std::string* v = get(name)) {
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
  AppendLengthPrefixed(&canonical, internal::FormatRfc3339(event.time));
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

std::string SubjectToken(std::string_view text) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  if (text.empty()) return "_";
  std::string token;
  token.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > 0x20 && c < 0x7f && c != '.' && c != '*' && c != '>' && c != '%') {
      token.push_back(ch);
    } else {
      token.push_back('%');
      token.push_back(kDigits[c >> 4]);
      token.push_back(kDigits[c & 0xf]);
    }
  }
  return token;
}

std::string DefaultSubject(std::string_view prefix, const Event& event) {
  // A type is dotted words of [a-z0-9-] (Publish checks it): NATS tokens
  // as it stands, so subscribers can filter on "prefix.*.orders.>".
  std::string subject(prefix);
  subject += '.';
  subject += SubjectToken(event.source);
  subject += '.';
  subject += event.type;
  return subject;
}

namespace {

std::vector<std::string_view> Tokens(std::string_view subject) {
  std::vector<std::string_view> tokens;
  size_t start = 0;
  while (start <= subject.size()) {
    const size_t dot = std::min(subject.find('.', start), subject.size());
    tokens.push_back(subject.substr(start, dot - start));
    start = dot + 1;
  }
  return tokens;
}

}  // namespace

bool FilterCoversPrefix(std::string_view filter, std::string_view prefix) {
  // prefix.<source>.<type of one or more tokens>: the tokens after the
  // prefix vary in number, so only a final ">" covers them all.
  const std::vector<std::string_view> f = Tokens(filter), p = Tokens(prefix);
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == ">") return i == f.size() - 1;
    const bool fits = f[i] == "*" || (i < p.size() && f[i] == p[i]);
    if (!fits) return false;
  }
  return false;
}

}  // namespace walbus::bridge
