// The event views of the inspection (tools/walbus/inspect.h): the outbox, one
// event's story, the inbox, the subscribers' waiting work, and the
// CloudEvents JSON export.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <sstream>

#include "bus/core/envelope.h"
#include "bus/core/schema_compat.h"
#include "bus/util/rfc3339.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/inspect_util.h"

namespace walbus::internal {
namespace {

using namespace inspect_util;

OutboxEntry DecodeEntry(uint64_t seq, std::string_view bytes, const PayloadReader& payloads) {
  OutboxEntry e;
  e.seq = seq;
  Status s = DecodeEnvelope(bytes, kMaxInspectPayloadBytes, &e.event);
  if (!s.ok()) {
    e.event = Event{};
    e.error = s.message();
    return e;
  }
  e.event.seq = seq;
  e.event_ok = true;
  e.payload = payloads.Read(e.event.type, e.event.data, e.event.schema_version);
  return e;
}

bool HasContentFilter(const OutboxFilter& f) {
  return !f.type.empty() || !f.subject.empty() || f.since.has_value() || f.until.has_value();
}

bool Matches(const OutboxFilter& f, const OutboxEntry& e) {
  if (!e.event_ok) return !HasContentFilter(f);
  if (!f.type.empty() && e.event.type != f.type) return false;
  if (!f.subject.empty() && e.event.subject != f.subject) return false;
  if (f.since && e.event.time < *f.since) return false;
  if (f.until && e.event.time >= *f.until) return false;
  return true;
}

// Visits every readable outbox entry from `from_seq` on, in order, until
// `visit` returns false.
Status ScanEvents(const storage::Db& db, const PayloadReader& payloads, uint64_t from_seq,
                  const std::function<bool(const OutboxEntry&)>& visit) {
  return db.ScanOutbox(std::max<uint64_t>(from_seq, 1), SIZE_MAX,
                       [&](uint64_t seq, std::string_view bytes) { return visit(DecodeEntry(seq, bytes, payloads)); });
}

// ---- JSON value syntax, for CloudEvents `data` ----

class JsonSyntax {
 public:
  explicit JsonSyntax(std::string_view s) : s_(s) {}
  // True when the whole text is one JSON value (RFC 8259), nested at most
  // kMaxDepth deep.
  bool OneValue() {
    SkipSpace();
    if (!Value(0)) return false;
    SkipSpace();
    return i_ == s_.size();
  }

 private:
  static constexpr int kMaxDepth = 64;
  void SkipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool Literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool Digits() {
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool Number() {
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (!Digits()) {
      return false;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!Digits()) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!Digits()) return false;
    }
    return true;
  }
  bool String() {
    ++i_;  // the opening quote
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size()) return false;
        const char e = s_[i_];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k) {
            if (++i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
          }
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return false;
        }
      }
      ++i_;
    }
    return false;
  }
  bool Value(int depth) {
    if (depth > kMaxDepth || i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{': return Container(depth, '}', true);
      case '[': return Container(depth, ']', false);
      case '"': return String();
      case 't': return Literal("true");
      case 'f': return Literal("false");
      case 'n': return Literal("null");
      default: return Number();
    }
  }
  bool Container(int depth, char close, bool object) {
    ++i_;
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return true;
    }
    for (;;) {
      SkipSpace();
      if (object) {
        if (i_ >= s_.size() || s_[i_] != '"' || !String()) return false;
        SkipSpace();
        if (i_ >= s_.size() || s_[i_] != ':') return false;
        ++i_;
        SkipSpace();
      }
      if (!Value(depth + 1)) return false;
      SkipSpace();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == close) {
        ++i_;
        return true;
      }
      if (s_[i_] != ',') return false;
      ++i_;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

std::string Base64(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t n =
        (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  if (const size_t rest = in.size() - i; rest > 0) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (rest == 2) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string MsText(const std::optional<int64_t>& ms) { return ms ? IsoTimeMs(*ms) : "-"; }

}  // namespace

Status ListOutbox(const std::string& dir, const OutboxFilter& filter, std::vector<OutboxEntry>* out, size_t limit) {
  out->clear();
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  PayloadReader payloads;
  if (Status s = payloads.Load(*view.db); !s.ok()) return s;
  return ScanEvents(*view.db, payloads, filter.from_seq, [&](const OutboxEntry& e) {
    if (e.seq > filter.to_seq || out->size() >= limit) return false;
    if (Matches(filter, e)) out->push_back(e);
    return true;
  });
}

std::string OutboxTable(const std::vector<OutboxEntry>& entries) {
  if (entries.empty()) return "no outbox entries\n";
  std::vector<std::vector<std::string>> rows = {{"SEQ", "TIME", "TYPE", "SUBJECT", "BYTES"}};
  for (const OutboxEntry& e : entries) {
    if (!e.event_ok) {
      rows.push_back({std::to_string(e.seq), "-", "unreadable", TextSafe(e.error), "-"});
      continue;
    }
    rows.push_back({std::to_string(e.seq), IsoTime(e.event.time), TextSafe(e.event.type), TextSafe(e.event.subject),
                    std::to_string(e.event.data.size())});
  }
  return Table(rows);
}

std::string OutboxText(const OutboxEntry& e) {
  std::ostringstream o;
  Field(o, "seq", std::to_string(e.seq));
  if (!e.event_ok) {
    Field(o, "event", "unreadable: " + TextSafe(e.error));
    return o.str();
  }
  EventFieldsText(o, e.event);
  Field(o, "payload", PayloadText(e.event, e.payload));
  return o.str();
}

std::string OutboxJson(const OutboxEntry& e) {
  std::ostringstream o;
  o << "{\"seq\":" << e.seq << ",\"event_ok\":" << (e.event_ok ? "true" : "false");
  if (!e.event_ok) {
    o << ",\"event_error\":" << JsonString(e.error) << "}";
    return o.str();
  }
  EventFieldsJson(o, e.event, e.payload);
  o << "}";
  return o.str();
}

std::string CloudEventJson(const Event& ev, const PayloadReading& payload, bool data_as_json) {
  // JSON that holds a nan or inf is no JSON value: such data stays bytes.
  const bool json_data = data_as_json && !payload.json.empty() && JsonSyntax(payload.json).OneValue();
  std::ostringstream o;
  o << "{\"specversion\":\"1.0\",\"id\":" << JsonString(ev.id.ToString()) << ",\"source\":" << JsonString(ev.source)
    << ",\"type\":" << JsonString(ev.type) << ",\"subject\":" << JsonString(ev.subject)
    << ",\"time\":" << JsonString(FormatRfc3339(ev.time));
  if (json_data) {
    o << ",\"datacontenttype\":\"application/json\"";
  } else if (!ev.content_type.empty()) {
    o << ",\"datacontenttype\":" << JsonString(ev.content_type);
  }
  if (!payload.dataschema.empty()) o << ",\"dataschema\":" << JsonString(payload.dataschema);
  if (!ev.traceparent.empty()) o << ",\"traceparent\":" << JsonString(ev.traceparent);
  if (ev.subject_version != 0) o << ",\"subjectversion\":" << JsonString(std::to_string(ev.subject_version));
  if (ev.correlation_id) o << ",\"correlationid\":" << JsonString(ev.correlation_id->ToString());
  if (ev.causation_id) o << ",\"causationid\":" << JsonString(ev.causation_id->ToString());
  if (ev.seq != 0) o << ",\"walbusseq\":" << JsonString(std::to_string(ev.seq));
  if (json_data) {
    o << ",\"data\":" << payload.json;
  } else if (IsJsonContentType(ev.content_type) && IsValidTextWithoutControls(ev.data) &&
             JsonSyntax(ev.data).OneValue()) {
    o << ",\"data\":" << ev.data;
  } else if (!IsJsonContentType(ev.content_type) && IsValidTextWithoutControls(ev.data)) {
    o << ",\"data\":" << JsonString(ev.data);
  } else {
    o << ",\"data_base64\":" << JsonString(Base64(ev.data));
  }
  o << "}";
  return o.str();
}

namespace {

// Where event `id16` stands for subscriber `entry` (its inbox, dead
// letters and retries), into *d; an event a dead letter holds fills
// out->event when the outbox no longer has it. *seen: handled or
// dead-lettered.
Status DeliveryOf(const storage::Db& db, const Registry::Entry& entry, std::string_view id16, EventStory* out,
                  DeliveryReport* d, bool* seen) {
  DeliveryReport& report = *d;
  std::string inbox;
  bool handled = false;
  if (Status s =
          db.Get(db.cf(storage::Cf::kInbox), storage::InboxKey(db.inbox_layout(), entry.id, id16), &inbox, &handled);
      !s.ok()) {
    return s;
  }
  uint64_t seq = out->seq;
  if (handled && inbox.size() >= 16) {
    seq = storage::GetBe64(inbox);
    report.handled_at_ms = static_cast<int64_t>(storage::GetBe64(std::string_view(inbox).substr(8)));
    if (inbox.size() >= 20) report.attempts = storage::GetBe32(std::string_view(inbox).substr(16));
    if (out->seq == 0) out->seq = seq;
  }
  std::string record;
  bool dead = false;
  if (seq != 0) {
    Status s = db.Get(db.cf(storage::Cf::kDeadLetters), storage::SubscriberSeqKey(entry.id, seq), &record, &dead);
    if (!s.ok()) return s;
  }
  if (dead) {
    report.state = "dead-lettered";
    storage::DeadLetterRecord letter;
    if (storage::DecodeDeadLetter(record, &letter)) {
      report.attempts = letter.attempts;
      report.last_error = letter.error;
      if (!out->event_known && DecodeEnvelope(letter.envelope, kMaxInspectPayloadBytes, &out->event).ok()) {
        out->event_known = true;
        out->event.seq = seq;
      }
    }
  } else if (handled) {
    report.state = "handled";
  } else if (seq != 0) {
    bool retrying = false;
    Status s = db.Get(db.cf(storage::Cf::kRetries), storage::SubscriberSeqKey(entry.id, seq), &record, &retrying);
    if (!s.ok()) return s;
    storage::RetryRecord retry;
    if (retrying && storage::DecodeRetry(record, &retry)) {
      report.state = "retrying";
      report.attempts = retry.attempts;
      report.last_error = retry.last_error;
      if (retry.next_attempt_ms != 0) report.next_attempt_ms = static_cast<int64_t>(retry.next_attempt_ms);
    } else {
      report.state = entry.durable.checkpoint >= seq ? "passed" : "pending";
    }
  } else {
    report.state = "pending";
  }
  *seen = handled || dead;
  return Status::OK();
}

}  // namespace

Status FindEventStory(const std::string& dir, const EventId& id, EventStory* out, bool* found) {
  *out = EventStory{};
  out->id = id;
  *found = false;
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  const storage::Db& db = *view.db;
  RecoveredState state;
  if (Status s = ReadRecoveredState(db, &state); !s.ok()) return s;
  PayloadReader payloads;
  if (Status s = payloads.Load(db); !s.ok()) return s;
  // The outbox holds the event unless every subscriber passed it; its
  // follow-ups name it as their cause.
  Status scan = ScanEvents(db, payloads, state.trimmed_below, [&](const OutboxEntry& e) {
    if (!e.event_ok) return true;
    if (e.event.id == id) {
      out->event_known = true;
      out->seq = e.seq;
      out->event = e.event;
    } else if (e.event.causation_id == id) {
      out->follow_ups.push_back(e);
    }
    return true;
  });
  if (!scan.ok()) return scan;
  const std::string_view id16 = storage::IdBytes(id);
  for (const auto& [name, entry] : state.subscribers) {
    DeliveryReport d;
    d.subscriber = name;
    bool seen = false;
    if (Status s = DeliveryOf(db, entry, id16, out, &d, &seen); !s.ok()) return s;
    *found |= seen;
    out->deliveries.push_back(std::move(d));
  }
  *found |= out->event_known;
  if (out->event_known) out->payload = payloads.Read(out->event.type, out->event.data, out->event.schema_version);
  return Status::OK();
}

std::string EventStoryText(const EventStory& story) {
  std::ostringstream o;
  Field(o, "event id", story.id.ToString());
  Field(o, "seq", story.seq == 0 ? "-" : std::to_string(story.seq));
  if (story.event_known) {
    std::ostringstream fields;
    EventFieldsText(fields, story.event);
    std::string text = fields.str();
    o << text.substr(text.find('\n') + 1);  // the id is above
    Field(o, "payload", PayloadText(story.event, story.payload));
  } else {
    Field(o, "event", "no longer in the outbox (every subscriber passed it)");
  }
  for (const DeliveryReport& d : story.deliveries) {
    std::string line = d.state;
    if (d.handled_at_ms) line += " at " + MsText(d.handled_at_ms);
    if (d.attempts > 0) line += ", " + std::to_string(d.attempts) + (d.attempts == 1 ? " attempt" : " attempts");
    if (d.next_attempt_ms) line += ", next attempt at " + MsText(d.next_attempt_ms);
    if (!d.last_error.empty()) line += ", last error: " + TextSafe(d.last_error);
    Field(o, "subscriber " + TextSafe(d.subscriber), line);
  }
  if (story.follow_ups.empty()) Field(o, "follow-ups", "none in the outbox");
  for (const OutboxEntry& f : story.follow_ups) {
    Field(o, "follow-up", std::to_string(f.seq) + " " + f.event.id.ToString() + " " + TextSafe(f.event.type));
  }
  return o.str();
}

std::string EventStoryJson(const EventStory& story) {
  std::ostringstream o;
  o << "{\"id\":" << JsonString(story.id.ToString()) << ",\"seq\":" << story.seq
    << ",\"event_known\":" << (story.event_known ? "true" : "false");
  if (story.event_known) {
    std::ostringstream fields;
    EventFieldsJson(fields, story.event, story.payload);
    std::string members = fields.str();
    // Drop the repeated id member.
    const std::string id_member = ",\"id\":" + JsonString(story.id.ToString());
    if (members.starts_with(id_member)) members.erase(0, id_member.size());
    o << ",\"event\":{" << members.substr(1) << "}";
  }
  o << ",\"deliveries\":[";
  for (size_t i = 0; i < story.deliveries.size(); ++i) {
    const DeliveryReport& d = story.deliveries[i];
    o << (i ? "," : "") << "{\"subscriber\":" << JsonString(d.subscriber) << ",\"state\":" << JsonString(d.state)
      << ",\"handled_at\":" << (d.handled_at_ms ? JsonString(IsoTimeMs(*d.handled_at_ms)) : "null")
      << ",\"attempts\":" << d.attempts << ",\"last_error\":" << JsonString(d.last_error)
      << ",\"next_attempt\":" << (d.next_attempt_ms ? JsonString(IsoTimeMs(*d.next_attempt_ms)) : "null") << "}";
  }
  o << "],\"follow_ups\":[";
  for (size_t i = 0; i < story.follow_ups.size(); ++i) {
    const OutboxEntry& f = story.follow_ups[i];
    o << (i ? "," : "") << "{\"seq\":" << f.seq << ",\"id\":" << JsonString(f.event.id.ToString())
      << ",\"type\":" << JsonString(f.event.type) << "}";
  }
  o << "]}";
  return o.str();
}

Status CheckInbox(const std::string& dir, const std::string& subscriber, const EventId& id, bool* handled,
                  uint64_t* seq, int64_t* handled_at_ms) {
  *handled = false;
  *seq = 0;
  *handled_at_ms = 0;
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  RecoveredState state;
  if (Status s = ReadRecoveredState(*view.db, &state); !s.ok()) return s;
  if (subscriber.empty()) return Status::InvalidArgument("no subscriber given");
  std::string prefix;
  if (Status s = SubscriberPrefix(state, subscriber, &prefix); !s.ok()) return s;
  const std::string_view id16 = storage::IdBytes(id);
  std::string value;
  const uint32_t sub_id = state.subscribers.at(subscriber).id;
  Status s = view.db->Get(view.db->cf(storage::Cf::kInbox), storage::InboxKey(view.db->inbox_layout(), sub_id, id16),
                          &value, handled);
  if (!s.ok() || !*handled) return s;
  if (value.size() < 16) return Status::Corruption("inbox record of " + std::to_string(value.size()) + " bytes");
  *seq = storage::GetBe64(value);
  *handled_at_ms = static_cast<int64_t>(storage::GetBe64(std::string_view(value).substr(8)));
  return Status::OK();
}

Status ListSubscribers(const std::string& dir, std::vector<SubscriberDetail>* out) {
  out->clear();
  DatabaseReport report;
  if (Status s = InspectDatabase(dir, &report); !s.ok()) return s;
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  std::vector<std::string> schema_types;
  if (Status s = ListSchemaTypes(*view.db, &schema_types); !s.ok()) return s;
  for (const SubscriberReport& r : report.subscribers) {
    SubscriberDetail d;
    d.report = r;
    std::string prefix;
    storage::PutBe32(&prefix, r.id);
    auto count_into = [](uint64_t* n) {
      return [n](std::string_view, std::string_view) {
        ++*n;
        return true;
      };
    };
    if (Status s = view.db->Scan(storage::Cf::kRetries, prefix, SIZE_MAX, count_into(&d.retrying)); !s.ok()) return s;
    if (Status s = view.db->Scan(storage::Cf::kDeadLetters, prefix, SIZE_MAX, count_into(&d.dead_letters)); !s.ok()) {
      return s;
    }
    const std::string parked = storage::CheckpointKey(r.id, storage::CheckpointField::kParked);
    if (Status s = view.db->Scan(storage::Cf::kCheckpoints, parked, SIZE_MAX, count_into(&d.parked)); !s.ok()) return s;
    std::string value;
    bool found = false;
    Status s = view.db->Get(view.db->cf(storage::Cf::kCheckpoints),
                            storage::CheckpointKey(r.id, storage::CheckpointField::kRegistration), &value, &found);
    if (!s.ok()) return s;
    if (storage::RegistrationRecord reg; found && storage::DecodeRegistration(value, &reg)) d.registration = reg;
    for (const std::string& type :
         d.registration && !schema_types.empty() ? d.registration->types : std::vector<std::string>{}) {
      if (!std::binary_search(schema_types.begin(), schema_types.end(), type)) d.types_without_schema.push_back(type);
    }
    s = view.db->Get(view.db->cf(storage::Cf::kCheckpoints),
                     storage::CheckpointKey(r.id, storage::CheckpointField::kPausedOn), &value, &found);
    if (!s.ok()) return s;
    if (storage::PauseRecord pause; found && storage::DecodePause(value, &pause)) d.paused_on = pause;
    out->push_back(std::move(d));
  }
  return Status::OK();
}

std::string SubscribersTable(const std::vector<SubscriberDetail>& subscribers) {
  if (subscribers.empty()) return "no subscribers registered\n";
  std::vector<std::vector<std::string>> rows = {{"NAME", "CHECKPOINT", "LAG", "OLDEST", "HANDLED", "DUPLICATES",
                                                 "DEAD-LETTERED", "RETRYING", "PARKED", "PAUSED ON"}};
  std::string registrations;
  for (const SubscriberDetail& d : subscribers) {
    const SubscriberReport& r = d.report;
    rows.push_back({TextSafe(r.name), std::to_string(r.checkpoint), std::to_string(r.lag_events),
                    r.lag_age_ms ? std::to_string(*r.lag_age_ms) + " ms" : "-", std::to_string(r.handled),
                    std::to_string(r.duplicates), std::to_string(d.dead_letters), std::to_string(d.retrying),
                    std::to_string(d.parked),
                    d.paused_on ? TextSafe(d.paused_on->type) + " at seq " + std::to_string(d.paused_on->seq) : "-"});
    if (!d.registration) continue;
    std::string types;
    for (const std::string& t : d.registration->types) types += (types.empty() ? "" : ", ") + TextSafe(t);
    registrations += TextSafe(r.name) + ": types " + (types.empty() ? "all" : types) + "; handler version " +
                     (d.registration->handler_version.empty() ? "-" : TextSafe(d.registration->handler_version)) +
                     "; " + (d.registration->side_effect_safe ? "side-effect-safe" : "not side-effect-safe");
    std::string unschemed;
    for (const std::string& t : d.types_without_schema) unschemed += (unschemed.empty() ? "" : ", ") + TextSafe(t);
    if (!unschemed.empty()) registrations += "; no schema (nothing can publish it under require_schemas): " + unschemed;
    registrations += "\n";
  }
  return Table(rows) + (registrations.empty() ? "" : "\nas last subscribed:\n" + registrations);
}

std::string SubscriberJson(const SubscriberDetail& d) {
  const SubscriberReport& r = d.report;
  std::ostringstream o;
  o << "{\"name\":" << JsonString(r.name) << ",\"id\":" << r.id << ",\"checkpoint\":" << r.checkpoint
    << ",\"lag_events\":" << r.lag_events
    << ",\"lag_age_ms\":" << (r.lag_age_ms ? std::to_string(*r.lag_age_ms) : "null") << ",\"handled\":" << r.handled
    << ",\"duplicates\":" << r.duplicates << ",\"dead_lettered\":" << r.dead_lettered
    << ",\"stale_skipped\":" << r.stale_skipped << ",\"dead_letters\":" << d.dead_letters
    << ",\"retrying\":" << d.retrying << ",\"parked\":" << d.parked << ",\"paused_on\":";
  if (d.paused_on) {
    o << "{\"seq\":" << d.paused_on->seq << ",\"type\":" << JsonString(d.paused_on->type) << "}";
  } else {
    o << "null";
  }
  o << ",\"registration\":";
  if (d.registration) {
    o << "{\"types\":[";
    for (size_t i = 0; i < d.registration->types.size(); ++i)
      o << (i ? "," : "") << JsonString(d.registration->types[i]);
    o << "],\"handler_version\":" << JsonString(d.registration->handler_version)
      << ",\"side_effect_safe\":" << (d.registration->side_effect_safe ? "true" : "false") << "}";
  } else {
    o << "null";
  }
  o << ",\"types_without_schema\":[";
  for (size_t i = 0; i < d.types_without_schema.size(); ++i)
    o << (i ? "," : "") << JsonString(d.types_without_schema[i]);
  o << "]}";
  return o.str();
}

}  // namespace walbus::internal
