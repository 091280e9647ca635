#include "storage/keys.h"

#include <cassert>
#include <cstring>

namespace walbus::storage {

void PutBe32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void PutBe64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint32_t GetBe32(std::string_view in) {
  assert(in.size() >= 4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(in[i]);
  return v;
}

uint64_t GetBe64(std::string_view in) {
  assert(in.size() >= 8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | static_cast<uint8_t>(in[i]);
  return v;
}

namespace {

// The keys that are one number: outbox seqs, action ids, quarantine
// arrivals. Each key space has its own names for it.
std::string NumberKey(uint64_t n) {
  std::string k;
  k.reserve(8);
  PutBe64(&k, n);
  return k;
}

bool ParseNumberKey(std::string_view key, uint64_t* n) {
  if (key.size() != 8) return false;
  *n = GetBe64(key);
  return true;
}

constexpr uint32_t kIngestDedupTag = 0xFFFFFFFFu;
constexpr uint32_t kIngestOrderTag = 0xFFFFFFFEu;
constexpr uint32_t kTimerStateTag = 0xFFFFFFFDu;
constexpr uint32_t kScheduleKeyVersionTag = 0xFFFFFFFCu;
constexpr uint32_t kScheduleKeyIdTag = 0xFFFFFFFBu;

std::string TaggedKey(uint32_t tag, std::string_view rest) {
  std::string k;
  k.reserve(4 + rest.size());
  PutBe32(&k, tag);
  k.append(rest);
  return k;
}

std::string IngestKey(uint32_t tag, std::string_view scope, std::string_view rest) {
  std::string k;
  k.reserve(4 + scope.size() + 1 + rest.size());
  PutBe32(&k, tag);
  k.append(scope);
  k.push_back('\0');
  k.append(rest);
  return k;
}

}  // namespace

std::string OutboxKey(uint64_t seq) { return NumberKey(seq); }
bool ParseOutboxKey(std::string_view key, uint64_t* seq) { return ParseNumberKey(key, seq); }
std::string ActionKey(uint64_t action_id) { return NumberKey(action_id); }
bool ParseActionKey(std::string_view key, uint64_t* action_id) { return ParseNumberKey(key, action_id); }
std::string QuarantineKey(uint64_t arrival) { return NumberKey(arrival); }
bool ParseQuarantineKey(std::string_view key, uint64_t* arrival) { return ParseNumberKey(key, arrival); }

std::string IngestDedupKey(std::string_view scope, const EventId& id) {
  return IngestKey(kIngestDedupTag, scope, IdBytes(id));
}

std::string IngestOrderKey(std::string_view scope, std::string_view order_key) {
  return IngestKey(kIngestOrderTag, scope, order_key);
}

std::string TimerStateKey(const EventId& id) { return TaggedKey(kTimerStateTag, IdBytes(id)); }

std::string ScheduleKeyVersionKey(std::string_view schedule_key) {
  return TaggedKey(kScheduleKeyVersionTag, schedule_key);
}

std::string ProcessKeyPrefix(std::string_view process) {
  std::string k(process);
  k.push_back('\0');
  return k;
}

std::string ProcessKey(std::string_view process, std::string_view instance_key) {
  return ProcessKeyPrefix(process).append(instance_key);
}

std::string ScheduleKeyIdKey(std::string_view schedule_key) { return TaggedKey(kScheduleKeyIdTag, schedule_key); }

uint64_t TimerStateValue(TimerState state, uint64_t ms) {
  assert(ms < (uint64_t{1} << 62));
  return (ms << 2) | static_cast<uint64_t>(state);
}

bool ParseTimerStateValue(uint64_t value, TimerState* state, uint64_t* ms) {
  const auto low = static_cast<uint8_t>(value & 3);
  if (low == 0) return false;
  *state = static_cast<TimerState>(low);
  *ms = value >> 2;
  return true;
}

std::string TimerKey(uint64_t due_ms, const EventId& id) {
  std::string k;
  k.reserve(8 + 16);
  PutBe64(&k, due_ms);
  k.append(IdBytes(id));
  return k;
}

bool ParseTimerKey(std::string_view key, uint64_t* due_ms, EventId* id) {
  if (key.size() != 8 + 16) return false;
  *due_ms = GetBe64(key);
  std::memcpy(id->bytes.data(), key.data() + 8, 16);
  return true;
}

std::string InboxKey(InboxLayout layout, uint32_t subscriber_id, std::string_view event_id16) {
  assert(event_id16.size() == 16);
  std::string k;
  k.reserve(20);
  if (layout == InboxLayout::kEventFirst) k.append(event_id16);
  PutBe32(&k, subscriber_id);
  if (layout == InboxLayout::kSubscriberFirst) k.append(event_id16);
  return k;
}

bool ParseInboxKey(InboxLayout layout, std::string_view key, uint32_t* subscriber_id) {
  if (key.size() != 4 + 16) return false;
  *subscriber_id = GetBe32(layout == InboxLayout::kEventFirst ? key.substr(16) : key);
  return true;
}

bool RelayInboxKey(InboxLayout from, std::string_view key, InboxLayout to, std::string* out) {
  uint32_t subscriber_id = 0;
  if (!ParseInboxKey(from, key, &subscriber_id)) return false;
  *out = InboxKey(to, subscriber_id, from == InboxLayout::kEventFirst ? key.substr(0, 16) : key.substr(4));
  return true;
}

std::string InboxValue(uint64_t seq, uint64_t handled_unix_ms, uint32_t runs) {
  std::string v;
  v.reserve(20);
  PutBe64(&v, seq);
  PutBe64(&v, handled_unix_ms);
  PutBe32(&v, runs);
  return v;
}

std::string VersionKey(uint32_t cf_id, std::string_view key) {
  std::string k;
  k.reserve(4 + key.size());
  PutBe32(&k, cf_id);
  k.append(key);
  return k;
}

std::string CheckpointKey(uint32_t subscriber_id, CheckpointField field, std::string_view subject) {
  std::string k;
  k.reserve(5 + subject.size());
  PutBe32(&k, subscriber_id);
  k.push_back(static_cast<char>(field));
  k.append(subject);
  return k;
}

std::string SubscriberMetaKey(std::string_view name) {
  std::string k(kSubscriberMetaPrefix);
  k.append(name);
  return k;
}

std::string RemovedSubscriberKey(uint32_t id) {
  std::string k(kRemovedSubscriberMetaPrefix);
  PutBe32(&k, id);
  return k;
}

bool ParseRemovedSubscriberKey(std::string_view key, uint32_t* id) {
  if (key.size() != kRemovedSubscriberMetaPrefix.size() + 4 || !key.starts_with(kRemovedSubscriberMetaPrefix)) {
    return false;
  }
  *id = GetBe32(key.substr(kRemovedSubscriberMetaPrefix.size()));
  return true;
}

std::string SchemaKeyPrefix(std::string_view type) {
  std::string k(kSchemaMetaPrefix);
  if (type.empty()) return k;
  k.append(type);
  k.push_back('\0');
  return k;
}

std::string SchemaKey(std::string_view type, uint32_t version) {
  std::string k = SchemaKeyPrefix(type);
  PutBe32(&k, version);
  return k;
}

std::string EncodeCounter(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
  return out;
}

bool DecodeCounter(std::string_view in, uint64_t* v) {
  if (in.size() != 8) return false;
  uint64_t r = 0;
  for (int i = 7; i >= 0; --i) r = r << 8 | static_cast<uint8_t>(in[i]);
  *v = r;
  return true;
}

}  // namespace walbus::storage
