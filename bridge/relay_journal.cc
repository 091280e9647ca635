#include "bridge/relay_journal.h"

#include <algorithm>
#include <map>

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

// Ends an entry whose server_run names a run of the server; entries
// without it (older releases) named a connection of one process.
constexpr char kServerRunFormat = 'r';

// Of `group`, entries of one run sorted by stream sequence, how many the
// stream still holds (a prefix, as FindLostEntries says).
Result<size_t> HeldPrefix(const std::vector<const JournalEntry*>& group, const StreamHoldsFn& stream_holds) {
  size_t lo = 0, hi = group.size();  // [0, lo) held, [hi, n) lost
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    Result<bool> held = stream_holds(*group[mid]);
    if (!held.ok()) return held.status();
    if (*held) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace

uint64_t ServerRunOf(std::string_view server_id) {
  if (server_id.empty()) return kUnknownServerRun;
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (char c : server_id) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h == kUnknownServerRun ? 1 : h;
}

Result<std::vector<bool>> FindLostEntries(const std::vector<const JournalEntry*>& entries, uint64_t current_run,
                                          const StreamHoldsFn& stream_holds) {
  std::vector<bool> lost(entries.size(), false);
  std::map<uint64_t, std::vector<size_t>> by_run;  // indexes into entries
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t run = entries[i]->server_run;
    if (run == kUnknownServerRun) {
      Result<bool> held = stream_holds(*entries[i]);
      if (!held.ok()) return held.status();
      lost[i] = !*held;
    } else if (run != current_run) {
      by_run[run].push_back(i);
    }
  }
  for (auto& [run, indexes] : by_run) {
    std::sort(indexes.begin(), indexes.end(),
              [&](size_t a, size_t b) { return entries[a]->stream_seq < entries[b]->stream_seq; });
    std::vector<const JournalEntry*> group;
    group.reserve(indexes.size());
    for (size_t i : indexes) group.push_back(entries[i]);
    Result<size_t> held = HeldPrefix(group, stream_holds);
    if (!held.ok()) return held.status();
    for (size_t k = *held; k < indexes.size(); ++k) lost[indexes[k]] = true;
  }
  return lost;
}

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

std::string RelayKeys::Lane() const { return prefix_ + "v"; }

bool RelayLane::Takes(std::string_view type) const {
  const bool named = std::find(types.begin(), types.end(), type) != types.end();
  return named != all_but;
}

// be64 priority, be64 cap, be64 burst, 'a' (all but) or 'o' (only), then
// each type followed by '\0'.
std::string EncodeRelayLane(const RelayLane& lane) {
  std::string out = EncodeU64(lane.priority) + EncodeU64(lane.max_bytes_per_second) + EncodeU64(lane.burst_bytes);
  out.push_back(lane.all_but ? 'a' : 'o');
  for (const std::string& type : lane.types) {
    out += type;
    out.push_back('\0');
  }
  return out;
}

std::optional<RelayLane> DecodeRelayLane(std::string_view bytes) {
  constexpr size_t kFixed = 3 * 8 + 1;
  if (bytes.size() < kFixed || (bytes[24] != 'a' && bytes[24] != 'o')) return std::nullopt;
  RelayLane lane;
  lane.priority = static_cast<uint32_t>(*DecodeU64(bytes.substr(0, 8)));
  lane.max_bytes_per_second = *DecodeU64(bytes.substr(8, 8));
  lane.burst_bytes = *DecodeU64(bytes.substr(16, 8));
  lane.all_but = bytes[24] == 'a';
  for (std::string_view rest = bytes.substr(kFixed); !rest.empty();) {
    const size_t end = rest.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    lane.types.emplace_back(rest.substr(0, end));
    rest.remove_prefix(end + 1);
  }
  return lane;
}

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
  out.append(EncodeU64(entry.server_run));
  AppendField(&out, entry.msg_id);
  AppendField(&out, entry.nats_subject);
  AppendField(&out, entry.message);
  out.push_back(kServerRunFormat);
  return out;
}

std::optional<JournalEntry> DecodeJournalEntry(std::string_view bytes) {
  JournalEntry e;
  if (!TakeU64(&bytes, &e.stream_seq) || !TakeU64(&bytes, &e.acked_ms) || !TakeU64(&bytes, &e.server_run) ||
      !TakeField(&bytes, &e.msg_id) || !TakeField(&bytes, &e.nats_subject) || !TakeField(&bytes, &e.message)) {
    return std::nullopt;
  }
  if (bytes.empty()) {
    e.server_run = kUnknownServerRun;  // a connection's tag, not a run
  } else if (bytes != std::string_view(&kServerRunFormat, 1)) {
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
