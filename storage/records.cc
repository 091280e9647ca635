#include "storage/records.h"

#include <algorithm>

#include "bus/util/escape.h"
#include "storage/keys.h"
#include "walbus/read.h"

namespace walbus::storage {
namespace {

constexpr char kFormat = 1;

// Appends a 32-bit length and the bytes.
void PutBytes(std::string* out, std::string_view s) {
  PutBe32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// A cursor over untrusted bytes: every read checks what is left.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U8(char* v) {
    if (in_.empty()) return false;
    *v = in_[0];
    in_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t* v) {
    if (in_.size() < 4) return false;
    *v = GetBe32(in_);
    in_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t* v) {
    if (in_.size() < 8) return false;
    *v = GetBe64(in_);
    in_.remove_prefix(8);
    return true;
  }
  bool Bytes(std::string* v, size_t cap) {
    uint32_t n = 0;
    if (!U32(&n) || n > in_.size() || n > cap) return false;
    v->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool Format() {
    char f = 0;
    return U8(&f) && f == kFormat;
  }
  bool AtEnd() const { return in_.empty(); }

 private:
  std::string_view in_;
};

std::string_view Capped(std::string_view s, size_t cap) { return s.substr(0, cap); }

constexpr size_t kMaxEnvelopeBytes = (64u << 20) + 4096;
constexpr size_t kMaxShortBytes = 1024;

}  // namespace

std::string EncodeRetry(const RetryRecord& r) {
  std::string out(1, kFormat);
  PutBe32(&out, r.attempts);
  PutBe64(&out, r.first_failure_ms);
  PutBe64(&out, r.last_failure_ms);
  PutBytes(&out, Capped(r.last_error, kMaxErrorBytes));
  PutBe64(&out, r.next_attempt_ms);
  return out;
}

bool DecodeRetry(std::string_view in, RetryRecord* r) {
  Reader rd(in);
  if (!(rd.Format() && rd.U32(&r->attempts) && rd.U64(&r->first_failure_ms) && rd.U64(&r->last_failure_ms) &&
        rd.Bytes(&r->last_error, kMaxErrorBytes))) {
    return false;
  }
  // next_attempt_ms came later: a record without it is whole too.
  r->next_attempt_ms = 0;
  return rd.AtEnd() || (rd.U64(&r->next_attempt_ms) && rd.AtEnd());
}

std::string EncodeSchema(const SchemaRecord& r) {
  std::string out(1, kFormat);
  for (uint64_t v : {r.hash, r.first_registered_ms, r.last_registered_ms}) PutBe64(&out, v);
  PutBytes(&out, Capped(r.binary_schema, kMaxSchemaBytes));
  return out;
}

bool DecodeSchema(std::string_view in, SchemaRecord* r) {
  Reader rd(in);
  return rd.Format() && rd.U64(&r->hash) && rd.U64(&r->first_registered_ms) && rd.U64(&r->last_registered_ms) &&
         rd.Bytes(&r->binary_schema, kMaxSchemaBytes) && rd.AtEnd();
}

std::string ActionRecord::JsonText(std::string_view text) { return internal::JsonString(text); }

std::string ActionRecord::JsonNumbers(const std::vector<uint64_t>& numbers) {
  std::string out = "[";
  for (size_t i = 0; i < numbers.size(); ++i) out += (i ? "," : "") + std::to_string(numbers[i]);
  return out + "]";
}

std::string ActionRecord::JsonTexts(const std::vector<std::string>& texts) {
  std::string out = "[";
  for (size_t i = 0; i < texts.size(); ++i) out += (i ? "," : "") + internal::JsonString(texts[i]);
  return out + "]";
}

std::string EncodeAction(const ActionRecord& r) {
  std::string out = "{\"action\":" + internal::JsonString(r.action) +
                    ",\"operator\":" + internal::JsonString(r.operator_name) +
                    ",\"reason\":" + internal::JsonString(r.reason) + ",\"time_ms\":" + std::to_string(r.time_ms);
  for (const auto& [name, json] : r.about) out += "," + internal::JsonString(name) + ":" + json;
  return out + "}";
}

std::string EncodeRegistration(const RegistrationRecord& r) {
  std::string out(1, kFormat);
  out.push_back(r.side_effect_safe ? 1 : 0);
  PutBytes(&out, Capped(r.handler_version, kMaxShortBytes));
  const size_t types = std::min(r.types.size(), kMaxReplayListEntries);
  PutBe32(&out, static_cast<uint32_t>(types));
  for (size_t i = 0; i < types; ++i) PutBytes(&out, Capped(r.types[i], kMaxShortBytes));
  return out;
}

bool DecodeRegistration(std::string_view in, RegistrationRecord* r) {
  Reader rd(in);
  char safe = 0;
  uint32_t types = 0;
  if (!rd.Format() || !rd.U8(&safe) || (safe != 0 && safe != 1) || !rd.Bytes(&r->handler_version, kMaxShortBytes) ||
      !rd.U32(&types) || types > kMaxReplayListEntries) {
    return false;
  }
  r->side_effect_safe = safe == 1;
  r->types.assign(types, {});
  for (std::string& t : r->types) {
    if (!rd.Bytes(&t, kMaxShortBytes)) return false;
  }
  return rd.AtEnd();
}

std::string EncodePause(const PauseRecord& r) {
  std::string out(1, kFormat);
  PutBe64(&out, r.seq);
  PutBytes(&out, Capped(r.type, kMaxShortBytes));
  return out;
}

bool DecodePause(std::string_view in, PauseRecord* r) {
  Reader rd(in);
  return rd.Format() && rd.U64(&r->seq) && rd.Bytes(&r->type, kMaxShortBytes) && rd.AtEnd();
}

std::string EncodeDeadLetter(const DeadLetterRecord& r) {
  std::string out(1, kFormat);
  PutBe32(&out, r.attempts);
  PutBe64(&out, r.first_failure_ms);
  PutBe64(&out, r.last_failure_ms);
  PutBytes(&out, Capped(r.error, kMaxErrorBytes));
  PutBytes(&out, Capped(r.handler_version, kMaxShortBytes));
  PutBytes(&out, r.envelope);
  return out;
}

bool DecodeDeadLetter(std::string_view in, DeadLetterRecord* r) {
  Reader rd(in);
  return rd.Format() && rd.U32(&r->attempts) && rd.U64(&r->first_failure_ms) && rd.U64(&r->last_failure_ms) &&
         rd.Bytes(&r->error, kMaxErrorBytes) && rd.Bytes(&r->handler_version, kMaxShortBytes) &&
         rd.Bytes(&r->envelope, kMaxEnvelopeBytes) && rd.AtEnd();
}

std::string EncodeQuarantine(const QuarantineRecord& r) {
  std::string out(1, kFormat);
  PutBe64(&out, r.arrived_ms);
  PutBe64(&out, r.original_bytes);
  PutBytes(&out, Capped(r.source, kMaxShortBytes));
  PutBytes(&out, Capped(r.reason, kMaxErrorBytes));
  PutBytes(&out, Capped(r.raw, kMaxQuarantineRawBytes));
  return out;
}

bool DecodeQuarantine(std::string_view in, QuarantineRecord* r) {
  Reader rd(in);
  return rd.Format() && rd.U64(&r->arrived_ms) && rd.U64(&r->original_bytes) && rd.Bytes(&r->source, kMaxShortBytes) &&
         rd.Bytes(&r->reason, kMaxErrorBytes) && rd.Bytes(&r->raw, kMaxQuarantineRawBytes) && rd.AtEnd();
}

std::string EncodeTimer(const TimerRecord& r) {
  std::string out(1, kFormat);
  PutBe64(&out, r.scheduled_ms);
  PutBe64(&out, r.scheduled_wall_ms);
  PutBytes(&out, r.envelope);
  if (!r.schedule_key.empty()) PutBytes(&out, r.schedule_key);
  return out;
}

bool DecodeTimer(std::string_view in, TimerRecord* r) {
  Reader rd(in);
  if (!rd.Format() || !rd.U64(&r->scheduled_ms) || !rd.U64(&r->scheduled_wall_ms) ||
      !rd.Bytes(&r->envelope, kMaxEnvelopeBytes)) {
    return false;
  }
  r->schedule_key.clear();
  return rd.AtEnd() || (rd.Bytes(&r->schedule_key, kMaxKeyBytes) && !r->schedule_key.empty() && rd.AtEnd());
}

namespace {

void PutId(std::string* out, const EventId& id) { out->append(IdBytes(id)); }

bool ReadId(Reader* rd, EventId* id) {
  for (uint8_t& b : id->bytes) {
    char c = 0;
    if (!rd->U8(&c)) return false;
    b = static_cast<uint8_t>(c);
  }
  return true;
}

// Bounds on what a decoded record may claim, so a corrupt count cannot
// make a decoder reserve or loop without end.
constexpr size_t kMaxProcessTimeouts = 1024;
constexpr size_t kMaxTypeBytes = 256;

}  // namespace

std::string EncodeProcess(const ProcessRecord& r) {
  std::string out(1, kFormat);
  PutBe32(&out, r.definition_version);
  PutBe32(&out, r.state_version);
  PutBe64(&out, r.started_wall_ms);
  PutBe64(&out, r.updated_wall_ms);
  PutBe64(&out, r.events_handled);
  PutBytes(&out, r.state);
  PutBytes(&out, r.state_type);
  PutBe32(&out, static_cast<uint32_t>(r.timeouts.size()));
  for (const ProcessTimeoutRecord& t : r.timeouts) {
    PutBytes(&out, t.name);
    PutId(&out, t.id);
    PutBe64(&out, t.due_wall_ms);
  }
  PutBe32(&out, static_cast<uint32_t>(r.last_handled.size()));
  for (const ProcessHandledRecord& h : r.last_handled) {
    PutId(&out, h.id);
    PutBe64(&out, h.seq);
    PutBytes(&out, h.type);
    PutBe64(&out, h.handled_wall_ms);
  }
  return out;
}

bool DecodeProcess(std::string_view in, ProcessRecord* r) {
  Reader rd(in);
  uint32_t timeouts = 0, handled = 0;
  if (!rd.Format() || !rd.U32(&r->definition_version) || !rd.U32(&r->state_version) || !rd.U64(&r->started_wall_ms) ||
      !rd.U64(&r->updated_wall_ms) || !rd.U64(&r->events_handled) || !rd.Bytes(&r->state, kMaxProcessStateBytes) ||
      !rd.Bytes(&r->state_type, kMaxTypeBytes) || !rd.U32(&timeouts) || timeouts > kMaxProcessTimeouts) {
    return false;
  }
  r->timeouts.assign(timeouts, {});
  for (ProcessTimeoutRecord& t : r->timeouts) {
    if (!rd.Bytes(&t.name, kMaxKeyBytes) || !ReadId(&rd, &t.id) || !rd.U64(&t.due_wall_ms)) return false;
  }
  if (!rd.U32(&handled) || handled > kProcessHandledKept) return false;
  r->last_handled.assign(handled, {});
  for (ProcessHandledRecord& h : r->last_handled) {
    if (!ReadId(&rd, &h.id) || !rd.U64(&h.seq) || !rd.Bytes(&h.type, kMaxTypeBytes) || !rd.U64(&h.handled_wall_ms)) {
      return false;
    }
  }
  return rd.AtEnd();
}

std::string SubscriberSeqKey(uint32_t subscriber_id, uint64_t seq) {
  std::string k;
  k.reserve(12);
  PutBe32(&k, subscriber_id);
  PutBe64(&k, seq);
  return k;
}

bool ParseSubscriberSeqKey(std::string_view key, uint32_t* subscriber_id, uint64_t* seq) {
  if (key.size() != 12) return false;
  *subscriber_id = GetBe32(key);
  *seq = GetBe64(key.substr(4));
  return true;
}

std::string EncodeReplay(const ReplayRecord& r) {
  std::string out(1, kFormat);
  PutBe32(&out, r.subscriber_id);
  PutBytes(&out, Capped(r.subscriber, kMaxShortBytes));
  out.push_back(static_cast<char>(r.mode));
  out.push_back(static_cast<char>(r.state));
  PutBytes(&out, Capped(r.operator_name, kMaxShortBytes));
  PutBytes(&out, Capped(r.reason, kMaxShortBytes));
  PutBytes(&out, Capped(r.handler_version, kMaxShortBytes));
  for (uint64_t v : {r.from_seq, r.to_seq, static_cast<uint64_t>(r.since_ms), static_cast<uint64_t>(r.until_ms)}) {
    PutBe64(&out, v);
  }
  const size_t types = std::min(r.types.size(), kMaxReplayListEntries);
  PutBe32(&out, static_cast<uint32_t>(types));
  for (size_t i = 0; i < types; ++i) PutBytes(&out, Capped(r.types[i], kMaxShortBytes));
  PutBytes(&out, Capped(r.subject, kMaxShortBytes));
  const size_t ids = std::min(r.ids.size(), kMaxReplayListEntries);
  PutBe32(&out, static_cast<uint32_t>(ids));
  for (size_t i = 0; i < ids; ++i) PutBytes(&out, Capped(r.ids[i], 16));
  for (uint64_t v :
       {r.max_events, r.started_ms, r.ended_ms, r.selected, r.delivered, r.skipped, r.failed, r.next_seq}) {
    PutBe64(&out, v);
  }
  PutBytes(&out, Capped(r.error, kMaxErrorBytes));
  PutBytes(&out, Capped(r.cancelled_by, kMaxShortBytes));
  PutBytes(&out, Capped(r.cancel_reason, kMaxShortBytes));
  if (!r.cleared.empty()) {
    const size_t cleared = std::min(r.cleared.size(), kMaxReplayListEntries);
    PutBe32(&out, static_cast<uint32_t>(cleared));
    for (size_t i = 0; i < cleared; ++i) PutBytes(&out, Capped(r.cleared[i], kMaxShortBytes));
  }
  return out;
}

bool DecodeReplay(std::string_view in, ReplayRecord* r) {
  Reader rd(in);
  char mode = 0, state = 0;
  uint64_t since = 0, until = 0;
  uint32_t types = 0, ids = 0;
  if (!rd.Format() || !rd.U32(&r->subscriber_id) || !rd.Bytes(&r->subscriber, kMaxShortBytes) || !rd.U8(&mode) ||
      !rd.U8(&state) || !rd.Bytes(&r->operator_name, kMaxShortBytes) || !rd.Bytes(&r->reason, kMaxShortBytes) ||
      !rd.Bytes(&r->handler_version, kMaxShortBytes) || !rd.U64(&r->from_seq) || !rd.U64(&r->to_seq) ||
      !rd.U64(&since) || !rd.U64(&until) || !rd.U32(&types) || types > kMaxReplayListEntries) {
    return false;
  }
  r->mode = static_cast<uint8_t>(mode);
  r->state = static_cast<uint8_t>(state);
  r->since_ms = static_cast<int64_t>(since);
  r->until_ms = static_cast<int64_t>(until);
  r->types.assign(types, {});
  for (std::string& t : r->types) {
    if (!rd.Bytes(&t, kMaxShortBytes)) return false;
  }
  if (!rd.Bytes(&r->subject, kMaxShortBytes) || !rd.U32(&ids) || ids > kMaxReplayListEntries) return false;
  r->ids.assign(ids, {});
  for (std::string& id : r->ids) {
    if (!rd.Bytes(&id, 16) || id.size() != 16) return false;
  }
  if (!(rd.U64(&r->max_events) && rd.U64(&r->started_ms) && rd.U64(&r->ended_ms) && rd.U64(&r->selected) &&
        rd.U64(&r->delivered) && rd.U64(&r->skipped) && rd.U64(&r->failed) && rd.U64(&r->next_seq) &&
        rd.Bytes(&r->error, kMaxErrorBytes) && rd.Bytes(&r->cancelled_by, kMaxShortBytes) &&
        rd.Bytes(&r->cancel_reason, kMaxShortBytes))) {
    return false;
  }
  r->cleared.clear();
  if (rd.AtEnd()) return true;
  uint32_t cleared = 0;
  if (!rd.U32(&cleared) || cleared == 0 || cleared > kMaxReplayListEntries) return false;
  r->cleared.assign(cleared, {});
  for (std::string& name : r->cleared) {
    if (!rd.Bytes(&name, kMaxShortBytes)) return false;
  }
  return rd.AtEnd();
}

std::string ReplayScopeKey(uint64_t replay_id, std::string_view event_id16) {
  std::string key(1, kReplayScopePrefix);
  PutBe64(&key, replay_id);
  key.append(event_id16);
  return key;
}

}  // namespace walbus::storage
