#include "bridge/relay_journal.h"

namespace walbus::bridge {
namespace {

void AppendField(std::string* out, std::string_view field) {
  out->append(EncodeU64(field.size()));
  out->append(field);
}

bool TakeU64(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  *v = *DecodeU64(in->substr(0, 8));
  in->remove_prefix(8);
  return true;
}

bool TakeField(std::string_view* in, std::string* field) {
  uint64_t n = 0;
  if (!TakeU64(in, &n) || n > in->size()) return false;
  field->assign(in->substr(0, n));
  in->remove_prefix(n);
  return true;
}

}  // namespace

RelayKeys::RelayKeys(std::string_view relay_name) : prefix_("relay") {
  prefix_.push_back('\0');
  prefix_.append(relay_name);
  prefix_.push_back('\0');
}

std::string InboundCursorKey(std::string_view durable) {
  std::string k = "inbound";
  k.push_back('\0');
  k.append(durable);
  k.push_back('\0');
  k.append("cursor");
  return k;
}

std::string RelayKeys::Origin() const { return prefix_ + "o"; }

std::string RelayKeys::Position(std::string_view source, std::string_view subject) const {
  std::string k = prefix_ + "p";
  k.append(source);
  k.push_back('\0');
  k.append(subject);
  return k;
}

std::string RelayKeys::Journal(uint64_t event_seq) const { return prefix_ + "j" + EncodeU64(event_seq); }

std::string RelayKeys::LowMark() const { return prefix_ + "l"; }

std::string RelayKeys::Unrepairable() const { return prefix_ + "u"; }

std::string RelayKeys::Published() const { return prefix_ + "s"; }

std::string RelayKeys::SubjectsProblem() const { return prefix_ + "m"; }

std::string EncodeU64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

std::optional<uint64_t> DecodeU64(std::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  uint64_t v = 0;
  for (char c : bytes) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}

std::string EncodeJournalEntry(const JournalEntry& entry) {
  std::string out;
  out.reserve(24 + 3 * 8 + entry.msg_id.size() + entry.nats_subject.size() + entry.message.size());
  out.append(EncodeU64(entry.stream_seq));
  out.append(EncodeU64(entry.acked_ms));
  out.append(EncodeU64(entry.connection));
  AppendField(&out, entry.msg_id);
  AppendField(&out, entry.nats_subject);
  AppendField(&out, entry.message);
  return out;
}

std::optional<JournalEntry> DecodeJournalEntry(std::string_view bytes) {
  JournalEntry e;
  if (!TakeU64(&bytes, &e.stream_seq) || !TakeU64(&bytes, &e.acked_ms) || !TakeU64(&bytes, &e.connection) ||
      !TakeField(&bytes, &e.msg_id) || !TakeField(&bytes, &e.nats_subject) || !TakeField(&bytes, &e.message) ||
      !bytes.empty()) {
    return std::nullopt;
  }
  return e;
}

Status ColumnFamilyReadError(std::string_view role, std::string_view column_family, const Status& read) {
  if (!read.IsInvalidArgument()) return read;
  return Status::InvalidArgument(std::string(role) + " column family '" + std::string(column_family) +
                                 "': " + read.message());
}

}  // namespace walbus::bridge
