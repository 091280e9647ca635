#include "bus/inspect.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "bus/envelope.h"
#include "bus/recovery.h"
#include "storage/db.h"

namespace walbus::internal {
namespace {

// A secondary instance keeps its own info log; it lives in a private
// temporary directory for the duration of one inspection.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "walbus-inspect-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Status InspectDatabase(const std::string& dir, DatabaseReport* report) {
  *report = DatabaseReport{};
  report->dir = dir;
  ScratchDir scratch;
  if (scratch.path().empty()) return Status::IOError("cannot create a temporary directory");
  storage::OpenOptions so;
  so.dir = dir;
  so.mode = storage::OpenOptions::Mode::kSecondary;
  so.secondary_dir = scratch.path();
  std::unique_ptr<storage::Db> db;
  if (Status s = storage::Db::Open(so, &db); !s.ok()) return s;
  RecoveredState state;
  if (Status s = ReadRecoveredState(*db, &state); !s.ok()) return s;
  report->last_seq = state.last_seq;
  report->trimmed_below = state.trimmed_below;
  uint64_t min_checkpoint = state.last_seq;
  for (const auto& [name, e] : state.subscribers) {
    SubscriberReport r;
    r.name = name;
    r.id = e.id;
    r.checkpoint = e.durable.checkpoint;
    r.lag_events = state.last_seq - e.durable.checkpoint;
    r.handled = e.durable.handled;
    r.duplicates = e.durable.duplicates;
    r.rejected = e.durable.rejected;
    min_checkpoint = std::min(min_checkpoint, r.checkpoint);
    report->subscribers.push_back(std::move(r));
  }
  report->outbox_backlog = state.last_seq - min_checkpoint;
  if (report->outbox_backlog > 0) {
    Status decode;
    Status scan = db->ScanOutbox(min_checkpoint + 1, 1, [&](uint64_t, std::string_view bytes) {
      Event e;
      decode = DecodeEnvelope(bytes, 64u << 20, &e);
      if (decode.ok()) {
        report->oldest_backlog_age_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now() - e.time).count();
      }
      return false;
    });
    if (!scan.ok()) return scan;
    if (!decode.ok()) return decode;
  }
  return Status::OK();
}

std::string ReportJson(const DatabaseReport& r) {
  std::ostringstream o;
  o << "{\"dir\":" << JsonString(r.dir) << ",\"last_seq\":" << r.last_seq
    << ",\"outbox_backlog\":" << r.outbox_backlog << ",\"oldest_backlog_age_ms\":";
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
      << ",\"rejected\":" << s.rejected << "}";
  }
  o << "]}";
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
    o << "subscriber      " << s.name << ": checkpoint " << s.checkpoint << ", lag " << s.lag_events
      << ", handled " << s.handled << ", duplicates " << s.duplicates << ", rejected " << s.rejected << "\n";
  }
  return o.str();
}

}  // namespace walbus::internal
