// walbus: the operator's command-line tool.
//
//   walbus stats <dir> [--json]
//   walbus metrics <dir> [--json]
//   walbus dlq ls <dir> [--subscriber S] [--limit N] [--json]
//   walbus dlq show <dir> --subscriber S --seq N [--json]
//   walbus quarantine ls <dir> [--limit N] [--json]
//   walbus quarantine show <dir> --arrival N [--json]
//   walbus subscribers <dir> [--json]
//   walbus outbox ls <dir> [--type T] [--subject S] [--from-seq N] [--to-seq N]
//                          [--since TIME] [--until TIME] [--limit N] [--json]
//   walbus outbox show <dir> --seq N [--json]
//   walbus event <dir> <event id> [--json]
//   walbus inbox check <dir> --subscriber S --event ID [--json]
//   walbus export <dir> --format cloudevents-json [outbox ls filters]
//
//   walbus dlq redrive|skip|purge <dir> --subscriber S
//          (--seq N [--seq N]... | --all | [--type T] [--subject X])
//          --operator O --reason R [--dry-run] [--json]
//   walbus replay <dir> --subscriber S [--mode same-inbox|fresh-scope]
//          [--from-seq N] [--to-seq N] [--since TIME] [--until TIME]
//          [--type T]... [--subject X] [--id UUID]... [--max N]
//          --operator O --reason R [--dry-run] [--json]
//   walbus replay <dir> --status ID [--json]
//   walbus replay <dir> --cancel ID --operator O --reason R [--json]
//
// The reading commands change nothing and work on a stopped database and
// on one a running process holds. --json prints JSON Lines: one object per
// entry.
//
// The actions (dlq redrive|skip|purge, replay) go to the process that holds
// the database through its admin socket (<dir>/admin.sock, opened when it
// sets Options::admin_socket); when nobody listens there, the tool opens
// the database itself and runs the same request on it. No subscriber is
// active then: a redrive is refused, and a replay is recorded to run when
// the application next runs its subscriber. A database a process holds
// without the socket cannot be acted on from here.
//
// Exit codes: 0 ok; 1 the operation failed or was refused, or the entry
// asked for does not exist (for `inbox check`: the subscriber has no
// record of the event); 2 bad usage (an unknown subscriber included, for
// the reading commands), or the directory is missing or not a walbus
// database, or is held by a process without the admin socket.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/walbus/bridge_command.h"
#include "bus/ops/admin_server.h"
#include "tools/walbus/admin_client.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/inspect_util.h"
#include "bus/util/rfc3339.h"
#include "walbus/event.h"
#include "walbus/version.h"

namespace {

constexpr size_t kDefaultLimit = 100;

int ExitCodeFor(const walbus::Status& s) {
  return s.IsNotFound() || s.IsInvalidArgument() ? 2 : 1;
}

int Fail(std::string_view command, const walbus::Status& s) {
  std::cerr << "walbus " << command << ": " << s.ToString() << "\n";
  return ExitCodeFor(s);
}

// --limit 0 means no limit. One more entry than shown is read to tell
// whether the listing was cut.
size_t ReadLimit(size_t limit) {
  return limit == 0 || limit == std::numeric_limits<size_t>::max() ? std::numeric_limits<size_t>::max() : limit + 1;
}

template <typename Entry>
bool Truncate(std::vector<Entry>* entries, size_t limit) {
  if (limit == 0 || entries->size() <= limit) return false;
  entries->resize(limit);
  return true;
}

void NoteTruncated(std::string_view command, size_t limit) {
  std::cerr << "walbus " << command << ": showing the first " << limit
            << " entries; use --limit N for more (0 for all)\n";
}

// A count, a sequence number or an arrival number: decimal digits only.
// (CLI11 alone reads "-1" as 18446744073709551615.)
const CLI::Validator kWholeNumber(
    [](std::string& text) -> std::string {
      uint64_t value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        return "'" + text + "' is not a whole number (0 or more)";
      }
      return "";
    },
    "N");

// Every option that takes a number, in every command, takes only digits.
void CheckWholeNumbers(CLI::App* app) {
  static const std::set<std::string> kNumbers = {"--limit", "--seq",   "--arrival", "--from-seq",
                                                 "--to-seq", "--max", "--status",  "--cancel"};
  for (CLI::Option* option : app->get_options()) {
    if (kNumbers.count(option->get_name()) > 0) option->check(kWholeNumber);
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) CheckWholeNumbers(sub);
}

// The command the words name, e.g. "dlq ls", and where they stop naming
// one (*next: the index of the first word past it).
const CLI::App* NamedCommand(const CLI::App& app, int argc, char** argv, int* next, std::string* path) {
  const CLI::App* at = &app;
  int i = 1;
  for (; i < argc; ++i) {
    const CLI::App* sub = nullptr;
    for (const CLI::App* candidate : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (candidate->get_name() == argv[i]) sub = candidate;
    }
    if (sub == nullptr) break;
    at = sub;
    *path += (path->empty() ? "" : " ") + sub->get_name();
  }
  *next = i;
  return at;
}

// A usage error as every other error is said: "walbus <command>: why",
// naming an unknown command word and listing the ones there are. Exit 2.
int UsageError(const CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  int next = 0;
  std::string path;
  const CLI::App* at = NamedCommand(app, argc, argv, &next, &path);
  const auto commands = at->get_subcommands([](const CLI::App*) { return true; });
  std::cerr << "walbus" << (path.empty() ? "" : " " + path) << ": ";
  if (!commands.empty()) {
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    if (next < argc && argv[next][0] != '-') {
      std::cerr << "unknown command '" << argv[next] << "'; the commands are: " << names << "\n";
    } else {
      std::cerr << "a command is needed: " << names << "\n";
    }
  } else {
    std::cerr << e.what() << " (walbus" << (path.empty() ? "" : " " + path) << " --help says more)\n";
  }
  return 2;
}

int RunStats(const std::string& dir, bool json) {
  walbus::internal::DatabaseReport report;
  walbus::Status s = walbus::internal::InspectDatabase(dir, &report);
  if (!s.ok()) return Fail("stats", s);
  std::cout << (json ? walbus::internal::ReportJson(report) + "\n" : walbus::internal::ReportText(report));
  return 0;
}

int RunMetrics(const std::string& dir, bool json) {
  walbus::internal::DatabaseReport report;
  walbus::Status s = walbus::internal::InspectDatabase(dir, &report);
  if (!s.ok()) return Fail("metrics", s);
  const std::vector<walbus::MetricFamily> families = walbus::internal::ReportMetrics(report);
  if (!json) {
    std::cout << walbus::PrometheusText(families);
    return 0;
  }
  for (const walbus::MetricFamily& f : families) {
    for (const walbus::MetricSample& sample : f.samples) std::cout << walbus::internal::MetricSampleJson(f, sample) << "\n";
  }
  return 0;
}

int RunDlqLs(const std::string& dir, const std::string& subscriber, size_t limit, bool json) {
  std::vector<walbus::internal::DeadLetterEntry> entries;
  walbus::Status s = walbus::internal::ListDeadLetters(dir, subscriber, &entries, ReadLimit(limit));
  if (!s.ok()) return Fail("dlq ls", s);
  const bool truncated = Truncate(&entries, limit);
  if (json) {
    for (const auto& e : entries) std::cout << walbus::internal::DeadLetterJson(e) << "\n";
  } else {
    std::cout << walbus::internal::DeadLetterTable(entries);
  }
  if (truncated) NoteTruncated("dlq ls", limit);
  return 0;
}

int RunDlqShow(const std::string& dir, const std::string& subscriber, uint64_t seq, bool json) {
  walbus::internal::DeadLetterEntry entry;
  bool found = false;
  walbus::Status s = walbus::internal::FindDeadLetter(dir, subscriber, seq, &entry, &found);
  if (!s.ok()) return Fail("dlq show", s);
  if (!found) {
    std::cerr << "walbus dlq show: no dead letter of subscriber " << subscriber << " at seq " << seq << "\n";
    return 1;
  }
  std::cout << (json ? walbus::internal::DeadLetterJson(entry) + "\n" : walbus::internal::DeadLetterText(entry));
  return 0;
}

int RunQuarantineLs(const std::string& dir, size_t limit, bool json) {
  std::vector<walbus::internal::QuarantineEntry> entries;
  walbus::Status s = walbus::internal::ListQuarantine(dir, &entries, ReadLimit(limit));
  if (!s.ok()) return Fail("quarantine ls", s);
  const bool truncated = Truncate(&entries, limit);
  if (json) {
    for (const auto& e : entries) std::cout << walbus::internal::QuarantineJson(e) << "\n";
  } else {
    std::cout << walbus::internal::QuarantineTable(entries);
  }
  if (truncated) NoteTruncated("quarantine ls", limit);
  return 0;
}

int RunQuarantineShow(const std::string& dir, uint64_t arrival, bool json) {
  walbus::internal::QuarantineEntry entry;
  bool found = false;
  walbus::Status s = walbus::internal::FindQuarantine(dir, arrival, &entry, &found);
  if (!s.ok()) return Fail("quarantine show", s);
  if (!found) {
    std::cerr << "walbus quarantine show: nothing in quarantine at arrival " << arrival << "\n";
    return 1;
  }
  std::cout << (json ? walbus::internal::QuarantineJson(entry) + "\n" : walbus::internal::QuarantineText(entry));
  return 0;
}

int RunSubscribers(const std::string& dir, bool json) {
  std::vector<walbus::internal::SubscriberDetail> subscribers;
  walbus::Status s = walbus::internal::ListSubscribers(dir, &subscribers);
  if (!s.ok()) return Fail("subscribers", s);
  if (json) {
    for (const auto& d : subscribers) std::cout << walbus::internal::SubscriberJson(d) << "\n";
  } else {
    std::cout << walbus::internal::SubscribersTable(subscribers);
  }
  return 0;
}

// The --since/--until values: RFC 3339 times.
bool ParseTimeOption(const std::string& text, std::optional<std::chrono::system_clock::time_point>* out) {
  if (text.empty()) return true;
  std::chrono::system_clock::time_point t;
  if (!walbus::internal::ParseRfc3339(text, &t)) return false;
  *out = t;
  return true;
}

int RunOutboxLs(const std::string& command, const std::string& dir, const walbus::internal::OutboxFilter& filter,
                size_t limit, bool json, bool cloudevents) {
  std::vector<walbus::internal::OutboxEntry> entries;
  walbus::Status s = walbus::internal::ListOutbox(dir, filter, &entries, ReadLimit(limit));
  if (!s.ok()) return Fail(command, s);
  const bool truncated = Truncate(&entries, limit);
  if (cloudevents) {
    for (const auto& e : entries) {
      if (e.event_ok) {
        std::cout << walbus::internal::CloudEventJson(e.event) << "\n";
      } else {
        std::cerr << "walbus " << command << ": seq " << e.seq << " skipped, unreadable: " << e.error << "\n";
      }
    }
  } else if (json) {
    for (const auto& e : entries) std::cout << walbus::internal::OutboxJson(e) << "\n";
  } else {
    std::cout << walbus::internal::OutboxTable(entries);
  }
  if (truncated) NoteTruncated(command, limit);
  return 0;
}

int RunOutboxShow(const std::string& dir, uint64_t seq, bool json) {
  walbus::internal::OutboxFilter filter;
  filter.from_seq = seq;
  filter.to_seq = seq;
  std::vector<walbus::internal::OutboxEntry> entries;
  walbus::Status s = walbus::internal::ListOutbox(dir, filter, &entries, 1);
  if (!s.ok()) return Fail("outbox show", s);
  if (entries.empty()) {
    std::cerr << "walbus outbox show: no outbox entry at seq " << seq << " (trimmed, or not committed yet)\n";
    return 1;
  }
  std::cout << (json ? walbus::internal::OutboxJson(entries[0]) + "\n" : walbus::internal::OutboxText(entries[0]));
  return 0;
}

std::optional<walbus::EventId> ParseEventId(std::string_view command, const std::string& text) {
  auto id = walbus::EventId::Parse(text);
  if (!id) std::cerr << "walbus " << command << ": '" << text << "' is not an event id (8-4-4-4-12 hex)\n";
  return id;
}

int RunEvent(const std::string& dir, const std::string& id_text, bool json) {
  auto id = ParseEventId("event", id_text);
  if (!id) return 2;
  walbus::internal::EventStory story;
  bool found = false;
  walbus::Status s = walbus::internal::FindEventStory(dir, *id, &story, &found);
  if (!s.ok()) return Fail("event", s);
  if (!found) {
    std::cerr << "walbus event: no record of event " << id_text << "\n";
    return 1;
  }
  std::cout << (json ? walbus::internal::EventStoryJson(story) + "\n" : walbus::internal::EventStoryText(story));
  return 0;
}

int RunInboxCheck(const std::string& dir, const std::string& subscriber, const std::string& id_text, bool json) {
  auto id = ParseEventId("inbox check", id_text);
  if (!id) return 2;
  bool handled = false;
  uint64_t seq = 0;
  int64_t at_ms = 0;
  walbus::Status s = walbus::internal::CheckInbox(dir, subscriber, *id, &handled, &seq, &at_ms);
  if (!s.ok()) return Fail("inbox check", s);
  if (json) {
    std::cout << "{\"subscriber\":\"" << subscriber << "\",\"event\":\"" << id->ToString()
              << "\",\"handled\":" << (handled ? "true" : "false");
    if (handled) std::cout << ",\"seq\":" << seq << ",\"handled_at_ms\":" << at_ms;
    std::cout << "}\n";
  } else if (handled) {
    std::cout << subscriber << " completed event " << id->ToString() << " (seq " << seq << ") at "
              << walbus::internal::inspect_util::IsoTimeMs(at_ms) << "\n";
  } else {
    std::cout << subscriber << " has no record of event " << id->ToString() << "\n";
  }
  return handled ? 0 : 1;
}

// key=value fields of an admin request, in order.
using AdminFields = std::vector<std::pair<std::string, std::string>>;

// Adds the field `key` for each value of an option that was given on the
// command line (an empty value included: the request check refuses it).
void AddGiven(AdminFields* fields, const CLI::Option* option, const std::string& key, const std::string& value) {
  if (option->count() > 0) fields->emplace_back(key, value);
}
void AddGiven(AdminFields* fields, const CLI::Option* option, const std::string& key,
              const std::vector<std::string>& values) {
  if (option->count() == 0) return;
  for (const std::string& v : values) fields->emplace_back(key, v);
}

// Runs an operator action: through the admin socket of the process that
// holds `dir` when one answers there, else on the database itself, opened
// here with default options (no subscriber, nothing started). The same
// request text reaches the same function (AnswerAdminRequest) either way.
int RunAdmin(const std::string& command, const std::string& dir, const std::string& verb, const AdminFields& fields,
             bool json) {
  namespace wi = walbus::internal;
  const std::string request = wi::FormatAdminRequest(verb, fields);
  wi::AdminRequest checked;
  if (walbus::Status s = wi::ParseAdminRequest(request, &checked); !s.ok()) {
    std::string message = s.message();
    if (message.starts_with(verb + ": ")) message.erase(0, verb.size() + 2);
    std::cerr << "walbus " << command << ": " << message << "\n";
    return 2;
  }
  std::string reply;
  bool listening = false;
  walbus::Status s = wi::CallAdminSocket(dir, request, &reply, &listening);
  if (!s.ok()) {
    std::cerr << "walbus " << command << ": " << s.ToString() << "\n";
    return 2;
  }
  if (!listening) {
    walbus::Options options;
    options.dir = dir;
    options.create_if_missing = false;
    // The bus's log lines (a replay recorded, say) go to stderr: stdout
    // holds the report alone, JSON with --json.
    options.logger = std::make_shared<spdlog::logger>("walbus", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    std::unique_ptr<walbus::Bus> bus;
    s = walbus::Bus::Open(options, &bus);
    if (s.IsBusy()) {
      std::cerr << "walbus " << command << ": " << dir << " is held by a running process that does not listen on "
                << wi::AdminSocketPath(dir) << "; that process must set Options::admin_socket for this command "
                << "to reach it\n";
      return 2;
    }
    if (!s.ok()) {
      std::cerr << "walbus " << command << ": " << s.ToString() << "\n";
      return 2;
    }
    reply = wi::AnswerAdminRequest(*bus, request);
    if (walbus::Status closed = bus->Close(); !closed.ok()) {
      std::cerr << "walbus " << command << ": closing " << dir << ": " << closed.ToString() << "\n";
      return 1;
    }
  }
  wi::AdminReply answer;
  if (walbus::Status r = wi::ParseAdminReply(reply, &answer); !r.ok()) {
    std::cerr << "walbus " << command << ": " << r.message() << "\n";
    return 1;
  }
  if (!answer.status.ok()) {
    std::cerr << "walbus " << command << ": " << answer.status.ToString() << "\n";
    if (!listening && checked.verb == wi::AdminVerb::kDlqRedrive) {
      std::cerr << "walbus " << command << ": no process holds " << dir
                << ", so no subscriber is active; redrive while the application runs, with "
                << "Options::admin_socket set\n";
    }
    return 1;
  }
  std::cout << (json ? answer.body + "\n" : wi::AdminReplyText(answer.body));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"walbus: inspect and operate walbus databases. The reading commands change nothing and work on a "
               "stopped database and on one a running process holds; the actions (dlq redrive|skip|purge, replay) "
               "go to the running process through its admin socket, or to a stopped database directly."};
  app.set_version_flag("--version", WALBUS_VERSION_STRING);
  app.require_subcommand(1);

  std::string dir;
  bool json = false;
  std::string subscriber;
  size_t limit = kDefaultLimit;
  uint64_t seq = 0;
  uint64_t arrival = 0;
  std::string event_id;
  std::string since, until;
  std::string format;
  walbus::internal::OutboxFilter filter;

  CLI::App* stats = app.add_subcommand(
      "stats", "Last sequence number, outbox backlog and per-subscriber progress.");
  stats->add_option("dir", dir, "Database directory")->required();
  stats->add_flag("--json", json, "Print one JSON object");

  CLI::App* metrics = app.add_subcommand(
      "metrics", "The progress metrics recorded in the database, in Prometheus text format (the names a running "
                 "bus's MetricsText uses).");
  metrics->add_option("dir", dir, "Database directory")->required();
  metrics->add_flag("--json", json, "Print JSON Lines: one object per sample (series)");

  std::string bridge_cf = "jetstream";
  CLI::App* bridge = app.add_subcommand(
      "bridge", "What the NATS JetStream bridge keeps: each relay's origin, positions, journal of messages not yet "
                "confirmed on the server and losses it could not repair; each inbound consumer's newest message.");
  bridge->add_option("dir", dir, "Database directory")->required();
  bridge->add_option("--column-family", bridge_cf, "The bridge's column family")->capture_default_str();
  bridge->add_flag("--json", json, "One JSON object per relay and consumer");

  CLI::App* dlq = app.add_subcommand(
      "dlq", "The dead-letter store: events a subscriber gave up on after its retry budget, with their errors.");
  dlq->require_subcommand(1);
  CLI::App* dlq_ls = dlq->add_subcommand(
      "ls", "One line per dead letter: subscriber, seq, type, subject, attempts, error. In (subscriber, seq) order.");
  dlq_ls->add_option("dir", dir, "Database directory")->required();
  dlq_ls->add_option("--subscriber", subscriber, "Only this subscriber's dead letters");
  dlq_ls->add_option("--limit", limit, "Show at most N entries; 0 for all")->capture_default_str();
  dlq_ls->add_flag("--json", json, "Print JSON Lines: one object per entry, with every field");
  CLI::App* dlq_show = dlq->add_subcommand(
      "show", "Every field of one dead letter: the event, the failure record and the payload (as JSON text for "
              "application/json, else hex of the first 256 bytes). Exit 1 when there is none.");
  dlq_show->add_option("dir", dir, "Database directory")->required();
  dlq_show->add_option("--subscriber", subscriber, "Subscriber name")->required();
  dlq_show->add_option("--seq", seq, "Sequence number of the event")->required();
  dlq_show->add_flag("--json", json, "Print one JSON object");

  // The operator actions on dead letters. Numbers are passed on as typed:
  // the request check (strict decimal) is the one place that reads them.
  std::vector<std::string> seq_texts, types, ids;
  std::string type, subject, operator_name, reason;
  bool all = false, dry_run = false;
  struct DlqAction {
    CLI::App* cmd;
    std::string verb;
    CLI::Option *seq, *all, *type, *subject, *operator_name, *reason;
  };
  std::vector<DlqAction> dlq_actions;
  for (auto [name, verb, help] : {
           std::tuple{"redrive", "dlq-redrive",
                      "Run the selected dead letters again through their subscriber, in their original per-subject "
                      "order; needs the process that runs the subscriber (its admin socket)."},
           std::tuple{"skip", "dlq-skip",
                      "Release the parked subjects of the selection without running the dead letters (they stay, "
                      "for inspection)."},
           std::tuple{"purge", "dlq-purge", "Delete the selected dead letters (the action record keeps their seqs "
                                            "and event ids)."}}) {
    CLI::App* cmd = dlq->add_subcommand(name, help);
    DlqAction a{cmd, verb, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    cmd->add_option("dir", dir, "Database directory")->required();
    cmd->add_option("--subscriber", subscriber, "Whose dead letters")->required();
    a.seq = cmd->add_option("--seq", seq_texts, "Select this dead letter (by seq); repeat for more")
                ->allow_extra_args(false)
                ->take_all();
    a.all = cmd->add_flag("--all", all, "Select every dead letter of the subscriber");
    a.type = cmd->add_option("--type", type, "Select those of this event type (and --subject, when given)");
    a.subject = cmd->add_option("--subject", subject, "Select those of this subject (and --type, when given)");
    a.operator_name = cmd->add_option("--operator", operator_name, "Who acts (recorded)")->required();
    a.reason = cmd->add_option("--reason", reason, "Why (recorded)")->required();
    cmd->add_flag("--dry-run", dry_run, "Show what would be selected; change nothing");
    cmd->add_flag("--json", json, "Print the report as one JSON object");
    dlq_actions.push_back(a);
  }

  CLI::App* quarantine = app.add_subcommand(
      "quarantine", "The quarantine: input that failed verification (bridge input, files), with the rule broken.");
  quarantine->require_subcommand(1);
  CLI::App* q_ls = quarantine->add_subcommand(
      "ls", "One line per quarantined input: arrival, time, source, original size, reason. In arrival order.");
  q_ls->add_option("dir", dir, "Database directory")->required();
  q_ls->add_option("--limit", limit, "Show at most N entries; 0 for all")->capture_default_str();
  q_ls->add_flag("--json", json, "Print JSON Lines: one object per entry, with every field");
  CLI::App* q_show = quarantine->add_subcommand(
      "show", "Every field of one quarantined input, with the raw bytes as hex (first 256). Exit 1 when there is "
              "none.");
  q_show->add_option("dir", dir, "Database directory")->required();
  q_show->add_option("--arrival", arrival, "Arrival number, as `quarantine ls` shows it")->required();
  q_show->add_flag("--json", json, "Print one JSON object");

  CLI::App* subscribers = app.add_subcommand(
      "subscribers", "Every registered subscriber: checkpoint, lag, counts, and the retries, dead letters and "
                     "parked subjects waiting now");
  subscribers->add_option("dir", dir, "Database directory")->required();
  subscribers->add_flag("--json", json, "Print JSON Lines: one object per subscriber");

  auto add_filters = [&](CLI::App* cmd) {
    cmd->add_option("dir", dir, "Database directory")->required();
    cmd->add_option("--type", filter.type, "Only events of this type");
    cmd->add_option("--subject", filter.subject, "Only events of this subject");
    cmd->add_option("--from-seq", filter.from_seq, "Only from this sequence number on");
    cmd->add_option("--to-seq", filter.to_seq, "Only up to this sequence number");
    cmd->add_option("--since", since, "Only events at or after this RFC 3339 time");
    cmd->add_option("--until", until, "Only events before this RFC 3339 time");
    cmd->add_option("--limit", limit, "Show at most N entries; 0 for all")->capture_default_str();
  };
  CLI::App* outbox = app.add_subcommand("outbox", "Events still in the outbox (not yet passed by every subscriber)");
  outbox->require_subcommand(1);
  CLI::App* outbox_ls = outbox->add_subcommand("ls", "List outbox entries in order, with filters");
  add_filters(outbox_ls);
  outbox_ls->add_flag("--json", json, "Print JSON Lines: one object per entry, with every field");
  CLI::App* outbox_show = outbox->add_subcommand("show", "Every field of one outbox entry");
  outbox_show->add_option("dir", dir, "Database directory")->required();
  outbox_show->add_option("--seq", seq, "Sequence number")->required();
  outbox_show->add_flag("--json", json, "Print one JSON object");

  CLI::App* event = app.add_subcommand(
      "event", "One event's story: the event, where it stands for each subscriber (handled when, retrying, dead "
               "letter), and its follow-ups");
  event->add_option("dir", dir, "Database directory")->required();
  event->add_option("id", event_id, "Event id")->required();
  event->add_flag("--json", json, "Print one JSON object");

  CLI::App* inbox = app.add_subcommand("inbox", "The subscribers' records of completed events");
  inbox->require_subcommand(1);
  CLI::App* inbox_check = inbox->add_subcommand(
      "check", "Whether a subscriber completed an event (exit 0) or has no record of it (exit 1)");
  inbox_check->add_option("dir", dir, "Database directory")->required();
  inbox_check->add_option("--subscriber", subscriber, "Subscriber name")->required();
  inbox_check->add_option("--event", event_id, "Event id")->required();
  inbox_check->add_flag("--json", json, "Print one JSON object");

  CLI::App* export_cmd = app.add_subcommand(
      "export", "Outbox events in the CloudEvents JSON event format, one per line (binary data as data_base64)");
  add_filters(export_cmd);
  export_cmd->add_option("--format", format, "Output format")->required()->check(CLI::IsMember({"cloudevents-json"}));

  CLI::App* replay = app.add_subcommand(
      "replay", "Run retained events through one subscriber again, as a recorded operator action: in the running "
                "process (through its admin socket), or, on a stopped database, once the application next runs the "
                "subscriber. Or show (--status) or stop (--cancel) a replay.");
  std::string mode, from_seq_text, to_seq_text, max_text, status_id, cancel_id;
  replay->add_option("dir", dir, "Database directory")->required();
  CLI::Option* r_subscriber = replay->add_option("--subscriber", subscriber, "The subscriber to replay to");
  CLI::Option* r_mode = replay->add_option("--mode", mode, "same-inbox (default: events it handled are skipped) or "
                                                           "fresh-scope (all run again; side-effect-safe handlers)");
  CLI::Option* r_from = replay->add_option("--from-seq", from_seq_text, "From this sequence number on");
  CLI::Option* r_to = replay->add_option("--to-seq", to_seq_text, "Up to this sequence number");
  CLI::Option* r_since = replay->add_option("--since", since, "Events at or after this RFC 3339 time");
  CLI::Option* r_until = replay->add_option("--until", until, "Events before this RFC 3339 time");
  CLI::Option* r_types = replay->add_option("--type", types, "Events of this type; repeat for more")
                              ->allow_extra_args(false)
                              ->take_all();
  CLI::Option* r_subject = replay->add_option("--subject", subject, "Events of this subject");
  CLI::Option* r_ids =
      replay->add_option("--id", ids, "This event; repeat for more")->allow_extra_args(false)->take_all();
  CLI::Option* r_max = replay->add_option("--max", max_text, "At most this many events");
  CLI::Option* r_operator = replay->add_option("--operator", operator_name, "Who acts (recorded)");
  CLI::Option* r_reason = replay->add_option("--reason", reason, "Why (recorded)");
  CLI::Option* r_dry_run = replay->add_flag("--dry-run", dry_run, "Show what would run; change nothing");
  CLI::Option* r_status = replay->add_option("--status", status_id, "Show the replay with this id");
  CLI::Option* r_cancel = replay->add_option("--cancel", cancel_id, "Stop the replay with this id");
  replay->add_flag("--json", json, "Print the report as one JSON object");

  CheckWholeNumbers(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return UsageError(app, argc, argv, e);
  }
  if (stats->parsed()) return RunStats(dir, json);
  if (metrics->parsed()) return RunMetrics(dir, json);
  if (bridge->parsed()) return walbus::tools::RunBridge(dir, bridge_cf, json);
  if (dlq_ls->parsed()) return RunDlqLs(dir, subscriber, limit, json);
  if (dlq_show->parsed()) return RunDlqShow(dir, subscriber, seq, json);
  for (const DlqAction& a : dlq_actions) {
    if (!a.cmd->parsed()) continue;
    const std::string command = "dlq " + a.cmd->get_name();
    if (a.seq->count() == 0 && a.all->count() == 0 && a.type->count() == 0 && a.subject->count() == 0) {
      std::cerr << "walbus " << command << ": choose the dead letters: --seq N (repeatable), --type T and/or "
                << "--subject X, or --all\n";
      return 2;
    }
    AdminFields fields{{"subscriber", subscriber}};
    AddGiven(&fields, a.seq, "seq", seq_texts);
    if (all) fields.emplace_back("all", "true");
    AddGiven(&fields, a.type, "type", type);
    AddGiven(&fields, a.subject, "subject", subject);
    fields.emplace_back("operator", operator_name);
    fields.emplace_back("reason", reason);
    if (dry_run) fields.emplace_back("dry-run", "true");
    return RunAdmin(command, dir, a.verb, fields, json);
  }
  if (replay->parsed()) {
    const std::vector<const CLI::Option*> request_options = {r_subscriber, r_mode,  r_from,    r_to,
                                                             r_since,      r_until, r_types,   r_subject,
                                                             r_ids,        r_max,   r_dry_run};
    const bool any_request_option =
        std::any_of(request_options.begin(), request_options.end(), [](const CLI::Option* o) { return o->count() > 0; });
    AdminFields fields;
    if (r_status->count() > 0) {
      if (r_cancel->count() > 0 || any_request_option || r_operator->count() > 0 || r_reason->count() > 0) {
        std::cerr << "walbus replay: --status takes no other option but --json\n";
        return 2;
      }
      AddGiven(&fields, r_status, "replay", status_id);
      return RunAdmin("replay", dir, "replay-status", fields, json);
    }
    if (r_cancel->count() > 0) {
      if (any_request_option) {
        std::cerr << "walbus replay: --cancel takes only --operator, --reason and --json\n";
        return 2;
      }
      AddGiven(&fields, r_cancel, "replay", cancel_id);
      AddGiven(&fields, r_operator, "operator", operator_name);
      AddGiven(&fields, r_reason, "reason", reason);
      return RunAdmin("replay", dir, "replay-cancel", fields, json);
    }
    AddGiven(&fields, r_subscriber, "subscriber", subscriber);
    AddGiven(&fields, r_mode, "mode", mode);
    AddGiven(&fields, r_from, "from-seq", from_seq_text);
    AddGiven(&fields, r_to, "to-seq", to_seq_text);
    AddGiven(&fields, r_since, "since", since);
    AddGiven(&fields, r_until, "until", until);
    AddGiven(&fields, r_types, "type", types);
    AddGiven(&fields, r_subject, "subject", subject);
    AddGiven(&fields, r_ids, "id", ids);
    AddGiven(&fields, r_max, "max", max_text);
    AddGiven(&fields, r_operator, "operator", operator_name);
    AddGiven(&fields, r_reason, "reason", reason);
    if (dry_run) fields.emplace_back("dry-run", "true");
    return RunAdmin("replay", dir, "replay", fields, json);
  }
  if (q_ls->parsed()) return RunQuarantineLs(dir, limit, json);
  if (q_show->parsed()) return RunQuarantineShow(dir, arrival, json);
  if (subscribers->parsed()) return RunSubscribers(dir, json);
  if (outbox_show->parsed()) return RunOutboxShow(dir, seq, json);
  if (event->parsed()) return RunEvent(dir, event_id, json);
  if (inbox_check->parsed()) return RunInboxCheck(dir, subscriber, event_id, json);
  if (outbox_ls->parsed() || export_cmd->parsed()) {
    const std::string command = outbox_ls->parsed() ? "outbox ls" : "export";
    if (!ParseTimeOption(since, &filter.since) || !ParseTimeOption(until, &filter.until)) {
      std::cerr << "walbus " << command << ": --since and --until take RFC 3339 times, e.g. 2026-11-29T23:00:00Z\n";
      return 2;
    }
    return RunOutboxLs(command, dir, filter, limit, json, export_cmd->parsed());
  }
  return 2;
}
