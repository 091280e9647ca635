#include "bus/ops/admin_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "bus/core/envelope.h"
#include "bus/util/escape.h"
#include "bus/util/rfc3339.h"
#include "bus/util/unix_time.h"
#include "walbus/process.h"

namespace walbus::internal {
namespace {

constexpr size_t kMaxOperatorBytes = 128;

// ---- the request ----

struct KeySpec {
  std::string_view name;
  bool list = false;
};

struct VerbSpec {
  std::string_view name;
  AdminVerb verb;
  std::vector<KeySpec> keys;
};

const std::vector<VerbSpec>& Verbs() {
  static const std::vector<KeySpec> kDlqKeys = {{"subscriber"}, {"seq", true}, {"all"},    {"type"},
                                                {"subject"},    {"operator"},  {"reason"}, {"dry-run"}};
  static const std::vector<VerbSpec> kVerbs = {
      {"ping", AdminVerb::kPing, {}},
      {"dlq-redrive", AdminVerb::kDlqRedrive, kDlqKeys},
      {"dlq-skip", AdminVerb::kDlqSkip, kDlqKeys},
      {"dlq-purge", AdminVerb::kDlqPurge, kDlqKeys},
      {"replay",
       AdminVerb::kReplay,
       {{"subscriber"},
        {"mode"},
        {"from-seq"},
        {"to-seq"},
        {"since"},
        {"until"},
        {"type", true},
        {"subject"},
        {"id", true},
        {"max"},
        {"clear", true},
        {"operator"},
        {"reason"},
        {"dry-run"}}},
      {"replay-cancel", AdminVerb::kReplayCancel, {{"replay"}, {"operator"}, {"reason"}}},
      {"replay-status", AdminVerb::kReplayStatus, {{"replay"}}},
      {"scheduled-cancel", AdminVerb::kScheduledCancel, {{"id"}, {"operator"}, {"reason"}, {"dry-run"}}},
      {"subscriber-remove", AdminVerb::kSubscriberRemove, {{"subscriber"}, {"operator"}, {"reason"}, {"dry-run"}}},
      {"process-abandon", AdminVerb::kProcessAbandon, {{"process"}, {"key"}, {"operator"}, {"reason"}, {"dry-run"}}},
  };
  return kVerbs;
}

// Undoes the escapes of the request format (%25, %0A, %0D); false for a
// '%' that starts none of them or a raw '\r' (a request sent with CRLF
// line ends).
bool Unescape(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '\r') return false;
    if (c != '%') {
      out->push_back(c);
      continue;
    }
    if (in.size() - i < 3) return false;
    const char hi = in[i + 1];
    const char lo = static_cast<char>(in[i + 2] | 0x20);  // hex digits in either case
    if (hi == '2' && in[i + 2] == '5') {
      out->push_back('%');
    } else if (hi == '0' && lo == 'a') {
      out->push_back('\n');
    } else if (hi == '0' && lo == 'd') {
      out->push_back('\r');
    } else {
      return false;
    }
    i += 2;
  }
  return true;
}

// The fields of one request, checked against its verb's keys.
class Fields {
 public:
  // nullptr when absent.
  const std::string* One(std::string_view key) const {
    auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second.front();
  }
  const std::vector<std::string>& All(std::string_view key) const {
    static const std::vector<std::string> kNone;
    auto it = values_.find(key);
    return it == values_.end() ? kNone : it->second;
  }
  bool Has(std::string_view key) const { return values_.count(key) != 0; }
  std::map<std::string, std::vector<std::string>, std::less<>>& values() { return values_; }

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
};

Status Invalid(std::string message) { return Status::InvalidArgument(std::move(message)); }

// A decimal number: digits only (no sign, no space, no prefix), in range.
Status Number(std::string_view key, const std::string& text, uint64_t* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Invalid(std::string(key) + " " + QuotedForMessage(text) + " is not a number (decimal digits only)");
  }
  return Status::OK();
}

Status Flag(std::string_view key, const std::string* text, bool* out) {
  *out = false;
  if (text == nullptr) return Status::OK();
  if (*text != "true" && *text != "false") {
    return Invalid(std::string(key) + " must be true or false, not " + QuotedForMessage(*text));
  }
  *out = *text == "true";
  return Status::OK();
}

bool HasControl(std::string_view s, bool allow_line_breaks) {
  return std::any_of(s.begin(), s.end(), [&](char c) {
    const auto u = static_cast<unsigned char>(c);
    if (allow_line_breaks && (c == '\n' || c == '\r' || c == '\t')) return false;
    return u < 0x20 || u == 0x7f;
  });
}

Status Subscriber(const Fields& f, std::string* out) {
  const std::string* name = f.One("subscriber");
  if (name == nullptr) return Invalid("subscriber is required");
  // The validator's own message would echo the name unescaped.
  if (!ValidateSubscriberName(*name).ok()) {
    return Invalid("subscriber " + QuotedForMessage(*name) +
                   " is not a subscriber name: 1..128 bytes of [A-Za-z0-9._-]");
  }
  *out = *name;
  return Status::OK();
}

Status Subject(const std::string& subject) {
  if (subject.size() > kMaxSubjectBytes || subject.find('\0') != std::string::npos) {
    return Invalid("subject must be 1.." + std::to_string(kMaxSubjectBytes) + " bytes without NUL");
  }
  return Status::OK();
}

Status Type(const std::string& type) {
  if (!ValidateEventType(type).ok()) {
    return Invalid("type " + QuotedForMessage(type) + " is not an event type (lowercase dotted words ending in .v<N>)");
  }
  return Status::OK();
}

// Who and why, required of every verb that changes something.
Status Action(const Fields& f, OperatorAction* out) {
  const std::string* who = f.One("operator");
  const std::string* why = f.One("reason");
  if (who == nullptr || why == nullptr) return Invalid("operator and reason are required: who acts, and why");
  if (who->size() > kMaxOperatorBytes || HasControl(*who, false)) {
    return Invalid("operator must be 1.." + std::to_string(kMaxOperatorBytes) + " bytes without control characters");
  }
  if (HasControl(*why, true)) return Invalid("reason may hold no control characters but line breaks and tabs");
  out->operator_name = *who;
  out->reason = *why;
  return Flag("dry-run", f.One("dry-run"), &out->dry_run);
}

// A process instance: the process's name and the instance's key (a
// subject: 1..512 bytes without NUL; the bus checks the rest).
Status ProcessInstance(const Fields& f, std::string* process, std::string* key) {
  const std::string* name = f.One("process");
  const std::string* instance = f.One("key");
  if (name == nullptr || instance == nullptr) return Invalid("process and key are required: the instance to abandon");
  if (!ValidateProcessName(*name).ok()) {
    return Invalid("process " + QuotedForMessage(*name) + " is not a process name: 1..64 bytes of [a-z0-9-]");
  }
  if (instance->empty() || instance->size() > kMaxSubjectBytes || instance->find('\0') != std::string::npos) {
    return Invalid("key must be 1.." + std::to_string(kMaxSubjectBytes) + " bytes without NUL");
  }
  *process = *name;
  *key = *instance;
  return Status::OK();
}

Status ScheduledEventId(const Fields& f, EventId* out) {
  const std::string* text = f.One("id");
  if (text == nullptr) return Invalid("id is required: the scheduled event's id");
  std::optional<EventId> id = EventId::Parse(*text);
  if (!id) return Invalid("id " + QuotedForMessage(*text) + " is not an event id (8-4-4-4-12 hex digits)");
  *out = *id;
  return Status::OK();
}

Status Time(std::string_view key, const std::string* text, std::chrono::system_clock::time_point* out) {
  if (text == nullptr) return Status::OK();
  if (!ParseRfc3339(*text, out)) {
    return Invalid(std::string(key) + " " + QuotedForMessage(*text) +
                   " is not an RFC 3339 time (2026-11-29T23:00:00Z)");
  }
  if (out->time_since_epoch().count() == 0) return Invalid(std::string(key) + " may not be the epoch itself");
  return Status::OK();
}

Status DeadLetterFields(const Fields& f, AdminRequest* r) {
  if (Status s = Subscriber(f, &r->selection.subscriber); !s.ok()) return s;
  const bool by_seq = f.Has("seq"), all = f.Has("all"), by_filter = f.Has("type") || f.Has("subject");
  if (!by_seq && !all && !by_filter) return Invalid("a selection is required: seq, type, subject, or all=true");
  if (all && (by_seq || by_filter)) return Invalid("all=true selects every dead letter: give no seq, type or subject");
  if (by_seq && by_filter) return Invalid("seq selects by itself: give no type or subject with it");
  if (all && *f.One("all") != "true") return Invalid("all must be true, not " + QuotedForMessage(*f.One("all")));
  for (const std::string& text : f.All("seq")) {
    uint64_t seq = 0;
    if (Status s = Number("seq", text, &seq); !s.ok()) return s;
    if (seq == 0) return Invalid("seq 0 is no event: sequence numbers start at 1");
    r->selection.seqs.push_back(seq);
  }
  if (const std::string* type = f.One("type")) {
    if (Status s = Type(*type); !s.ok()) return s;
    r->selection.type = *type;
  }
  if (const std::string* subject = f.One("subject")) {
    if (Status s = Subject(*subject); !s.ok()) return s;
    r->selection.subject = *subject;
  }
  return Action(f, &r->action);
}

Status ReplayFields(const Fields& f, ReplayRequest* r) {
  if (Status s = Subscriber(f, &r->subscriber); !s.ok()) return s;
  if (const std::string* mode = f.One("mode")) {
    if (*mode == "same-inbox") {
      r->mode = ReplayMode::kSameInbox;
    } else if (*mode == "fresh-scope") {
      r->mode = ReplayMode::kFreshScope;
    } else {
      return Invalid("mode must be same-inbox or fresh-scope, not " + QuotedForMessage(*mode));
    }
  }
  if (const std::string* v = f.One("from-seq"); v != nullptr) {
    if (Status s = Number("from-seq", *v, &r->from_seq); !s.ok()) return s;
  }
  if (const std::string* v = f.One("to-seq"); v != nullptr) {
    if (Status s = Number("to-seq", *v, &r->to_seq); !s.ok()) return s;
  }
  if (r->from_seq != 0 && r->to_seq != 0 && r->from_seq > r->to_seq) return Invalid("from-seq is above to-seq");
  if (Status s = Time("since", f.One("since"), &r->since); !s.ok()) return s;
  if (Status s = Time("until", f.One("until"), &r->until); !s.ok()) return s;
  if (f.Has("since") && f.Has("until") && r->since >= r->until) return Invalid("since is not before until");
  for (const std::string& type : f.All("type")) {
    if (Status s = Type(type); !s.ok()) return s;
    r->types.push_back(type);
  }
  if (const std::string* subject = f.One("subject")) {
    if (Status s = Subject(*subject); !s.ok()) return s;
    r->subject = *subject;
  }
  for (const std::string& text : f.All("id")) {
    std::optional<EventId> id = EventId::Parse(text);
    if (!id || id->IsNil())
      return Invalid("id " + QuotedForMessage(text) + " is not an event id (8-4-4-4-12 hex, not nil)");
    r->ids.push_back(*id);
  }
  if (const std::string* v = f.One("max"); v != nullptr) {
    if (Status s = Number("max", *v, &r->max_events); !s.ok()) return s;
  }
  for (const std::string& name : f.All("clear")) r->clear_column_families.push_back(name);
  return Action(f, &r->action);
}

Status ReplayId(const Fields& f, uint64_t* id) {
  const std::string* text = f.One("replay");
  if (text == nullptr) return Invalid("replay (the replay's id) is required");
  if (Status s = Number("replay", *text, id); !s.ok()) return s;
  if (*id == 0) return Invalid("replay 0 is no replay: ids start at 1");
  return Status::OK();
}

// ---- the reply ----

std::string OkReply(const std::string& json) { return "ok\n" + json + "\n"; }

std::string ErrorReply(const Status& s) {
  return std::string("error ") + CodeName(s.code()) + "\n" + s.message() + "\n";
}

std::string SeqsJson(const std::vector<uint64_t>& seqs) {
  std::string out = "[";
  for (size_t i = 0; i < seqs.size(); ++i) out += (i ? "," : "") + std::to_string(seqs[i]);
  return out + "]";
}

std::string StringsJson(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + JsonString(values[i]);
  return out + "]";
}

std::string TimeJson(std::chrono::system_clock::time_point time) {
  if (time == std::chrono::system_clock::time_point{}) return "null";
  return JsonString(FormatRfc3339(time));
}

const char* ModeName(ReplayMode mode) { return mode == ReplayMode::kFreshScope ? "fresh-scope" : "same-inbox"; }

const char* StateName(ReplayState state) {
  switch (state) {
    case ReplayState::kRunning: return "running";
    case ReplayState::kDone: return "done";
    case ReplayState::kCancelled: return "cancelled";
    case ReplayState::kRefused: return "refused";
  }
  return "unknown";
}

std::string ActionJson(std::string_view action, const AdminRequest& r, const ActionReport& report) {
  return "{\"action\":\"" + std::string(action) + "\",\"subscriber\":" + JsonString(r.selection.subscriber) +
         ",\"dry_run\":" + (r.action.dry_run ? "true" : "false") +
         ",\"action_id\":" + std::to_string(report.action_id) + ",\"seqs\":" + SeqsJson(report.seqs) +
         ",\"released_subjects\":" + StringsJson(report.released_subjects) +
         (report.seqs.empty() && report.released_subjects.empty() ? ",\"note\":\"nothing selected; nothing recorded\""
                                                                  : "") +
         "}";
}

std::string RemovalJson(const AdminRequest& r, const ActionReport& report) {
  return "{\"action\":\"subscriber-remove\",\"subscriber\":" + JsonString(r.selection.subscriber) +
         ",\"dry_run\":" + (r.action.dry_run ? "true" : "false") +
         ",\"action_id\":" + std::to_string(report.action_id) + ",\"dead_letters\":" + SeqsJson(report.seqs) +
         ",\"parked_subjects\":" + StringsJson(report.released_subjects) + "}";
}

std::string ReplayJson(const ReplayReport& r) {
  return "{\"replay_id\":" + std::to_string(r.replay_id) + ",\"subscriber\":" + JsonString(r.subscriber) +
         ",\"mode\":\"" + ModeName(r.mode) + "\",\"state\":\"" + StateName(r.state) +
         "\",\"operator\":" + JsonString(r.operator_name) + ",\"reason\":" + JsonString(r.reason) +
         ",\"handler_version\":" + JsonString(r.handler_version) + ",\"selection\":" + JsonString(r.selection) +
         ",\"started\":" + TimeJson(r.started) + ",\"ended\":" + TimeJson(r.ended) +
         ",\"selected\":" + std::to_string(r.selected) + ",\"delivered\":" + std::to_string(r.delivered) +
         ",\"skipped\":" + std::to_string(r.skipped) + ",\"failed\":" + std::to_string(r.failed) +
         ",\"next_seq\":" + std::to_string(r.next_seq) + ",\"error\":" + JsonString(r.error) +
         ",\"cancelled_by\":" + JsonString(r.cancelled_by) + ",\"cancel_reason\":" + JsonString(r.cancel_reason) +
         ",\"cleared\":" + StringsJson(r.cleared) + ",\"seqs\":" + SeqsJson(r.seqs) + "}";
}

// ---- sockets ----

// A socket file left at `path` by a process that was killed is replaced
// (by the rename in Start); one a process answers on is not.
Status CheckNobodyListens(const std::string& path, const sockaddr_un& addr) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::OK() : ErrnoStatus("admin socket " + path);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Status::InvalidArgument("Options::admin_socket: " + path + " exists and is not a socket; move it away");
  }
  // Non-blocking: a listener with a full backlog answers EAGAIN at once.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus("admin socket probe");
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err == ECONNREFUSED) return Status::OK();  // stale
  if (rc == 0 || err == EAGAIN || err == EINPROGRESS) {
    return Status::Busy("Options::admin_socket: another process answers on " + path);
  }
  errno = err;
  return ErrnoStatus("admin socket " + path);
}

// Makes the listening socket at `path`, mode 0600 before the path exists:
// it is bound in a fresh 0700 directory, narrowed there and renamed into
// place. (umask would do it too, but the process's umask is shared by
// every thread, storage's included, for the moment it is changed.)
Status Listen(const std::string& dir, const std::string& path, int* out_fd, struct stat* st) {
  // "/.aXXXXXX/s" is exactly as long as "/admin.sock": the temporary
  // address fits when the final one does.
  std::string private_dir = dir + "/.aXXXXXX";
  if (::mkdtemp(private_dir.data()) == nullptr) return ErrnoStatus("admin socket: a private directory in " + dir);
  const std::string temp_path = private_dir + "/s";
  sockaddr_un addr;
  Status s;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (!UnixSocketAddress(temp_path, &addr)) {
    s = Status::InvalidArgument("admin socket: " + temp_path + " is too long");
  } else if (fd < 0) {
    s = ErrnoStatus("admin socket");
  } else if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    s = ErrnoStatus("admin socket: bind " + temp_path);
  } else if (::chmod(temp_path.c_str(), 0600) != 0) {
    s = ErrnoStatus("admin socket: chmod " + temp_path);
  } else if (::listen(fd, 16) != 0) {
    s = ErrnoStatus("admin socket: listen");
  } else if (::rename(temp_path.c_str(), path.c_str()) != 0) {
    s = ErrnoStatus("admin socket: rename to " + path);
  } else if (::lstat(path.c_str(), st) != 0) {
    s = ErrnoStatus("admin socket " + path);
  }
  ::unlink(temp_path.c_str());  // left only when a step failed
  ::rmdir(private_dir.c_str());
  if (!s.ok()) {
    if (fd >= 0) ::close(fd);
    return s;
  }
  *out_fd = fd;
  return Status::OK();
}

// The request's fields for its verb (out->verb), read from `fields`.
Status FillRequest(const Fields& fields, AdminRequest* out) {
  Status s;
  switch (out->verb) {
    case AdminVerb::kPing: break;
    case AdminVerb::kDlqRedrive:
    case AdminVerb::kDlqSkip:
    case AdminVerb::kDlqPurge: s = DeadLetterFields(fields, out); break;
    case AdminVerb::kReplay: s = ReplayFields(fields, &out->replay); break;
    case AdminVerb::kReplayCancel:
      s = ReplayId(fields, &out->replay_id);
      if (s.ok()) s = Action(fields, &out->action);
      break;
    case AdminVerb::kReplayStatus: s = ReplayId(fields, &out->replay_id); break;
    case AdminVerb::kScheduledCancel:
      s = ScheduledEventId(fields, &out->event_id);
      if (s.ok()) s = Action(fields, &out->action);
      break;
    case AdminVerb::kSubscriberRemove:
      s = Subscriber(fields, &out->selection.subscriber);
      if (s.ok()) s = Action(fields, &out->action);
      break;
    case AdminVerb::kProcessAbandon:
      s = ProcessInstance(fields, &out->process, &out->key);
      if (s.ok()) s = Action(fields, &out->action);
      break;
  }
  return s;
}

// The verb named `name`; InvalidArgument listing the known ones.
Status FindVerb(std::string_view name, const VerbSpec** verb) {
  for (const VerbSpec& v : Verbs()) {
    if (v.name == name) {
      *verb = &v;
      return Status::OK();
    }
  }
  std::string known;
  for (const VerbSpec& v : Verbs()) known += (known.empty() ? "" : ", ") + std::string(v.name);
  return Invalid("unknown verb " + QuotedForMessage(name) + "; known: " + known);
}

}  // namespace

Status ParseAdminRequest(std::string_view text, AdminRequest* out) {
  *out = AdminRequest{};
  if (text.size() > kMaxAdminRequestBytes) {
    return Invalid("the request is larger than " + std::to_string(kMaxAdminRequestBytes) + " bytes");
  }
  const size_t end = text.find("\n\n");
  if (end == std::string_view::npos) return Invalid("the request does not end with an empty line");
  if (end + 2 != text.size()) return Invalid("bytes follow the request's empty line");
  std::string_view rest = text.substr(0, end + 1);  // every line with its '\n'
  auto next_line = [&rest] {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    return line;
  };
  const std::string_view verb_name = next_line();
  if (verb_name.ends_with('\r')) return Invalid("lines end with \\n alone, not \\r\\n");
  const VerbSpec* verb = nullptr;
  if (Status s = FindVerb(verb_name, &verb); !s.ok()) return s;
  Fields fields;
  for (int line_no = 2; !rest.empty(); ++line_no) {
    const std::string_view line = next_line();
    const std::string where = "line " + std::to_string(line_no) + ": ";
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) return Invalid(where + QuotedForMessage(line) + " is not key=value");
    const std::string_view key = line.substr(0, eq);
    auto spec = std::find_if(verb->keys.begin(), verb->keys.end(), [&](const KeySpec& k) { return k.name == key; });
    if (spec == verb->keys.end()) {
      return Invalid(where + "unknown key " + QuotedForMessage(key) + " for " + std::string(verb->name));
    }
    std::string value;
    if (!Unescape(line.substr(eq + 1), &value)) {
      return Invalid(where + "bad escape in " + std::string(key) + ": only %25, %0A and %0D, and no raw CR");
    }
    if (value.empty()) return Invalid(where + std::string(key) + " is empty; leave the key out instead");
    if (value.size() > kMaxAdminValueBytes) {
      return Invalid(where + std::string(key) + " is longer than " + std::to_string(kMaxAdminValueBytes) + " bytes");
    }
    std::vector<std::string>& values = fields.values()[std::string(key)];
    if (!values.empty() && !spec->list) return Invalid(where + std::string(key) + " is given twice");
    values.push_back(std::move(value));
  }
  out->verb = verb->verb;
  if (Status s = FillRequest(fields, out); !s.ok()) {
    *out = AdminRequest{};
    return Invalid(std::string(verb->name) + ": " + s.message());
  }
  return Status::OK();
}

namespace {

std::string ActionReply(std::string_view action, const AdminRequest& r, const Result<ActionReport>& report) {
  return report.ok() ? OkReply(ActionJson(action, r, *report)) : ErrorReply(report.status());
}

std::string ReplayReply(const Result<ReplayReport>& report) {
  return report.ok() ? OkReply(ReplayJson(*report)) : ErrorReply(report.status());
}

}  // namespace

std::string ExecuteAdminRequest(OperatorActions& actions, const AdminRequest& r) {
  switch (r.verb) {
    case AdminVerb::kPing: return OkReply("{\"pong\":true,\"pid\":" + std::to_string(::getpid()) + "}");
    case AdminVerb::kDlqRedrive: return ActionReply("redrive", r, actions.RedriveDeadLetters(r.selection, r.action));
    case AdminVerb::kDlqSkip: return ActionReply("skip", r, actions.SkipDeadLetters(r.selection, r.action));
    case AdminVerb::kDlqPurge: return ActionReply("purge", r, actions.PurgeDeadLetters(r.selection, r.action));
    case AdminVerb::kReplay: return ReplayReply(actions.StartReplay(r.replay));
    case AdminVerb::kReplayCancel: {
      if (Status s = actions.CancelReplay(r.replay_id, r.action); !s.ok()) return ErrorReply(s);
      // The record as it stands after the cancel; the cancel itself took
      // effect even when it cannot be read back.
      Result<ReplayReport> after = actions.Replay(r.replay_id);
      if (!after.ok()) return OkReply("{\"replay_id\":" + std::to_string(r.replay_id) + "}");
      return ReplayReply(after);
    }
    case AdminVerb::kReplayStatus: return ReplayReply(actions.Replay(r.replay_id));
    case AdminVerb::kSubscriberRemove: {
      Result<ActionReport> report = actions.RemoveSubscriber(r.selection.subscriber, r.action);
      return report.ok() ? OkReply(RemovalJson(r, *report)) : ErrorReply(report.status());
    }
    case AdminVerb::kProcessAbandon: {
      Result<uint64_t> action_id = actions.AbandonProcess(r.process, r.key, r.action);
      if (!action_id.ok()) return ErrorReply(action_id.status());
      return OkReply("{\"action\":\"process-abandon\",\"process\":" + JsonString(r.process) +
                     ",\"key\":" + JsonString(r.key) + ",\"dry_run\":" + (r.action.dry_run ? "true" : "false") +
                     ",\"action_id\":" + std::to_string(*action_id) + "}");
    }
    case AdminVerb::kScheduledCancel: {
      Result<uint64_t> action_id = actions.CancelScheduled(r.event_id, r.action);
      if (!action_id.ok()) return ErrorReply(action_id.status());
      return OkReply("{\"action\":\"scheduled-cancel\",\"event_id\":\"" + r.event_id.ToString() + "\",\"dry_run\":" +
                     (r.action.dry_run ? "true" : "false") + ",\"action_id\":" + std::to_string(*action_id) + "}");
    }
  }
  return ErrorReply(Status::InvalidArgument("unknown verb"));
}

std::string AnswerAdminRequest(Bus& bus, std::string_view text) {
  AdminRequest request;
  if (Status s = ParseAdminRequest(text, &request); !s.ok()) return ErrorReply(s);
  return ExecuteAdminRequest(bus.Operator(), request);
}

std::string AdminSocketPath(const std::string& dir) { return dir + "/admin.sock"; }

Status AdminServer::Start(const std::string& dir, Bus* bus, std::unique_ptr<AdminServer>* out) {
  out->reset();
  const std::string path = AdminSocketPath(dir);
  sockaddr_un addr;
  if (!UnixSocketAddress(path, &addr)) {
    return Status::InvalidArgument("Options::admin_socket: " + path + " is " + std::to_string(path.size()) +
                                   " bytes long, and a Unix socket path holds at most " +
                                   std::to_string(sizeof addr.sun_path - 1) + "; use a shorter Options::dir");
  }
  if (Status s = CheckNobodyListens(path, addr); !s.ok()) return s;
  int fd = -1;
  struct stat st;
  if (Status s = Listen(dir, path, &fd, &st); !s.ok()) return s;
  std::unique_ptr<AdminServer> server(new AdminServer());
  server->path_ = path;
  server->dev_ = st.st_dev;
  server->ino_ = st.st_ino;
  Status s = SocketServer::Start(
      fd, "\n\n", kMaxAdminRequestBytes,
      [bus](std::string_view request, SocketServer::Read how) -> std::string {
        switch (how) {
          case SocketServer::Read::kComplete: return AnswerAdminRequest(*bus, request);
          case SocketServer::Read::kTooLarge:
            return ErrorReply(
                Invalid("the request is larger than " + std::to_string(kMaxAdminRequestBytes) + " bytes"));
          case SocketServer::Read::kCut: break;
        }
        // A probe (connect, then close) gets nothing; a request cut short
        // is told so, in case the client still reads.
        return request.empty() ? std::string() : ErrorReply(Invalid("the request ends before its empty line"));
      },
      &server->server_);
  if (!s.ok()) return s;  // the destructor removes the socket file
  *out = std::move(server);
  return Status::OK();
}

AdminServer::~AdminServer() {
  server_.reset();
  struct stat st;
  if (!path_.empty() && ::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    ::unlink(path_.c_str());
  }
}

}  // namespace walbus::internal
