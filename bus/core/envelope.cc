#include "bus/core/envelope.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "bus/util/hex.h"
#include "bus/util/utf8.h"
#include "envelope_generated.h"

namespace walbus::internal {
namespace {

bool IsTypeChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

Status Invalid(std::string_view what, std::string_view detail) {
  std::string m(what);
  m += ": ";
  m += detail;
  return Status::InvalidArgument(std::move(m));
}

int64_t ToUnixNanos(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::optional<EventId> IdFrom(const flatbuffers::Vector<uint8_t>* v) {
  if (v == nullptr || v->size() != 16) return std::nullopt;
  EventId id;
  std::memcpy(id.bytes.data(), v->data(), 16);
  return id;
}

std::string StringFrom(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

}  // namespace

Status ValidateEventType(std::string_view type) {
  if (type.empty()) return Status::InvalidArgument("event type is empty");
  if (type.size() > kMaxTypeBytes) return Invalid("event type too long", std::string(type.substr(0, 64)) + "...");
  // Split into dot-separated words; every word non-empty and of [a-z0-9-].
  size_t words = 0;
  size_t start = 0;
  std::string_view last;
  while (start <= type.size()) {
    size_t dot = type.find('.', start);
    std::string_view word = type.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (word.empty()) return Invalid("event type has an empty word", type);
    for (char c : word)
      if (!IsTypeChar(c)) return Invalid("event type must be lowercase [a-z0-9-] words separated by dots", type);
    if (word.front() == '-' || word.back() == '-') return Invalid("event type word starts or ends with '-'", type);
    ++words;
    last = word;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (words < 3) return Invalid("event type needs a domain, a name and a version, e.g. orders.order-approved.v1", type);
  if (last.size() < 2 || last[0] != 'v') return Invalid("event type must end in .v<N>", type);
  for (size_t i = 1; i < last.size(); ++i)
    if (last[i] < '0' || last[i] > '9') return Invalid("event type must end in .v<N>", type);
  if (last[1] == '0') return Invalid("event type version must be a number >= 1 without leading zeros", type);
  return Status::OK();
}

Status ValidateSubscriberName(const std::string& name) {
  if (name.empty() || name.size() > 128) return Status::InvalidArgument("subscriber name must be 1..128 bytes");
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return Status::InvalidArgument("subscriber name '" + name + "' has a character outside [A-Za-z0-9._-]");
  }
  return Status::OK();
}

Status ValidateProcessName(std::string_view name) {
  constexpr size_t kMaxProcessNameBytes = 64;
  const bool fits = !name.empty() && name.size() <= kMaxProcessNameBytes;
  const bool word = std::all_of(name.begin(), name.end(),
                                [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
  if (!fits || !word) {
    return Status::InvalidArgument("process name '" + std::string(name) + "': 1.." +
                                   std::to_string(kMaxProcessNameBytes) + " bytes of [a-z0-9-]");
  }
  return Status::OK();
}

Status ValidateEvent(const Event& e, size_t max_payload_bytes) {
  if (Status s = ValidateEventType(e.type); !s.ok()) return s;
  if (e.subject.empty()) return Status::InvalidArgument("event subject is empty (it is the ordering key)");
  if (e.subject.size() > kMaxSubjectBytes) return Status::InvalidArgument("event subject longer than 512 bytes");
  if (e.subject.find('\0') != std::string::npos) return Status::InvalidArgument("event subject contains NUL");
  if (e.source.empty() || e.source.size() > kMaxSourceBytes)
    return Status::InvalidArgument("event source must be 1..256 bytes");
  if (e.data.size() > max_payload_bytes) {
    return Status::InvalidArgument("event payload of " + std::to_string(e.data.size()) +
                                   " bytes exceeds max_payload_bytes " + std::to_string(max_payload_bytes));
  }
  if (e.traceparent.size() > kMaxTraceparentBytes) return Status::InvalidArgument("traceparent too long");
  if (e.content_type.size() > kMaxContentTypeBytes) return Status::InvalidArgument("content type too long");
  if (e.id.IsNil()) return Status::InvalidArgument("event id is nil");
  return Status::OK();
}

namespace {

bool DisallowedInCloudEvents(uint32_t cp) {
  return IsControlCodePoint(cp) || (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE;
}

bool IsHexDigit(char c) { return HexDigitValue(c) >= 0; }

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// unreserved, gen-delims and sub-delims of RFC 3986 (the '%' of an escape
// is checked apart).
bool IsUriChar(char c) {
  if (IsAlpha(c) || (c >= '0' && c <= '9')) return true;
  static constexpr std::string_view kOthers = "-._~:/?#[]@!$&'()*+,;=";
  return kOthers.find(c) != std::string_view::npos;
}

}  // namespace

Status ValidateCloudEventString(std::string_view what, std::string_view value) {
  for (size_t i = 0; i < value.size();) {
    const size_t at = i;
    uint32_t cp = 0;
    const size_t n = Utf8SequenceAt(value, i, &cp);
    i += n;
    if (n == 0) return Status::InvalidArgument(std::string(what) + " is not valid UTF-8 at byte " + std::to_string(at));
    if (DisallowedInCloudEvents(cp)) {
      char code[16];
      std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(cp));
      return Status::InvalidArgument(std::string(what) + " holds " + code + " at byte " + std::to_string(at) +
                                     ", which a CloudEvents string may not (control characters and noncharacters)");
    }
  }
  return Status::OK();
}

Status ValidateUriReference(std::string_view what, std::string_view value) {
  const auto invalid = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(what) + " '" + std::string(value.substr(0, 64)) +
                                   "' is not a URI-reference (" + why + "); percent-encode other characters as UTF-8");
  };
  if (value.empty()) return invalid("it is empty");
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c == '%') {
      if (i + 2 >= value.size() || !IsHexDigit(value[i + 1]) || !IsHexDigit(value[i + 2])) {
        return invalid("'%' at byte " + std::to_string(i) + " is not followed by two hex digits");
      }
      i += 2;
    } else if (!IsUriChar(c)) {
      return invalid("byte " + std::to_string(i) + " may not stand in a URI");
    }
  }
  // A ':' before the first '/', '?' or '#' ends a scheme: ALPHA *( ALPHA
  // / DIGIT / "+" / "-" / "." ). Otherwise the first segment holds none.
  const size_t first_segment_end = std::min(value.find_first_of("/?#"), value.size());
  const size_t colon = value.substr(0, first_segment_end).find(':');
  if (colon != std::string_view::npos) {
    bool scheme = colon > 0 && IsAlpha(value[0]);
    for (size_t i = 1; scheme && i < colon; ++i) {
      const char c = value[i];
      scheme = IsAlpha(c) || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    }
    if (!scheme) return invalid("the part before ':' is not a scheme");
  }
  return Status::OK();
}

Status ValidateNewEvent(const Event& e, size_t max_payload_bytes) {
  if (Status s = ValidateEvent(e, max_payload_bytes); !s.ok()) return s;
  if (Status s = ValidateCloudEventString("event subject", e.subject); !s.ok()) return s;
  if (Status s = ValidateUriReference("event source", e.source); !s.ok()) return s;
  if (Status s = ValidateCloudEventString("content type", e.content_type); !s.ok()) return s;
  return ValidateCloudEventString("traceparent", e.traceparent);
}

std::string EncodeEnvelope(const Event& e) {
  // One builder per thread, reused: its buffer grows to the largest
  // envelope seen and is not allocated again per event.
  thread_local flatbuffers::FlatBufferBuilder b(1024);
  b.Clear();
  auto id = b.CreateVector(e.id.bytes.data(), e.id.bytes.size());
  auto type = b.CreateString(e.type);
  auto source = b.CreateString(e.source);
  auto subject = b.CreateString(e.subject);
  auto ct = e.content_type.empty() ? 0 : b.CreateString(e.content_type);
  auto corr = e.correlation_id ? b.CreateVector(e.correlation_id->bytes.data(), 16) : 0;
  auto caus = e.causation_id ? b.CreateVector(e.causation_id->bytes.data(), 16) : 0;
  auto tp = e.traceparent.empty() ? 0 : b.CreateString(e.traceparent);
  auto data = b.CreateVector(reinterpret_cast<const uint8_t*>(e.data.data()), e.data.size());
  fb::EnvelopeBuilder eb(b);
  eb.add_id(id);
  eb.add_type(type);
  eb.add_source(source);
  eb.add_subject(subject);
  eb.add_subject_version(e.subject_version);
  eb.add_time_unix_nanos(ToUnixNanos(e.time));
  if (!ct.IsNull()) eb.add_datacontenttype(ct);
  if (!corr.IsNull()) eb.add_correlation_id(corr);
  if (!caus.IsNull()) eb.add_causation_id(caus);
  if (!tp.IsNull()) eb.add_traceparent(tp);
  eb.add_data(data);
  eb.add_schema_version(e.schema_version);  // absent when 0
  b.Finish(eb.Finish());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Status DecodeEnvelope(std::string_view bytes, size_t max_payload_bytes, Event* out) {
  if (bytes.size() > max_payload_bytes + kEnvelopeOverheadBytes) {
    return Status::Corruption("envelope of " + std::to_string(bytes.size()) + " bytes exceeds the size cap");
  }
  if (bytes.size() < 8) return Status::Corruption("envelope shorter than a FlatBuffer header");
  // Stored values are not aligned; FlatBuffers reads scalars in place.
  std::unique_ptr<uint64_t[]> aligned(new uint64_t[(bytes.size() + 7) / 8]);
  std::memcpy(aligned.get(), bytes.data(), bytes.size());
  const auto* buf = reinterpret_cast<const uint8_t*>(aligned.get());
  flatbuffers::Verifier::Options vo;
  vo.max_depth = 8;
  vo.max_tables = 16;
  vo.check_alignment = true;
  flatbuffers::Verifier verifier(buf, bytes.size(), vo);
  if (!fb::VerifyEnvelopeBuffer(verifier)) return Status::Corruption("envelope fails FlatBuffers verification");
  const fb::Envelope* env = fb::GetEnvelope(buf);
  auto id = IdFrom(env->id());
  if (!id) return Status::Corruption("envelope id is not 16 bytes");
  if (env->correlation_id() != nullptr && env->correlation_id()->size() != 16)
    return Status::Corruption("envelope correlation id is not 16 bytes");
  if (env->causation_id() != nullptr && env->causation_id()->size() != 16)
    return Status::Corruption("envelope causation id is not 16 bytes");
  out->id = *id;
  out->type = StringFrom(env->type());
  out->source = StringFrom(env->source());
  out->subject = StringFrom(env->subject());
  out->subject_version = env->subject_version();
  out->time = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::nanoseconds(env->time_unix_nanos())));
  out->content_type = StringFrom(env->datacontenttype());
  out->correlation_id = IdFrom(env->correlation_id());
  out->causation_id = IdFrom(env->causation_id());
  out->traceparent = StringFrom(env->traceparent());
  out->schema_version = env->schema_version();
  if (env->data() != nullptr) {
    out->data.assign(reinterpret_cast<const char*>(env->data()->data()), env->data()->size());
  } else {
    out->data.clear();
  }
  Status rules = ValidateEvent(*out, max_payload_bytes);
  if (!rules.ok()) return Status::Corruption("envelope breaks a rule: " + rules.message());
  return Status::OK();
}

}  // namespace walbus::internal
