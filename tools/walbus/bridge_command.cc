#include "tools/walbus/bridge_command.h"

#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "bridge/relay_journal.h"
#include "bus/core/envelope.h"
#include "bus/dispatch/recovery.h"
#include "storage/db.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/inspect_util.h"

namespace walbus::tools {
namespace {

using internal::inspect_util::IsoTimeMs;
using internal::inspect_util::JsonString;
using internal::inspect_util::TextSafe;

struct RelayRecords {
  std::string origin;
  uint64_t subjects = 0;                             // (source, subject) pairs with a position
  uint64_t journal = 0;                              // messages not yet confirmed
  uint64_t first_journaled = 0, last_journaled = 0;  // their event seqs
  uint64_t low_mark = 0;
  uint64_t unrepairable = 0, unrepairable_last_ms = 0;
  std::string subjects_problem;           // empty: the stream takes the relay's subjects
  std::optional<bridge::RelayLane> lane;  // absent: written by a release before priorities
  // Of the lane's types, the events after the subscriber's checkpoint;
  // unknown without a lane or a subscriber record.
  std::optional<uint64_t> backlog_events, backlog_bytes;
};

struct InboundRecords {
  uint64_t stream_seq = 0;
  int64_t stored_ns = 0;
};

// "<kind>\0<name>\0<rest>" -> name and rest.
bool SplitKey(std::string_view key, std::string_view kind, std::string* name, std::string_view* rest) {
  if (!key.starts_with(kind) || key.size() <= kind.size() || key[kind.size()] != '\0') return false;
  key.remove_prefix(kind.size() + 1);
  const size_t end = key.find('\0');
  if (end == std::string_view::npos) return false;
  *name = std::string(key.substr(0, end));
  *rest = key.substr(end + 1);
  return true;
}

void AddRelayRecord(std::string_view rest, std::string_view value, RelayRecords* r) {
  if (rest.empty()) return;
  switch (rest[0]) {
    case 'o': r->origin = std::string(value); break;
    case 'p': ++r->subjects; break;
    case 'l': r->low_mark = bridge::DecodeU64(value).value_or(0); break;
    case 'j': {
      const uint64_t seq = bridge::DecodeU64(rest.substr(1)).value_or(0);
      if (r->journal++ == 0) r->first_journaled = seq;
      r->last_journaled = seq;
      break;
    }
    case 'm': r->subjects_problem = std::string(value); break;
    case 'v': r->lane = bridge::DecodeRelayLane(value); break;
    case 'u':
      if (value.size() == 16) {
        r->unrepairable = *bridge::DecodeU64(value.substr(0, 8));
        r->unrepairable_last_ms = *bridge::DecodeU64(value.substr(8));
      }
      break;
    default: break;
  }
}

// "a, b" or, for every type but those, "every type but a, b".
std::string LaneTypes(const bridge::RelayLane& lane) {
  std::string out = lane.all_but ? (lane.types.empty() ? "every type" : "every type but ") : "";
  for (size_t i = 0; i < lane.types.size(); ++i) out += (i ? ", " : "") + lane.types[i];
  return out;
}

void PrintLaneJson(const RelayRecords& r) {
  if (!r.lane) {
    std::cout << ",\"priority\":null";
    return;
  }
  std::cout << ",\"priority\":" << r.lane->priority << ",\"types_all_but\":" << (r.lane->all_but ? "true" : "false")
            << ",\"types\":[";
  for (size_t i = 0; i < r.lane->types.size(); ++i) std::cout << (i ? "," : "") << JsonString(r.lane->types[i]);
  std::cout << "],\"max_bytes_per_second\":" << r.lane->max_bytes_per_second
            << ",\"burst_bytes\":" << r.lane->burst_bytes;
  if (r.backlog_events) {
    std::cout << ",\"backlog_events\":" << *r.backlog_events << ",\"backlog_bytes\":" << *r.backlog_bytes;
  }
}

void PrintLaneText(const RelayRecords& r) {
  if (!r.lane) return;
  std::cout << "  priority      " << r.lane->priority << " (" << TextSafe(LaneTypes(*r.lane)) << ")\n";
  if (r.backlog_events) {
    std::cout << "  backlog       " << *r.backlog_events << " events (" << *r.backlog_bytes
              << " bytes stored) of these types not yet relayed\n";
  }
  if (r.lane->max_bytes_per_second == 0) {
    std::cout << "  rate          no cap\n";
  } else {
    std::cout << "  rate          at most " << r.lane->max_bytes_per_second << " bytes/s, bursts of "
              << (r.lane->burst_bytes ? r.lane->burst_bytes : r.lane->max_bytes_per_second)
              << ", shared with the relay's other levels, higher first\n";
  }
}

void PrintRelay(const std::string& name, const RelayRecords& r, bool json) {
  if (json) {
    std::cout << "{\"kind\":\"relay\",\"name\":" << JsonString(name) << ",\"origin\":" << JsonString(r.origin)
              << ",\"subjects\":" << r.subjects << ",\"journal\":" << r.journal
              << ",\"journal_first_seq\":" << r.first_journaled << ",\"journal_last_seq\":" << r.last_journaled
              << ",\"low_mark\":" << r.low_mark << ",\"unrepairable_losses\":" << r.unrepairable
              << ",\"unrepairable_last\":"
              << (r.unrepairable_last_ms ? JsonString(IsoTimeMs(static_cast<int64_t>(r.unrepairable_last_ms))) : "null")
              << ",\"subjects_problem\":" << (r.subjects_problem.empty() ? "null" : JsonString(r.subjects_problem));
    PrintLaneJson(r);
    std::cout << "}\n";
    return;
  }
  std::cout << "relay " << TextSafe(name) << "\n"
            << "  origin        " << TextSafe(r.origin) << "\n";
  PrintLaneText(r);
  std::cout << "  subjects      " << r.subjects << " with a position\n"
            << "  journal       " << r.journal << " relayed messages not yet confirmed on the server";
  if (r.journal > 0) std::cout << " (event seqs " << r.first_journaled << ".." << r.last_journaled << ")";
  std::cout << "\n";
  if (r.unrepairable > 0) {
    std::cout << "  LOST          " << r.unrepairable
              << " time(s) the stream was gone after this relay had published to it (last "
              << IsoTimeMs(static_cast<int64_t>(r.unrepairable_last_ms))
              << "): messages confirmed before then are lost on the server and cannot be republished\n";
  } else {
    std::cout << "  lost          none that could not be republished\n";
  }
  if (!r.subjects_problem.empty()) std::cout << "  SUBJECTS      " << TextSafe(r.subjects_problem) << "\n";
}

void PrintInbound(const std::string& name, const InboundRecords& in, bool json) {
  if (json) {
    std::cout << "{\"kind\":\"inbound\",\"name\":" << JsonString(name) << ",\"cursor_stream_seq\":" << in.stream_seq
              << ",\"cursor_stored\":" << JsonString(IsoTimeMs(in.stored_ns / 1000000)) << "}\n";
    return;
  }
  std::cout << "inbound " << TextSafe(name) << "\n"
            << "  newest taken  stream sequence " << in.stream_seq << ", stored " << IsoTimeMs(in.stored_ns / 1000000)
            << "\n";
}

// Counts each relay level's backlog: the events of its types after its
// subscriber's checkpoint, in one read of the outbox from the lowest.
Status CountBacklogs(const storage::Db& db, std::map<std::string, RelayRecords>* relays) {
  internal::RecoveredState state;
  if (Status s = internal::ReadRecoveredState(db, &state); !s.ok()) return s;
  std::vector<std::pair<RelayRecords*, uint64_t>> counted;  // with the checkpoint
  uint64_t from = state.last_seq + 1;
  for (auto& [name, r] : *relays) {
    const auto sub = state.subscribers.find(name);
    if (!r.lane || sub == state.subscribers.end()) continue;
    r.backlog_events = r.backlog_bytes = 0;
    counted.emplace_back(&r, sub->second.durable.checkpoint);
    from = std::min(from, sub->second.durable.checkpoint + 1);
  }
  if (counted.empty() || from > state.last_seq) return Status::OK();
  Status decode;
  Status scan = db.ScanOutbox(from, SIZE_MAX, [&](uint64_t seq, std::string_view bytes) {
    Event e;
    decode = internal::DecodeEnvelope(bytes, internal::inspect_util::kMaxInspectPayloadBytes, &e);
    if (!decode.ok()) return false;
    for (auto& [r, checkpoint] : counted) {
      if (seq <= checkpoint || !r->lane->Takes(e.type)) continue;
      ++*r->backlog_events;
      *r->backlog_bytes += bytes.size();
    }
    return true;
  });
  return scan.ok() ? decode : scan;
}

}  // namespace

int RunBridge(const std::string& dir, const std::string& column_family, bool json) {
  internal::inspect_util::SecondaryView view;
  if (Status s = internal::inspect_util::OpenSecondary(dir, &view); !s.ok()) {
    std::cerr << "walbus bridge: " << s.ToString() << "\n";
    return 1;
  }
  storage::CfHandle* cf = view.db->AppCf(column_family);
  if (cf == nullptr) {
    std::cerr << "walbus bridge: " << dir << " has no column family '" << column_family
              << "': no bridge has kept records here (see --column-family)\n";
    return 1;
  }
  std::map<std::string, RelayRecords> relays;
  std::map<std::string, InboundRecords> inbounds;
  Status s = view.db->Scan(cf, "", SIZE_MAX, [&](std::string_view key, std::string_view value) {
    std::string name;
    std::string_view rest;
    if (SplitKey(key, "relay", &name, &rest)) {
      AddRelayRecord(rest, value, &relays[name]);
    } else if (SplitKey(key, "inbound", &name, &rest) && rest == "cursor" && value.size() == 16) {
      inbounds[name] = InboundRecords{*bridge::DecodeU64(value.substr(0, 8)),
                                      static_cast<int64_t>(*bridge::DecodeU64(value.substr(8)))};
    }
    return true;
  });
  if (!s.ok()) {
    std::cerr << "walbus bridge: " << s.ToString() << "\n";
    return 1;
  }
  if (Status counted = CountBacklogs(*view.db, &relays); !counted.ok()) {
    std::cerr << "walbus bridge: " << counted.ToString() << "\n";
    return 1;
  }
  if (relays.empty() && inbounds.empty() && !json) std::cout << "no relay or inbound consumer records\n";
  for (const auto& [name, r] : relays) PrintRelay(name, r, json);
  for (const auto& [name, in] : inbounds) PrintInbound(name, in, json);
  return 0;
}

namespace {

struct BridgeValues {
  std::string dir;
  std::string column_family = "jetstream";
  bool json = false;
};

}  // namespace

void AddBridgeCommand(CLI::App* app, Runners* runners) {
  auto v = std::make_shared<BridgeValues>();
  CLI::App* bridge = app->add_subcommand(
      "bridge",
      "What the NATS JetStream bridge keeps: each relay's origin, priority level with its backlog and bandwidth "
      "cap, positions, journal of messages not yet confirmed on the server and losses it could not repair; each "
      "inbound consumer's newest message.");
  bridge->add_option("dir", v->dir, "Database directory")->required();
  bridge->add_option("--column-family", v->column_family, "The bridge's column family")->capture_default_str();
  bridge->add_flag("--json", v->json, "One JSON object per relay and consumer");
  runners->push_back([bridge, v]() -> std::optional<int> {
    if (!bridge->parsed()) return std::nullopt;
    return RunBridge(v->dir, v->column_family, v->json);
  });
}

}  // namespace walbus::tools
