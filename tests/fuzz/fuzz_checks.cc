#include "tests/fuzz/fuzz_checks.h"

#include "bridge/cloudevents.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <regex>
#include <vector>

#include <flatbuffers/reflection_generated.h>

#include "bus/core/envelope.h"
#include "bus/core/payload_contract.h"
#include "bus/core/schema_compat.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tests/payload_json.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/payload_json.h"
#include "tools/walbus/schema_source.h"
#include "tools/walbus/schema_text.h"

namespace walbus::fuzz {
namespace {

using internal::DeadLetterEntry;
using internal::QuarantineEntry;

// Printable for a failure message: bytes outside printable ASCII as \xNN,
// at most 200 of them.
std::string Printable(std::string_view s) {
  std::string out;
  char buf[8];
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

// ---- Output of the inspect views (walbus dlq / quarantine) ----------------

// Decodes UTF-8 on its own terms (not inspect.cc's): the code points, or
// false on any malformed, overlong, surrogate or out-of-range sequence.
bool DecodeUtf8(std::string_view s, std::vector<uint32_t>* cps) {
  cps->clear();
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      n = 1, cp = c;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 2, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < n) return false;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xc0) != 0x80) return false;
      cp = cp << 6 | (t & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    cps->push_back(cp);
    i += n;
  }
  return true;
}

// Text views: valid UTF-8 and no control character but the line ends, so
// that no stored value can break a line or drive the terminal.
bool CheckTerminalText(std::string_view what, std::string_view out, std::string* why) {
  std::vector<uint32_t> cps;
  if (!DecodeUtf8(out, &cps)) return Fail(why, std::string(what) + " is not valid UTF-8: " + Printable(out));
  for (uint32_t cp : cps) {
    if (cp != '\n' && (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))) {
      return Fail(why, std::string(what) + " holds control character " + std::to_string(cp) + ": " + Printable(out));
    }
  }
  if (out.empty() || out.back() != '\n') return Fail(why, std::string(what) + " does not end in a newline");
  return true;
}

size_t Lines(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Detail views: one "label  value" line per field (inspect.cc, Field()).
bool CheckFieldLines(std::string_view what, std::string_view out, std::string* why) {
  static const std::initializer_list<std::string_view> kLabels = {
      "subscriber",      "seq",           "record",       "event id",        "type",         "source",      "subject",
      "subject version", "time",          "content type", "correlation id",  "causation id", "traceparent", "event",
      "attempts",        "first failure", "last failure", "handler version", "error",        "envelope",    "payload",
      "arrival",         "stored value",  "reason",       "original size",   "raw"};
  if (!CheckTerminalText(what, out, why)) return false;
  size_t start = 0;
  while (start < out.size()) {
    const size_t end = out.find('\n', start);
    std::string_view line = out.substr(start, end - start);
    bool known = false;
    for (std::string_view label : kLabels) {
      if (line.size() >= 17 && line.substr(0, label.size()) == label &&
          line.substr(label.size(), 17 - label.size()).find_first_not_of(' ') == std::string_view::npos) {
        known = true;
        break;
      }
    }
    if (!known) return Fail(why, std::string(what) + " has a line that is not a field: " + Printable(line));
    start = end + 1;
  }
  return true;
}

// A strict JSON (RFC 8259) syntax check of one value.
class JsonChecker {
 public:
  explicit JsonChecker(std::string_view s) : s_(s) {}
  bool Document() {
    Ws();
    if (!Value(0)) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  bool Value(int depth) {
    if (depth > 64 || i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{': return Object(depth);
      case '[': return Array(depth);
      case '"': return String();
      case 't': return Literal("true");
      case 'f': return Literal("false");
      case 'n': return Literal("null");
      default: return Number();
    }
  }
  bool Object(int depth) {
    ++i_;
    Ws();
    if (Eat('}')) return true;
    for (;;) {
      Ws();
      if (i_ >= s_.size() || s_[i_] != '"' || !String()) return false;
      Ws();
      if (!Eat(':')) return false;
      Ws();
      if (!Value(depth + 1)) return false;
      Ws();
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
    }
  }
  bool Array(int depth) {
    ++i_;
    Ws();
    if (Eat(']')) return true;
    for (;;) {
      Ws();
      if (!Value(depth + 1)) return false;
      Ws();
      if (Eat(']')) return true;
      if (!Eat(',')) return false;
    }
  }
  bool String() {
    ++i_;
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      if (e == 'u') {
        for (int k = 0; k < 4; ++k) {
          if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
          ++i_;
        }
      } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
        return false;
      }
    }
    return false;
  }
  bool Number() {
    Eat('-');
    if (Eat('0')) {
    } else if (!Digits()) {
      return false;
    }
    if (Eat('.') && !Digits()) return false;
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!Digits()) return false;
    }
    return true;
  }
  bool Digits() {
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool Literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// JSON views: one JSON object on one line (JSON Lines), valid UTF-8.
bool CheckJsonLine(std::string_view what, std::string_view out, std::string* why) {
  std::vector<uint32_t> cps;
  if (!DecodeUtf8(out, &cps)) return Fail(why, std::string(what) + " is not valid UTF-8: " + Printable(out));
  if (out.find('\n') != std::string_view::npos) return Fail(why, std::string(what) + " spans lines");
  if (out.empty() || out.front() != '{' || !JsonChecker(out).Document())
    return Fail(why, std::string(what) + " is not one JSON object: " + Printable(out));
  return true;
}

bool CheckDeadLetterViews(const DeadLetterEntry& e, std::string* why) {
  const std::string table = internal::DeadLetterTable({e});
  if (!CheckTerminalText("DeadLetterTable", table, why)) return false;
  if (Lines(table) != 2) return Fail(why, "DeadLetterTable of one entry is not two lines: " + Printable(table));
  if (!CheckFieldLines("DeadLetterText", internal::DeadLetterText(e), why)) return false;
  return CheckJsonLine("DeadLetterJson", internal::DeadLetterJson(e), why);
}

bool CheckQuarantineViews(const QuarantineEntry& e, std::string* why) {
  const std::string table = internal::QuarantineTable({e});
  if (!CheckTerminalText("QuarantineTable", table, why)) return false;
  if (Lines(table) != 2) return Fail(why, "QuarantineTable of one entry is not two lines: " + Printable(table));
  if (!CheckFieldLines("QuarantineText", internal::QuarantineText(e), why)) return false;
  return CheckJsonLine("QuarantineJson", internal::QuarantineJson(e), why);
}

// ---- Envelopes --------------------------------------------------------------

std::string IdText(const std::optional<EventId>& id) { return id ? id->ToString() : "none"; }

// The first attribute in which a and b differ, or "".
std::string EventDiff(const Event& a, const Event& b) {
  if (a.seq != b.seq) return "seq";
  if (a.id != b.id) return "id " + a.id.ToString() + " vs " + b.id.ToString();
  if (a.type != b.type) return "type";
  if (a.source != b.source) return "source";
  if (a.subject != b.subject) return "subject";
  if (a.subject_version != b.subject_version) return "subject_version";
  if (a.time != b.time) return "time";
  if (a.content_type != b.content_type) return "content_type";
  if (a.correlation_id != b.correlation_id)
    return "correlation_id " + IdText(a.correlation_id) + " vs " + IdText(b.correlation_id);
  if (a.causation_id != b.causation_id)
    return "causation_id " + IdText(a.causation_id) + " vs " + IdText(b.causation_id);
  if (a.traceparent != b.traceparent) return "traceparent";
  if (a.data != b.data) return "data";
  return "";
}

bool CheckEnvelope(std::string_view bytes, bool render, std::string* why) {
  if (bytes.size() > kMaxInputBytes) return true;
  Event first;
  const Status s = internal::DecodeEnvelope(bytes, kEnvelopeMaxPayloadBytes, &first);
  DeadLetterEntry entry;
  entry.subscriber = "billing";
  entry.seq = 42;
  entry.record_ok = true;
  entry.record.attempts = 3;
  entry.record.first_failure_ms = 1714566896789;
  entry.record.last_failure_ms = 1714566897000;
  entry.record.error = "timeout";
  entry.record.envelope.assign(bytes);
  if (!s.ok()) {
    if (!s.IsCorruption()) return Fail(why, "DecodeEnvelope refused with " + s.ToString() + ", not Corruption");
    if (!render) return true;
    entry.event_error = s.message();
    return CheckDeadLetterViews(entry, why);
  }
  if (Status v = internal::ValidateEvent(first, kEnvelopeMaxPayloadBytes); !v.ok())
    return Fail(why, "DecodeEnvelope accepted an event that breaks a rule: " + v.ToString());
  const std::string encoded = internal::EncodeEnvelope(first);
  Event second;
  if (Status d = internal::DecodeEnvelope(encoded, kEnvelopeMaxPayloadBytes, &second); !d.ok())
    return Fail(why, "the re-encoded envelope does not decode: " + d.ToString());
  if (std::string diff = EventDiff(first, second); !diff.empty())
    return Fail(why, "the re-encoded envelope decodes to a different event: " + diff);
  if (internal::EncodeEnvelope(second) != encoded) return Fail(why, "EncodeEnvelope is not deterministic");
  if (!render) return true;
  entry.event = std::move(first);
  entry.event_ok = true;
  return CheckDeadLetterViews(entry, why);
}

// ---- Records and keys ---------------------------------------------------------

bool Same(const storage::RetryRecord& a, const storage::RetryRecord& b) {
  return a.attempts == b.attempts && a.first_failure_ms == b.first_failure_ms &&
         a.last_failure_ms == b.last_failure_ms && a.last_error == b.last_error &&
         a.next_attempt_ms == b.next_attempt_ms;
}
bool Same(const storage::DeadLetterRecord& a, const storage::DeadLetterRecord& b) {
  return a.attempts == b.attempts && a.first_failure_ms == b.first_failure_ms &&
         a.last_failure_ms == b.last_failure_ms && a.error == b.error && a.handler_version == b.handler_version &&
         a.envelope == b.envelope;
}
bool Same(const storage::RegistrationRecord& a, const storage::RegistrationRecord& b) {
  return a.side_effect_safe == b.side_effect_safe && a.handler_version == b.handler_version && a.types == b.types;
}
bool Same(const storage::PauseRecord& a, const storage::PauseRecord& b) { return a.seq == b.seq && a.type == b.type; }
bool Same(const storage::QuarantineRecord& a, const storage::QuarantineRecord& b) {
  return a.arrived_ms == b.arrived_ms && a.original_bytes == b.original_bytes && a.source == b.source &&
         a.reason == b.reason && a.raw == b.raw;
}
bool Same(const storage::ReplayRecord& a, const storage::ReplayRecord& b) {
  return a.subscriber_id == b.subscriber_id && a.subscriber == b.subscriber && a.mode == b.mode && a.state == b.state &&
         a.operator_name == b.operator_name && a.reason == b.reason && a.handler_version == b.handler_version &&
         a.from_seq == b.from_seq && a.to_seq == b.to_seq && a.since_ms == b.since_ms && a.until_ms == b.until_ms &&
         a.types == b.types && a.subject == b.subject && a.ids == b.ids && a.max_events == b.max_events &&
         a.started_ms == b.started_ms && a.ended_ms == b.ended_ms && a.selected == b.selected &&
         a.delivered == b.delivered && a.skipped == b.skipped && a.failed == b.failed && a.next_seq == b.next_seq &&
         a.error == b.error && a.cancelled_by == b.cancelled_by && a.cancel_reason == b.cancel_reason;
}

bool Same(const storage::TimerRecord& a, const storage::TimerRecord& b) {
  return a.scheduled_ms == b.scheduled_ms && a.scheduled_wall_ms == b.scheduled_wall_ms && a.envelope == b.envelope &&
         a.schedule_key == b.schedule_key;
}
bool Same(const storage::ProcessRecord& a, const storage::ProcessRecord& b) {
  const auto same_timeout = [](const storage::ProcessTimeoutRecord& x, const storage::ProcessTimeoutRecord& y) {
    return x.name == y.name && x.id == y.id && x.due_wall_ms == y.due_wall_ms;
  };
  const auto same_handled = [](const storage::ProcessHandledRecord& x, const storage::ProcessHandledRecord& y) {
    return x.id == y.id && x.seq == y.seq && x.type == y.type && x.handled_wall_ms == y.handled_wall_ms;
  };
  return a.definition_version == b.definition_version && a.state_version == b.state_version &&
         a.state_type == b.state_type && a.started_wall_ms == b.started_wall_ms &&
         a.updated_wall_ms == b.updated_wall_ms && a.events_handled == b.events_handled && a.state == b.state &&
         std::equal(a.timeouts.begin(), a.timeouts.end(), b.timeouts.begin(), b.timeouts.end(), same_timeout) &&
         std::equal(a.last_handled.begin(), a.last_handled.end(), b.last_handled.begin(), b.last_handled.end(),
                    same_handled);
}

// A record the decoder accepted re-encodes to the very same bytes (the
// format has one encoding per record) and decodes again to an equal record.
template <typename Record, typename Encode, typename Decode>
bool CheckRecordRoundTrip(std::string_view name, std::string_view bytes, const Record& r, Encode encode, Decode decode,
                          std::string* why) {
  const std::string encoded = encode(r);
  Record again;
  if (!decode(encoded, &again)) return Fail(why, std::string(name) + ": the re-encoded record does not decode");
  if (!Same(r, again)) return Fail(why, std::string(name) + ": the re-encoded record decodes to a different record");
  if (encoded != bytes) return Fail(why, std::string(name) + ": the re-encoded record differs from the input");
  return true;
}

bool CheckKeys(std::string_view bytes, std::string* why) {
  uint32_t id = 0;
  uint64_t seq = 0;
  const bool sub_ok = storage::ParseSubscriberSeqKey(bytes, &id, &seq);
  if (sub_ok != (bytes.size() == 12)) return Fail(why, "ParseSubscriberSeqKey: acceptance is not size == 12");
  if (sub_ok && storage::SubscriberSeqKey(id, seq) != bytes)
    return Fail(why, "ParseSubscriberSeqKey: SubscriberSeqKey does not rebuild the key");
  uint64_t arrival = 0;
  const bool q_ok = storage::ParseQuarantineKey(bytes, &arrival);
  if (q_ok != (bytes.size() == 8)) return Fail(why, "ParseQuarantineKey: acceptance is not size == 8");
  if (q_ok && storage::QuarantineKey(arrival) != bytes)
    return Fail(why, "ParseQuarantineKey: QuarantineKey does not rebuild the key");
  uint64_t out_seq = 0;
  const bool o_ok = storage::ParseOutboxKey(bytes, &out_seq);
  if (o_ok != (bytes.size() == 8)) return Fail(why, "ParseOutboxKey: acceptance is not size == 8");
  if (o_ok && storage::OutboxKey(out_seq) != bytes)
    return Fail(why, "ParseOutboxKey: OutboxKey does not rebuild the key");
  if (o_ok && q_ok && out_seq != arrival) return Fail(why, "ParseOutboxKey and ParseQuarantineKey disagree");
  uint64_t counter = 0;
  const bool c_ok = storage::DecodeCounter(bytes, &counter);
  if (c_ok != (bytes.size() == 8)) return Fail(why, "DecodeCounter: acceptance is not size == 8");
  if (c_ok && storage::EncodeCounter(counter) != bytes)
    return Fail(why, "DecodeCounter: EncodeCounter does not rebuild the value");
  return true;
}

// ---- Values an operator types ---------------------------------------------------

// The documented rules, written as regular expressions: an implementation
// independent of the validators.
bool ReferenceEventId(std::string_view s) {
  static const std::regex re("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
  return s.size() == 36 && std::regex_match(s.begin(), s.end(), re);
}

bool ReferenceEventType(std::string_view s) {
  // Words of [a-z0-9-] that neither start nor end with '-'; at least two
  // before the version; "v<N>", N >= 1 without leading zeros.
  static const std::regex re("[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+\\.v[1-9][0-9]*");
  return !s.empty() && s.size() <= internal::kMaxTypeBytes && std::regex_match(s.begin(), s.end(), re);
}

bool ReferenceSubscriberName(std::string_view s) {
  static const std::regex re("[A-Za-z0-9._-]+");
  return !s.empty() && s.size() <= 128 && std::regex_match(s.begin(), s.end(), re);
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

bool CheckEnvelopeBytes(std::string_view bytes, std::string* why) { return CheckEnvelope(bytes, true, why); }

bool CheckRecordBytes(std::string_view bytes, std::string* why) {
  if (bytes.size() > kMaxInputBytes) return true;
  if (!CheckKeys(bytes, why)) return false;

  storage::RetryRecord retry;
  if (storage::DecodeRetry(bytes, &retry)) {
    if (retry.last_error.size() > storage::kMaxErrorBytes) return Fail(why, "DecodeRetry: last_error above its cap");
    // A record from before next_attempt_ms re-encodes with it, as 0.
    std::string canonical(bytes);
    if (storage::EncodeRetry(retry).size() == bytes.size() + 8) canonical.append(8, '\0');
    if (!CheckRecordRoundTrip("retry", canonical, retry, storage::EncodeRetry, storage::DecodeRetry, why)) return false;
  }

  // What a subscriber was last subscribed with, and where it is paused.
  storage::RegistrationRecord registration;
  if (storage::DecodeRegistration(bytes, &registration) &&
      !CheckRecordRoundTrip("registration", bytes, registration, storage::EncodeRegistration,
                            storage::DecodeRegistration, why)) {
    return false;
  }
  storage::PauseRecord pause;
  if (storage::DecodePause(bytes, &pause) &&
      !CheckRecordRoundTrip("pause", bytes, pause, storage::EncodePause, storage::DecodePause, why)) {
    return false;
  }

  // A replay's record, as OperatorActions::Replay and a resuming replay read it.
  storage::ReplayRecord replay;
  if (storage::DecodeReplay(bytes, &replay)) {
    if (replay.types.size() > storage::kMaxReplayListEntries || replay.ids.size() > storage::kMaxReplayListEntries)
      return Fail(why, "DecodeReplay: a list above its cap");
    for (const std::string& id : replay.ids) {
      if (id.size() != 16) return Fail(why, "DecodeReplay: an event id not of 16 bytes");
    }
    if (!CheckRecordRoundTrip("replay", bytes, replay, storage::EncodeReplay, storage::DecodeReplay, why)) return false;
  }

  // A scheduled event's timer, and a process instance, as the scheduler,
  // the process steps and `walbus scheduled|process` read them.
  storage::TimerRecord timer;
  if (storage::DecodeTimer(bytes, &timer) &&
      !CheckRecordRoundTrip("timer", bytes, timer, storage::EncodeTimer, storage::DecodeTimer, why)) {
    return false;
  }
  storage::ProcessRecord process;
  if (storage::DecodeProcess(bytes, &process)) {
    if (process.last_handled.size() > storage::kProcessHandledKept)
      return Fail(why, "DecodeProcess: history above its cap");
    if (!CheckRecordRoundTrip("process", bytes, process, storage::EncodeProcess, storage::DecodeProcess, why)) {
      return false;
    }
  }

  // As `walbus dlq` reads a dead letter: the record, then its envelope.
  storage::DeadLetterRecord dead;
  DeadLetterEntry dl;
  dl.subscriber = "#7";
  dl.seq = 42;
  if (storage::DecodeDeadLetter(bytes, &dead)) {
    if (dead.error.size() > storage::kMaxErrorBytes) return Fail(why, "DecodeDeadLetter: error above its cap");
    if (!CheckRecordRoundTrip("dead letter", bytes, dead, storage::EncodeDeadLetter, storage::DecodeDeadLetter, why))
      return false;
    if (!CheckEnvelope(dead.envelope, false, why)) return false;
    dl.record_ok = true;
    dl.record = dead;
    Status s = internal::DecodeEnvelope(dl.record.envelope, kEnvelopeMaxPayloadBytes, &dl.event);
    dl.event_ok = s.ok();
    if (!s.ok()) {
      dl.event = Event{};
      dl.event_error = s.message();
    }
  } else {
    dl.event_error = "malformed dead-letter record of " + std::to_string(bytes.size()) + " bytes";
  }
  if (!CheckDeadLetterViews(dl, why)) return false;

  // As `walbus quarantine` reads an entry.
  QuarantineEntry q;
  q.arrival = 9;
  if (storage::DecodeQuarantine(bytes, &q.record)) {
    if (q.record.raw.size() > storage::kMaxQuarantineRawBytes) return Fail(why, "DecodeQuarantine: raw above its cap");
    if (!CheckRecordRoundTrip("quarantine", bytes, q.record, storage::EncodeQuarantine, storage::DecodeQuarantine, why))
      return false;
    q.record_ok = true;
  } else {
    q.record = storage::QuarantineRecord{};
    q.record.original_bytes = bytes.size();
    q.record.raw.assign(bytes.substr(0, storage::kMaxQuarantineRawBytes));
  }
  return CheckQuarantineViews(q, why);
}

bool CheckCliValue(std::string_view text, std::string* why) {
  if (text.size() > kMaxInputBytes) return true;

  const std::optional<EventId> id = EventId::Parse(text);
  if (id.has_value() != ReferenceEventId(text))
    return Fail(why, std::string("EventId::Parse ") + (id ? "accepts" : "refuses") + " " + Printable(text));
  if (id) {
    const std::string canonical = id->ToString();
    if (canonical != AsciiLower(text))
      return Fail(why, "EventId::ToString gives " + canonical + " for " + Printable(text));
    if (EventId::Parse(canonical) != id) return Fail(why, "EventId::Parse(ToString()) differs for " + canonical);
  }

  const Status type = internal::ValidateEventType(text);
  if (!type.ok() && !type.IsInvalidArgument()) return Fail(why, "ValidateEventType: " + type.ToString());
  if (type.ok() != ReferenceEventType(text))
    return Fail(why, std::string("ValidateEventType ") + (type.ok() ? "accepts" : "refuses") + " " + Printable(text));

  const std::string name(text);
  const Status sub = internal::ValidateSubscriberName(name);
  if (!sub.ok() && !sub.IsInvalidArgument()) return Fail(why, "ValidateSubscriberName: " + sub.ToString());
  if (sub.ok() != ReferenceSubscriberName(text)) {
    return Fail(why,
                std::string("ValidateSubscriberName ") + (sub.ok() ? "accepts" : "refuses") + " " + Printable(text));
  }
  if (sub.ok()) {
    const std::string key = storage::SubscriberMetaKey(name);
    if (key.substr(0, storage::kSubscriberMetaPrefix.size()) != storage::kSubscriberMetaPrefix ||
        key.substr(storage::kSubscriberMetaPrefix.size()) != name)
      return Fail(why, "SubscriberMetaKey does not hold the name: " + Printable(key));
  }
  return true;
}

bool CheckInboundMessage(std::string_view bytes, std::string* why) {
  if (bytes.size() > kMaxInputBytes) return true;
  bridge::Headers headers;
  std::string body;
  if (!bridge::ParseMessageBytes(bytes, &headers, &body)) return true;
  Event event;
  if (!bridge::FromHeaders(headers, body, &event).ok()) return true;
  Event again;
  if (Status s = bridge::FromHeaders(bridge::ToHeaders(event), event.data, &again); !s.ok()) {
    return Fail(why, "the headers of an accepted event are refused: " + s.ToString());
  }
  // ce-time carries microseconds, cut from the nanoseconds as a written
  // fraction is cut: toward the past (floor). duration_cast would round a
  // time before 1970 toward zero instead, one microsecond later.
  const auto micros = [](std::chrono::system_clock::time_point t) {
    return std::chrono::floor<std::chrono::microseconds>(t.time_since_epoch());
  };
  if (again.id != event.id || again.type != event.type || again.source != event.source ||
      again.subject != event.subject || again.subject_version != event.subject_version ||
      again.content_type != event.content_type || again.traceparent != event.traceparent ||
      again.correlation_id != event.correlation_id || again.causation_id != event.causation_id ||
      again.data != event.data || micros(again.time) != micros(event.time)) {
    return Fail(why, "an accepted event does not survive its headers");
  }
  if (!bridge::SignatureMatches(event, "key", bridge::Sign(event, "key"))) {
    return Fail(why, "the signature of an event does not verify");
  }
  return true;
}

// A name flatc could have declared. Objects, enums and attribute keys may
// be identifiers joined by dots; a field or an enum value is one identifier
// (flatc writes a union member of another namespace, `ns.T`, as `ns_T`).
bool IsDeclarable(const flatbuffers::String* name, bool dotted) {
  if (name == nullptr || name->size() == 0) return false;
  bool start = true;
  for (const char c : name->string_view()) {
    if (c == '.' && dotted && !start) {
      start = true;
      continue;
    }
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && (start || c < '0' || c > '9')) return false;
    start = false;
  }
  return !start;
}

bool EveryNameDeclarable(const reflection::Schema& s) {
  constexpr bool kQualified = true, kPlain = false;
  auto attributes_declarable = [](const auto* attributes) {
    if (attributes == nullptr) return true;
    for (const auto* kv : *attributes) {
      if (!IsDeclarable(kv->key(), kQualified)) return false;
    }
    return true;
  };
  for (const auto* o : *s.objects()) {
    if (!IsDeclarable(o->name(), kQualified) || !attributes_declarable(o->attributes())) return false;
    for (const auto* f : *o->fields()) {
      if (!IsDeclarable(f->name(), kPlain) || !attributes_declarable(f->attributes())) return false;
    }
  }
  for (const auto* e : *s.enums()) {
    if (!IsDeclarable(e->name(), kQualified) || !attributes_declarable(e->attributes())) return false;
    for (const auto* v : *e->values()) {
      if (!IsDeclarable(v->name(), kPlain)) return false;
    }
  }
  return true;
}

// `walbus schema show` writes a schema back as source: when that source
// parses, no compatibility rule may tell it from the schema it came from.
bool CheckSchemaText(const internal::BinarySchema& schema, std::string* why) {
  std::vector<std::string> hidden;
  const std::string text = internal::SchemaSourceText(schema, &hidden);
  if (!EveryNameDeclarable(schema.schema()) || !hidden.empty()) return true;
  auto again = internal::ParseSchemaSource(text, {}, "shown.fbs");
  if (!again.ok()) return true;
  std::vector<std::string> lines = internal::CompatibilityViolations(schema, *again);
  if (lines.empty()) lines = internal::CompatibilityViolations(*again, schema);
  if (!lines.empty())
    return Fail(why, "a schema shown as source reads back differently: " + lines.front() + "\n" + text);
  return true;
}

bool CheckSchemaBytes(std::string_view bytes, std::string* why) {
  if (bytes.size() > kMaxInputBytes) return true;
  auto schema = internal::BinarySchema::FromBytes(std::string(bytes));
  if (!schema.ok()) return true;  // refused before reflection read it
  const std::vector<std::string> self = internal::CompatibilityViolations(*schema, *schema);
  if (!self.empty()) return Fail(why, "a schema is not compatible with itself: " + self.front());
  static const auto* reference = new internal::BinarySchema(*internal::ParseSchemaSource(
      "namespace fuzz; enum E : byte { A, B } union U { T } table T { s: string; e: E; u: U; v: [T]; }\n"
      "root_type T; file_identifier \"FUZZ\";",
      {}, "reference.fbs"));
  (void)internal::CompatibilityViolations(*reference, *schema);
  (void)internal::CompatibilityViolations(*schema, *reference);
  return CheckSchemaText(*schema, why);
}

// Every kind of field a payload holds (the same schema seeds the corpus:
// tests/fuzz/corpus/payload_fuzz/).
constexpr const char* kPayloadSchema = R"(
namespace fuzz;
struct Money { units: long; nanos: int; }
table Line { sku: string (required); quantity: int; price: Money; }
table Note { text: string; }
table Node { child: Node; }
union Extra { Note, Money, label: string }
table Order {
  order_id: string (required);
  priority: int = 3;
  total: Money;
  lines: [Line];
  tags: [string];
  weights: [double];
  extra: Extra;
  extras: [Extra];
  tree: Node;
  ratio: float;
  small: byte;
  tiny: ubyte;
  level: short;
  port: ushort;
  count: uint;
  total_units: ulong;
  flag: bool;
  samples: [float];
  codes: [short];
}
root_type Order;
file_identifier "FZOR";
)";

bool CheckPayloadBytes(std::string_view bytes, std::string* why) {
  if (bytes.size() > kMaxInputBytes) return true;
  static const auto* reader = [] {
    auto contract = internal::PayloadContract::Make("fuzz.order.v1", 1,
                                                    *internal::ParseSchemaSource(kPayloadSchema, {}, "payload.fbs"));
    auto* made = new internal::PayloadReader();
    if (!contract.ok() || !made->Add(std::move(*contract)).ok()) abort();
    return made;
  }();
  // Read verifies first; only a payload that passes is written as text.
  const internal::PayloadReading reading = reader->Read("fuzz.order.v1", bytes);
  if (reading.json.empty()) return true;
  if (!JsonChecker(reading.json).Document())
    return Fail(why, "a payload shown as text that is not JSON: " + reading.json);
  // What is shown reads back as the same payload: every number exactly,
  // NaN and the infinities too.
  const std::string again = testing::PayloadFromJsonKeepingDefaults(kPayloadSchema, reading.json);
  if (again.empty()) return Fail(why, "the JSON shown for a payload does not parse back: " + reading.json);
  const internal::PayloadReading second = reader->Read("fuzz.order.v1", again);
  if (second.json != reading.json) {
    return Fail(why, "a payload shown as JSON reads back differently: " + reading.json + " then " + second.json);
  }
  return true;
}

bool IsJsonDocument(std::string_view text) { return JsonChecker(text).Document(); }

bool Fail(std::string* why, std::string what) {
  if (why != nullptr) *why = std::move(what);
  return false;
}

CheckFn CheckForTarget(std::string_view target) {
  if (target == "payload_fuzz") return CheckPayloadBytes;
  if (target == "differential_fuzz") return CheckPayloadAgainstFlatc;
  if (target == "schema_fuzz") return CheckSchemaBytes;
  if (target == "inbound_fuzz") return CheckInboundMessage;
  if (target == "envelope_fuzz") return CheckEnvelopeBytes;
  if (target == "records_fuzz") return CheckRecordBytes;
  if (target == "cli_values_fuzz") return CheckCliValue;
  return nullptr;
}

int RunOrAbort(CheckFn check, const uint8_t* data, size_t size) {
  std::string why;
  if (!check(std::string_view(reinterpret_cast<const char*>(data), size), &why)) {
    fprintf(stderr, "fuzz property broken: %s\n", why.c_str());
    abort();
  }
  return 0;
}

}  // namespace walbus::fuzz
