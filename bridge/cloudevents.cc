#include "bridge/cloudevents.h"

#include "bus/rfc3339.h"

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

const std::string* Find(const Headers& headers, std::string_view name) {
  auto it = headers.find(std::string(name));
  return it == headers.end() ? nullptr : &it->second;
}

}  // namespace

Headers ToHeaders(const Event& event) {
  Headers h;
  const std::string id = event.id.ToString();
  h["ce-specversion"] = std::string(kSpecVersion);
  h["ce-id"] = id;
  h["ce-source"] = event.source;
  h["ce-type"] = event.type;
  h["ce-subject"] = event.subject;
  h["ce-time"] = internal::FormatRfc3339(event.time);
  if (!event.content_type.empty()) h["ce-datacontenttype"] = event.content_type;
  if (!event.traceparent.empty()) h["ce-traceparent"] = event.traceparent;
  if (event.subject_version != 0) h["ce-subjectversion"] = std::to_string(event.subject_version);
  if (event.correlation_id) h["ce-correlationid"] = event.correlation_id->ToString();
  if (event.causation_id) h["ce-causationid"] = event.causation_id->ToString();
  h[std::string(kMsgIdHeader)] = id;
  return h;
}

void SetPosition(const SenderPosition& position, Headers* headers) {
  (*headers)[std::string(kSeqOriginHeader)] = position.origin;
  (*headers)[std::string(kSubjectSeqHeader)] = std::to_string(position.position);
}

Result<std::optional<SenderPosition>> ReadPosition(const Headers& headers) {
  const std::string* origin = Find(headers, kSeqOriginHeader);
  const std::string* seq = Find(headers, kSubjectSeqHeader);
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
  if (!internal::ParseRfc3339(*Find(headers, "ce-time"), &e.time)) {
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
