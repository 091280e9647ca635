// walbus scheduled ls|show|cancel: events waiting for their time
// (EventSpec::deliver_at), where one stands, and an operator's cancel of
// one (through the admin socket on a live database, recorded).
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/walbus/admin_action.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/inspect.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;

int RunScheduledLs(const std::string& dir, size_t limit, bool json) {
  std::vector<wi::ScheduledEntry> entries;
  if (Status s = wi::ListScheduled(dir, &entries, ReadLimit(limit)); !s.ok()) return Fail("scheduled ls", s);
  const bool truncated = Truncate(&entries, limit);
  if (json) {
    for (const auto& e : entries) std::cout << wi::ScheduledJson(e) << "\n";
  } else {
    std::cout << wi::ScheduledTable(entries);
  }
  if (truncated) NoteTruncated("scheduled ls", limit);
  return 0;
}

std::optional<EventId> ParseId(const std::string& command, const std::string& text) {
  std::optional<EventId> id = EventId::Parse(text);
  if (!id) std::cerr << "walbus " << command << ": " << text << " is not an event id (8-4-4-4-12 hex digits)\n";
  return id;
}

int RunScheduledShow(const std::string& dir, const std::string& id_text, bool json) {
  const std::optional<EventId> id = ParseId("scheduled show", id_text);
  if (!id) return 2;
  wi::ScheduledEntry entry;
  bool found = false;
  if (Status s = wi::FindScheduled(dir, *id, &entry, &found); !s.ok()) return Fail("scheduled show", s);
  if (!found) {
    std::cerr << "walbus scheduled show: no event " << id_text << " was scheduled here\n";
    return 1;
  }
  std::cout << (json ? wi::ScheduledJson(entry) + "\n" : wi::ScheduledText(entry));
  return 0;
}

struct Values {
  std::string dir;
  bool json = false;
  size_t limit = kDefaultLimit;
  std::string id;
  std::string operator_name, reason;
  bool dry_run = false;
};

int RunScheduledCancel(const Values& v) {
  AdminFields fields{{"id", v.id}, {"operator", v.operator_name}, {"reason", v.reason}};
  if (v.dry_run) fields.emplace_back("dry-run", "true");
  return RunAdmin("scheduled cancel", v.dir, "scheduled-cancel", fields, v.json);
}

}  // namespace

void AddScheduledCommands(CLI::App* app, Runners* runners) {
  auto v = std::make_shared<Values>();
  CLI::App* scheduled = app->add_subcommand(
      "scheduled", "Scheduled events: stored with their commit, waiting for their time (docs/time.md).");
  scheduled->require_subcommand(1);
  CLI::App* ls = scheduled->add_subcommand(
      "ls", "One line per pending scheduled event: due time (wall clock), id, type, subject. In due order.");
  ls->add_option("dir", v->dir, "Database directory")->required();
  ls->add_option("--limit", v->limit, "Show at most N events; 0 for all")->capture_default_str();
  ls->add_flag("--json", v->json, "Print JSON Lines: one object per event, with every field");
  CLI::App* show = scheduled->add_subcommand(
      "show",
      "Where one scheduled event stands (pending, fired, cancelled) and, while pending, the event. Exit 1 "
      "when it was never scheduled here.");
  show->add_option("dir", v->dir, "Database directory")->required();
  show->add_option("--id", v->id, "The event's id, as Publish returned it")->required();
  show->add_flag("--json", v->json, "Print one JSON object");
  CLI::App* cancel = scheduled->add_subcommand(
      "cancel",
      "Cancel a pending scheduled event, recorded as an operator action; through the admin socket when a "
      "process holds the database. Fails when it fired already.");
  cancel->add_option("dir", v->dir, "Database directory")->required();
  cancel->add_option("--id", v->id, "The event's id")->required();
  cancel->add_option("--operator", v->operator_name, "Who acts (recorded)")->required();
  cancel->add_option("--reason", v->reason, "Why (recorded)")->required();
  cancel->add_flag("--dry-run", v->dry_run, "Check that it is pending; change nothing");
  cancel->add_flag("--json", v->json, "Print the report as one JSON object");
  runners->push_back([ls, show, cancel, v]() -> std::optional<int> {
    if (ls->parsed()) return RunScheduledLs(v->dir, v->limit, v->json);
    if (show->parsed()) return RunScheduledShow(v->dir, v->id, v->json);
    if (cancel->parsed()) return RunScheduledCancel(*v);
    return std::nullopt;
  });
}

}  // namespace walbus::tools
