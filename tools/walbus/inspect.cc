#include "tools/walbus/inspect.h"

#include "tools/walbus/inspect_util.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "bus/core/envelope.h"
#include "bus/dispatch/oldest_dropper.h"
#include "bus/dispatch/recovery.h"
#include "bus/telemetry/metrics.h"
#include "bus/util/escape.h"
#include "bus/util/hex.h"
#include "bus/util/rfc3339.h"
#include "bus/util/unix_time.h"
#include "bus/util/utf8.h"
#include "storage/db.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace inspect_util {

Status OpenSecondary(const std::string& dir, SecondaryView* view) {
  if (view->scratch.path().empty()) return Status::IOError("cannot create a temporary directory");
  storage::OpenOptions so;
  so.dir = dir;
  so.mode = storage::OpenOptions::Mode::kSecondary;
  so.secondary_dir = view->scratch.path();
  return storage::Db::Open(so, &view->db);
}

// Display width of TextSafe output: one column per code point.
size_t Columns(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

bool IsValidTextWithoutControls(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8SequenceAt(s, i, &cp);
    if (n == 0 || IsControlCodePoint(cp)) return false;
    i += n;
  }
  return true;
}

// "application/json", in any case, with or without parameters.
bool IsJsonContentType(std::string_view ct) {
  ct = ct.substr(0, ct.find(';'));
  while (!ct.empty() && (ct.back() == ' ' || ct.back() == '\t')) ct.remove_suffix(1);
  constexpr std::string_view kJson = "application/json";
  if (ct.size() != kJson.size()) return false;
  for (size_t i = 0; i < ct.size(); ++i) {
    char c = ct[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kJson[i]) return false;
  }
  return true;
}

std::string Hex(std::string_view s, size_t max_bytes) { return HexEncode(s.substr(0, max_bytes)); }

// "2024-05-01T12:34:56.789Z"; the bare number outside the years 0-9999
// (a corrupt record's time is cast from uint64).
std::string IsoTimeMs(int64_t unix_ms) {
  std::string text = FormatRfc3339Millis(unix_ms);
  return text.empty() ? std::to_string(unix_ms) + " ms" : text;
}

std::string IsoTime(std::chrono::system_clock::time_point t) { return IsoTimeMs(ToUnixMillis(t)); }

// Failure times are unset (0) only in a record written by hand.
std::string FailureTimeText(uint64_t ms) { return ms == 0 ? "-" : IsoTimeMs(static_cast<int64_t>(ms)); }
std::string FailureTimeJson(uint64_t ms) { return ms == 0 ? "null" : JsonString(IsoTimeMs(static_cast<int64_t>(ms))); }

// Left-aligned columns; the last column is not padded. Widths are capped
// so that one long value does not push every row off the screen.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  constexpr size_t kMaxWidth = 40;
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], std::min(Columns(row[c]), kMaxWidth));
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      out += row[c];
      if (c + 1 == row.size()) break;
      const size_t w = Columns(row[c]);
      out.append(w < widths[c] ? widths[c] - w + 2 : 2, ' ');
    }
    out += '\n';
  }
  return out;
}

// One "label  value" line of a detail view.
void Field(std::ostringstream& o, std::string_view label, std::string_view value) {
  constexpr size_t kLabelWidth = 17;
  o << label;
  for (size_t i = label.size(); i < kLabelWidth; ++i) o << ' ';
  if (label.size() >= kLabelWidth) o << "  ";  // a long label still stands apart
  o << value << "\n";
}

std::string HexSummary(std::string_view bytes) {
  std::string out = std::to_string(bytes.size()) + " bytes, hex";
  if (bytes.size() > kPayloadHexBytes) out += " (first " + std::to_string(kPayloadHexBytes) + ")";
  out += ": ";
  out += Hex(bytes, kPayloadHexBytes);
  return out;
}

// Subscriber ids to names, from the registry.
std::map<uint32_t, std::string> SubscriberNames(const RecoveredState& state) {
  std::map<uint32_t, std::string> names;
  for (const auto& [name, e] : state.subscribers) names[e.id] = name;
  return names;
}

// The key prefix of one subscriber's entries, or the empty prefix (every
// entry) for an empty name.
Status SubscriberPrefix(const RecoveredState& state, const std::string& subscriber, std::string* prefix) {
  prefix->clear();
  if (subscriber.empty()) return Status::OK();
  auto it = state.subscribers.find(subscriber);
  if (it == state.subscribers.end()) return Status::InvalidArgument("no subscriber named " + subscriber);
  storage::PutBe32(prefix, it->second.id);
  return Status::OK();
}

void EventFieldsText(std::ostringstream& o, const Event& ev) {
  Field(o, "event id", ev.id.ToString());
  Field(o, "type", TextSafe(ev.type));
  Field(o, "source", TextSafe(ev.source));
  Field(o, "subject", TextSafe(ev.subject));
  Field(o, "subject version", std::to_string(ev.subject_version));
  Field(o, "time", IsoTime(ev.time));
  if (!ev.content_type.empty()) Field(o, "content type", TextSafe(ev.content_type));
  if (ev.correlation_id) Field(o, "correlation id", ev.correlation_id->ToString());
  if (ev.causation_id) Field(o, "causation id", ev.causation_id->ToString());
  if (!ev.traceparent.empty()) Field(o, "traceparent", TextSafe(ev.traceparent));
}

std::string PayloadText(const Event& ev, const PayloadReading& payload) {
  if (!payload.json.empty()) {
    return std::to_string(ev.data.size()) + " bytes, schema version " + std::to_string(payload.version) + ": " +
           TextSafe(payload.json);
  }
  if (IsJsonContentType(ev.content_type) && IsValidTextWithoutControls(ev.data)) {
    return std::to_string(ev.data.size()) + " bytes, JSON: " + ev.data;
  }
  return HexSummary(ev.data);
}

void EventFieldsJson(std::ostringstream& o, const Event& ev, const PayloadReading& payload) {
  const auto optional_id = [](const std::optional<EventId>& id) {
    return id ? JsonString(id->ToString()) : std::string("null");
  };
  o << ",\"id\":" << JsonString(ev.id.ToString()) << ",\"type\":" << JsonString(ev.type)
    << ",\"source\":" << JsonString(ev.source) << ",\"subject\":" << JsonString(ev.subject)
    << ",\"subject_version\":" << ev.subject_version << ",\"time\":" << JsonString(IsoTime(ev.time))
    << ",\"content_type\":" << JsonString(ev.content_type) << ",\"correlation_id\":" << optional_id(ev.correlation_id)
    << ",\"causation_id\":" << optional_id(ev.causation_id) << ",\"traceparent\":" << JsonString(ev.traceparent)
    << ",\"payload_size\":" << ev.data.size();
  if (!payload.json.empty()) {
    o << ",\"payload_json\":" << JsonString(payload.json) << ",\"payload_schema_version\":" << payload.version
      << ",\"dataschema\":" << JsonString(payload.dataschema);
  } else if (IsJsonContentType(ev.content_type) && IsValidTextWithoutControls(ev.data)) {
    o << ",\"payload_json\":" << JsonString(ev.data);
  } else {
    o << ",\"payload_hex\":" << JsonString(Hex(ev.data, kPayloadHexBytes))
      << ",\"payload_truncated\":" << (ev.data.size() > kPayloadHexBytes ? "true" : "false");
  }
}

}  // namespace inspect_util

namespace {

using namespace inspect_util;

DeadLetterEntry MakeDeadLetterEntry(std::string_view key, std::string_view value,
                                    const std::map<uint32_t, std::string>& names, const PayloadReader& payloads) {
  DeadLetterEntry e;
  uint32_t id = 0;
  if (!storage::ParseSubscriberSeqKey(key, &id, &e.seq)) {
    e.subscriber = "?";
    e.event_error = "malformed dead-letter key of " + std::to_string(key.size()) + " bytes";
    return e;
  }
  auto name = names.find(id);
  e.subscriber = name != names.end() ? name->second : "#" + std::to_string(id);
  if (!storage::DecodeDeadLetter(value, &e.record)) {
    e.record = storage::DeadLetterRecord{};
    e.event_error = "malformed dead-letter record of " + std::to_string(value.size()) + " bytes";
    return e;
  }
  e.record_ok = true;
  Status s = DecodeEnvelope(e.record.envelope, kMaxInspectPayloadBytes, &e.event);
  if (!s.ok()) {
    e.event = Event{};
    e.event_error = s.message();
    return e;
  }
  e.event.seq = e.seq;
  e.event_ok = true;
  e.payload = payloads.Read(e.event.type, e.event.data, e.event.schema_version);
  return e;
}

QuarantineEntry MakeQuarantineEntry(std::string_view key, std::string_view value, const PayloadReader& payloads) {
  QuarantineEntry e;
  const bool key_ok = storage::ParseQuarantineKey(key, &e.arrival);
  if (key_ok && storage::DecodeQuarantine(value, &e.record)) {
    e.record_ok = true;
    Event event;
    if (DecodeEnvelope(e.record.raw, kMaxInspectPayloadBytes, &event).ok()) {
      e.payload = payloads.Read(event.type, event.data, event.schema_version);
    }
    return e;
  }
  e.record = storage::QuarantineRecord{};
  e.record.original_bytes = value.size();
  e.record.raw.assign(value.substr(0, storage::kMaxQuarantineRawBytes));
  return e;
}

Status ScanDeadLetters(const std::string& dir, const std::string& subscriber, std::string_view key_suffix, size_t limit,
                       std::vector<DeadLetterEntry>* out) {
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  RecoveredState state;
  if (Status s = ReadRecoveredState(*view.db, &state); !s.ok()) return s;
  std::string prefix;
  if (Status s = SubscriberPrefix(state, subscriber, &prefix); !s.ok()) return s;
  prefix.append(key_suffix);
  const auto names = SubscriberNames(state);
  PayloadReader payloads;
  if (Status s = payloads.Load(*view.db); !s.ok()) return s;
  return view.db->Scan(storage::Cf::kDeadLetters, prefix, limit, [&](std::string_view k, std::string_view v) {
    out->push_back(MakeDeadLetterEntry(k, v, names, payloads));
    return true;
  });
}

Status ScanQuarantine(const std::string& dir, std::string_view prefix, size_t limit,
                      std::vector<QuarantineEntry>* out) {
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  PayloadReader payloads;
  if (Status s = payloads.Load(*view.db); !s.ok()) return s;
  return view.db->Scan(storage::Cf::kQuarantine, prefix, limit, [&](std::string_view k, std::string_view v) {
    out->push_back(MakeQuarantineEntry(k, v, payloads));
    return true;
  });
}

}  // namespace

using namespace inspect_util;

Status InspectDatabase(const std::string& dir, DatabaseReport* report) {
  *report = DatabaseReport{};
  report->dir = dir;
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  const storage::Db* db = view.db.get();
  RecoveredState state;
  if (Status s = ReadRecoveredState(*db, &state); !s.ok()) return s;
  report->last_seq = state.last_seq;
  report->trimmed_below = state.trimmed_below;
  report->column_families = db->app_cf_names();
  std::sort(report->column_families.begin(), report->column_families.end());
  uint64_t min_checkpoint = state.last_seq;
  for (const auto& [name, e] : state.subscribers) {
    SubscriberReport r;
    r.name = name;
    r.id = e.id;
    r.checkpoint = e.durable.checkpoint;
    r.lag_events = state.last_seq - e.durable.checkpoint;
    r.handled = e.durable.handled;
    r.duplicates = e.durable.duplicates;
    r.dead_lettered = e.durable.dead_lettered;
    r.stale_skipped = e.durable.stale_skipped;
    r.dropped = e.durable.dropped;
    min_checkpoint = std::min(min_checkpoint, r.checkpoint);
    report->subscribers.push_back(std::move(r));
  }
  report->outbox_backlog = state.last_seq - min_checkpoint;
  report->disk_use = MeasureDiskUse(*db, state.trimmed_below);
  if (Status s = ReadDroppedByType(*db, &report->dropped_by_type); !s.ok()) return s;
  // The age of the event just above a checkpoint: one seek, never a scan.
  auto age_above = [&](uint64_t checkpoint, std::optional<int64_t>* age) {
    if (checkpoint >= state.last_seq) return Status::OK();
    Status decode;
    Status scan = db->ScanOutbox(checkpoint + 1, 1, [&](uint64_t, std::string_view bytes) {
      Event e;
      decode = DecodeEnvelope(bytes, kMaxInspectPayloadBytes, &e);
      if (decode.ok()) {
        *age = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now() - e.time).count();
      }
      return false;
    });
    return scan.ok() ? decode : scan;
  };
  if (Status s = age_above(min_checkpoint, &report->oldest_backlog_age_ms); !s.ok()) return s;
  for (SubscriberReport& r : report->subscribers) {
    if (Status s = age_above(r.checkpoint, &r.lag_age_ms); !s.ok()) return s;
  }
  return Status::OK();
}

Status ReadDroppedCounts(const std::string& dir, std::map<std::string, uint64_t>* by_type) {
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  return ReadDroppedByType(*view.db, by_type);
}

std::vector<MetricFamily> ReportMetrics(const DatabaseReport& r) {
  std::vector<SubscriberProgress> progress;
  for (const SubscriberReport& s : r.subscribers) {
    progress.push_back({s.name, s.checkpoint, s.handled, s.duplicates, s.dead_lettered, s.stale_skipped,
                        s.lag_age_ms ? static_cast<double>(*s.lag_age_ms) / 1000.0 : 0.0});
  }
  MetricsWriter w;
  WriteProgressMetrics(
      w, r.last_seq, r.oldest_backlog_age_ms ? static_cast<double>(*r.oldest_backlog_age_ms) / 1000.0 : 0.0, progress);
  WriteDiskUseMetrics(w, r.disk_use);
  return w.TakeFamilies();
}

std::string MetricSampleJson(const MetricFamily& family, const MetricSample& sample) {
  // One number form for both expositions; JSON has no Inf or NaN: a string.
  const auto number = [](double v) {
    const std::string text = MetricNumber(v);
    return std::isfinite(v) ? text : "\"" + text + "\"";
  };
  static const char* const kTypes[] = {"counter", "gauge", "histogram"};
  std::ostringstream o;
  o << "{\"name\":" << JsonString(family.name) << ",\"type\":\"" << kTypes[static_cast<int>(family.type)]
    << "\",\"labels\":{";
  for (size_t i = 0; i < sample.labels.size(); ++i) {
    o << (i ? "," : "") << JsonString(sample.labels[i].name) << ":" << JsonString(sample.labels[i].value);
  }
  o << "}";
  if (family.type != MetricType::kHistogram) {
    o << ",\"value\":" << number(sample.value) << "}";
    return o.str();
  }
  o << ",\"buckets\":[";
  for (size_t i = 0; i < sample.buckets.size(); ++i) {
    o << (i ? "," : "") << "{\"le\":" << number(sample.buckets[i].upper_bound)
      << ",\"count\":" << sample.buckets[i].cumulative_count << "}";
  }
  o << "],\"sum\":" << number(sample.sum) << ",\"count\":" << sample.count << "}";
  return o.str();
}

std::string ReportJson(const DatabaseReport& r) {
  std::ostringstream o;
  o << "{\"dir\":" << JsonString(r.dir) << ",\"last_seq\":" << r.last_seq << ",\"outbox_backlog\":" << r.outbox_backlog
    << ",\"oldest_backlog_age_ms\":";
  if (r.oldest_backlog_age_ms) {
    o << *r.oldest_backlog_age_ms;
  } else {
    o << "null";
  }
  o << ",\"subscribers\":[";
  for (size_t i = 0; i < r.subscribers.size(); ++i) {
    const SubscriberReport& s = r.subscribers[i];
    o << (i ? "," : "") << "{\"name\":" << JsonString(s.name) << ",\"checkpoint\":" << s.checkpoint
      << ",\"lag_events\":" << s.lag_events << ",\"handled\":" << s.handled << ",\"duplicates\":" << s.duplicates
      << ",\"dead_lettered\":" << s.dead_lettered << ",\"dropped\":" << s.dropped << "}";
  }
  o << "],\"column_families\":[";
  for (size_t i = 0; i < r.column_families.size(); ++i) o << (i ? "," : "") << JsonString(r.column_families[i]);
  const DiskUse& d = r.disk_use;
  o << "],\"disk_use\":{\"outbox\":" << d.outbox << ",\"dead_letters\":" << d.dead_letters
    << ",\"quarantine\":" << d.quarantine << ",\"scheduled\":" << d.scheduled << ",\"log\":" << d.log
    << "},\"dropped_by_type\":{";
  bool first = true;
  for (const auto& [type, n] : r.dropped_by_type) {
    o << (first ? "" : ",") << JsonString(type) << ":" << n;
    first = false;
  }
  o << "}}";
  return o.str();
}

std::string ReportText(const DatabaseReport& r) {
  std::ostringstream o;
  o << "database        " << r.dir << "\n"
    << "last seq        " << r.last_seq << "\n"
    << "outbox backlog  " << r.outbox_backlog << " events";
  if (r.oldest_backlog_age_ms) o << ", oldest " << *r.oldest_backlog_age_ms << " ms old";
  o << "\n";
  if (r.subscribers.empty()) o << "subscribers     none\n";
  for (const SubscriberReport& s : r.subscribers) {
    o << "subscriber      " << s.name << ": checkpoint " << s.checkpoint << ", lag " << s.lag_events << ", handled "
      << s.handled << ", duplicates " << s.duplicates << ", dead-lettered " << s.dead_lettered;
    if (s.dropped != 0) o << ", dropped before it took them " << s.dropped;
    o << "\n";
  }
  o << "column families ";
  for (size_t i = 0; i < r.column_families.size(); ++i) o << (i ? ", " : "") << TextSafe(r.column_families[i]);
  o << (r.column_families.empty() ? "none\n" : "\n");
  const DiskUse& d = r.disk_use;
  o << "disk use        " << d.total() << " bytes: outbox " << d.outbox << ", dead letters " << d.dead_letters
    << ", quarantine " << d.quarantine << ", scheduled " << d.scheduled << ", write-ahead log " << d.log << "\n";
  for (const auto& [type, n] : r.dropped_by_type) {
    o << "dropped         " << n << " events of " << TextSafe(type) << " (drop oldest, for the disk budget)\n";
  }
  return o.str();
}

Status ListDeadLetters(const std::string& dir, const std::string& subscriber, std::vector<DeadLetterEntry>* out,
                       size_t limit) {
  out->clear();
  return ScanDeadLetters(dir, subscriber, {}, limit, out);
}

Status FindDeadLetter(const std::string& dir, const std::string& subscriber, uint64_t seq, DeadLetterEntry* out,
                      bool* found) {
  *found = false;
  if (subscriber.empty()) return Status::InvalidArgument("a dead letter is named by subscriber and seq");
  std::string seq_key;
  storage::PutBe64(&seq_key, seq);
  std::vector<DeadLetterEntry> entries;
  if (Status s = ScanDeadLetters(dir, subscriber, seq_key, 1, &entries); !s.ok()) return s;
  if (entries.empty()) return Status::OK();
  *out = std::move(entries.front());
  *found = true;
  return Status::OK();
}

Status ListQuarantine(const std::string& dir, std::vector<QuarantineEntry>* out, size_t limit) {
  out->clear();
  return ScanQuarantine(dir, {}, limit, out);
}

Status FindQuarantine(const std::string& dir, uint64_t arrival, QuarantineEntry* out, bool* found) {
  *found = false;
  std::vector<QuarantineEntry> entries;
  if (Status s = ScanQuarantine(dir, storage::QuarantineKey(arrival), 1, &entries); !s.ok()) return s;
  if (entries.empty()) return Status::OK();
  *out = std::move(entries.front());
  *found = true;
  return Status::OK();
}

std::string DeadLetterTable(const std::vector<DeadLetterEntry>& entries) {
  if (entries.empty()) return "no dead letters\n";
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"SUBSCRIBER", "SEQ", "TYPE", "SUBJECT", "ATTEMPTS", "ERROR"});
  for (const DeadLetterEntry& e : entries) {
    std::vector<std::string> row{TextSafe(e.subscriber), std::to_string(e.seq)};
    if (!e.record_ok) {
      row.insert(row.end(), {"-", "-", "-", TextSafe(e.event_error)});
    } else if (!e.event_ok) {
      row.insert(row.end(), {"?", "?", std::to_string(e.record.attempts),
                             TextSafe(e.record.error) + " (event unreadable: " + TextSafe(e.event_error) + ")"});
    } else {
      row.insert(row.end(), {TextSafe(e.event.type), TextSafe(e.event.subject), std::to_string(e.record.attempts),
                             TextSafe(e.record.error)});
    }
    rows.push_back(std::move(row));
  }
  return Table(rows);
}

std::string DeadLetterText(const DeadLetterEntry& e) {
  std::ostringstream o;
  Field(o, "subscriber", TextSafe(e.subscriber));
  Field(o, "seq", std::to_string(e.seq));
  if (!e.record_ok) {
    Field(o, "record", "unreadable: " + TextSafe(e.event_error));
    return o.str();
  }
  if (e.event_ok) {
    EventFieldsText(o, e.event);
  } else {
    Field(o, "event", "unreadable: " + TextSafe(e.event_error));
  }
  Field(o, "attempts", std::to_string(e.record.attempts));
  Field(o, "first failure", FailureTimeText(e.record.first_failure_ms));
  Field(o, "last failure", FailureTimeText(e.record.last_failure_ms));
  Field(o, "handler version", e.record.handler_version.empty() ? "-" : TextSafe(e.record.handler_version));
  Field(o, "error", TextSafe(e.record.error));
  if (!e.event_ok) {
    Field(o, "envelope", HexSummary(e.record.envelope));
  } else {
    Field(o, "payload", PayloadText(e.event, e.payload));
  }
  return o.str();
}

std::string DeadLetterJson(const DeadLetterEntry& e) {
  std::ostringstream o;
  o << "{\"subscriber\":" << JsonString(e.subscriber) << ",\"seq\":" << e.seq
    << ",\"record_ok\":" << (e.record_ok ? "true" : "false");
  if (e.record_ok) {
    o << ",\"attempts\":" << e.record.attempts << ",\"first_failure\":" << FailureTimeJson(e.record.first_failure_ms)
      << ",\"last_failure\":" << FailureTimeJson(e.record.last_failure_ms)
      << ",\"handler_version\":" << JsonString(e.record.handler_version) << ",\"error\":" << JsonString(e.record.error);
  }
  o << ",\"event_ok\":" << (e.event_ok ? "true" : "false");
  if (!e.event_ok) {
    o << ",\"event_error\":" << JsonString(e.event_error);
    if (e.record_ok) {
      o << ",\"envelope_size\":" << e.record.envelope.size()
        << ",\"envelope_hex\":" << JsonString(Hex(e.record.envelope, kPayloadHexBytes))
        << ",\"envelope_truncated\":" << (e.record.envelope.size() > kPayloadHexBytes ? "true" : "false");
    }
    o << "}";
    return o.str();
  }
  EventFieldsJson(o, e.event, e.payload);
  o << "}";
  return o.str();
}

std::string QuarantineTable(const std::vector<QuarantineEntry>& entries) {
  if (entries.empty()) return "nothing in quarantine\n";
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"ARRIVAL", "TIME", "SOURCE", "SIZE", "REASON"});
  for (const QuarantineEntry& e : entries) {
    if (e.record_ok) {
      rows.push_back({std::to_string(e.arrival), IsoTimeMs(static_cast<int64_t>(e.record.arrived_ms)),
                      TextSafe(e.record.source), std::to_string(e.record.original_bytes), TextSafe(e.record.reason)});
    } else {
      rows.push_back(
          {std::to_string(e.arrival), "-", "-", "-",
           "unreadable: malformed quarantine record of " + std::to_string(e.record.original_bytes) + " bytes"});
    }
  }
  return Table(rows);
}

std::string QuarantineText(const QuarantineEntry& e) {
  std::ostringstream o;
  Field(o, "arrival", std::to_string(e.arrival));
  if (!e.record_ok) {
    Field(o, "record", "unreadable: malformed quarantine record");
    Field(o, "stored value", HexSummary(e.record.raw));
    return o.str();
  }
  Field(o, "time", IsoTimeMs(static_cast<int64_t>(e.record.arrived_ms)));
  Field(o, "source", TextSafe(e.record.source));
  Field(o, "reason", TextSafe(e.record.reason));
  Field(o, "original size", std::to_string(e.record.original_bytes) + " bytes");
  Field(o, "raw", HexSummary(e.record.raw));
  if (!e.payload.json.empty()) {
    Field(o, "payload", "schema version " + std::to_string(e.payload.version) + ": " + TextSafe(e.payload.json));
  }
  return o.str();
}

std::string QuarantineJson(const QuarantineEntry& e) {
  std::ostringstream o;
  o << "{\"arrival\":" << e.arrival << ",\"record_ok\":" << (e.record_ok ? "true" : "false");
  if (e.record_ok) {
    o << ",\"time\":" << JsonString(IsoTimeMs(static_cast<int64_t>(e.record.arrived_ms)))
      << ",\"source\":" << JsonString(e.record.source) << ",\"reason\":" << JsonString(e.record.reason)
      << ",\"original_size\":" << e.record.original_bytes << ",\"raw_size\":" << e.record.raw.size()
      << ",\"raw_hex\":" << JsonString(Hex(e.record.raw, kPayloadHexBytes))
      << ",\"raw_truncated\":" << (e.record.raw.size() > kPayloadHexBytes ? "true" : "false");
    if (!e.payload.json.empty()) {
      o << ",\"payload_json\":" << JsonString(e.payload.json) << ",\"payload_schema_version\":" << e.payload.version;
    }
  } else {
    o << ",\"value_size\":" << e.record.original_bytes
      << ",\"value_hex\":" << JsonString(Hex(e.record.raw, kPayloadHexBytes))
      << ",\"value_truncated\":" << (e.record.raw.size() > kPayloadHexBytes ? "true" : "false");
  }
  o << "}";
  return o.str();
}

}  // namespace walbus::internal
