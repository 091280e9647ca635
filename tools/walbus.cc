// walbus: the operator's command-line tool.
//
//   walbus stats <dir> [--json]
//   walbus metrics <dir>
//   walbus dlq ls <dir> [--subscriber S] [--limit N] [--json]
//   walbus dlq show <dir> --subscriber S --seq N [--json]
//   walbus quarantine ls <dir> [--limit N] [--json]
//   walbus quarantine show <dir> --arrival N [--json]
//
// Every command is read-only and works on a stopped database and on one a
// running process holds. --json prints JSON Lines: one object per entry.
//
// Exit codes: 0 ok; 1 the operation failed, or the entry asked for does
// not exist; 2 bad usage (an unknown subscriber included), or the directory
// is missing or not a walbus database.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>

#include "bus/inspect.h"
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

int RunStats(const std::string& dir, bool json) {
  walbus::internal::DatabaseReport report;
  walbus::Status s = walbus::internal::InspectDatabase(dir, &report);
  if (!s.ok()) return Fail("stats", s);
  std::cout << (json ? walbus::internal::ReportJson(report) + "\n" : walbus::internal::ReportText(report));
  return 0;
}

int RunMetrics(const std::string& dir) {
  walbus::internal::DatabaseReport report;
  walbus::Status s = walbus::internal::InspectDatabase(dir, &report);
  if (!s.ok()) return Fail("metrics", s);
  std::cout << walbus::internal::ReportMetrics(report);
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"walbus: inspect and operate walbus databases. Every command is read-only and works on a stopped "
               "database and on one a running process holds."};
  app.set_version_flag("--version", WALBUS_VERSION_STRING);
  app.require_subcommand(1);

  std::string dir;
  bool json = false;
  std::string subscriber;
  size_t limit = kDefaultLimit;
  uint64_t seq = 0;
  uint64_t arrival = 0;

  CLI::App* stats = app.add_subcommand(
      "stats", "Last sequence number, outbox backlog and per-subscriber progress.");
  stats->add_option("dir", dir, "Database directory")->required();
  stats->add_flag("--json", json, "Print one JSON object");

  CLI::App* metrics = app.add_subcommand(
      "metrics", "The progress metrics recorded in the database, in Prometheus text format (the names a running "
                 "bus's MetricsText uses).");
  metrics->add_option("dir", dir, "Database directory")->required();

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (stats->parsed()) return RunStats(dir, json);
  if (metrics->parsed()) return RunMetrics(dir);
  if (dlq_ls->parsed()) return RunDlqLs(dir, subscriber, limit, json);
  if (dlq_show->parsed()) return RunDlqShow(dir, subscriber, seq, json);
  if (q_ls->parsed()) return RunQuarantineLs(dir, limit, json);
  if (q_show->parsed()) return RunQuarantineShow(dir, arrival, json);
  return 2;
}
