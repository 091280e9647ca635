// walbus process ls|show|abandon: the running instances of a process
// manager (walbus/process.h), on a live or a stopped database, and an
// operator's abandonment of one (through the admin socket on a live
// database, recorded).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tools/walbus/admin_action.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/inspect.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;

struct Values {
  std::string dir, name, key;
  bool json = false;
  size_t limit = kDefaultLimit;
  std::string operator_name, reason;
  bool dry_run = false;
};

int RunProcessLs(const Values& v) {
  std::vector<wi::ProcessEntry> entries;
  if (Status s = wi::ListProcesses(v.dir, v.name, &entries, ReadLimit(v.limit)); !s.ok()) return Fail("process ls", s);
  const bool truncated = Truncate(&entries, v.limit);
  if (v.json) {
    for (const auto& e : entries) std::cout << wi::ProcessJson(e) << "\n";
  } else {
    std::cout << wi::ProcessTable(entries);
  }
  if (truncated) NoteTruncated("process ls", v.limit);
  return 0;
}

int RunProcessShow(const Values& v) {
  wi::ProcessEntry entry;
  bool found = false;
  if (Status s = wi::FindProcess(v.dir, v.name, v.key, &entry, &found); !s.ok()) return Fail("process show", s);
  if (!found) {
    std::cerr << "walbus process show: no instance of " << v.name << " runs under key " << v.key << "\n";
    return 1;
  }
  std::cout << (v.json ? wi::ProcessJson(entry) + "\n" : wi::ProcessText(entry));
  return 0;
}

int RunProcessAbandon(const Values& v) {
  AdminFields fields{{"process", v.name}, {"key", v.key}, {"operator", v.operator_name}, {"reason", v.reason}};
  if (v.dry_run) fields.emplace_back("dry-run", "true");
  return RunAdmin("process abandon", v.dir, "process-abandon", fields, v.json);
}

}  // namespace

void AddProcessCommands(CLI::App* app, Runners* runners) {
  auto v = std::make_shared<Values>();
  CLI::App* process = app->add_subcommand("process", "Process managers: their running instances (docs/processes.md).");
  process->require_subcommand(1);
  CLI::App* ls = process->add_subcommand(
      "ls",
      "One line per running instance of process NAME, in key order: key, started, updated, events, next "
      "timeout.");
  ls->add_option("dir", v->dir, "Database directory")->required();
  ls->add_option("name", v->name, "The process's name")->required();
  ls->add_option("--limit", v->limit, "Show at most N instances; 0 for all")->capture_default_str();
  ls->add_flag("--json", v->json, "Print JSON Lines: one object per instance, with every field");
  CLI::App* show = process->add_subcommand(
      "show",
      "One running instance in full: versions, state (as JSON when its schema reads it), timeouts, the "
      "last events it handled. Exit 1 when none runs under KEY.");
  show->add_option("dir", v->dir, "Database directory")->required();
  show->add_option("name", v->name, "The process's name")->required();
  show->add_option("key", v->key, "The instance's key")->required();
  show->add_flag("--json", v->json, "Print one JSON object");
  CLI::App* abandon = process->add_subcommand(
      "abandon",
      "Abandon a running instance, recorded as an operator action: the process ends it without a step, its "
      "timeouts cancelled and its state removed, once it has handled what came before under its key. Through the "
      "admin socket when a process holds the database; otherwise when the application next runs the process.");
  abandon->add_option("dir", v->dir, "Database directory")->required();
  abandon->add_option("name", v->name, "The process's name")->required();
  abandon->add_option("key", v->key, "The instance's key")->required();
  abandon->add_option("--operator", v->operator_name, "Who acts (recorded)")->required();
  abandon->add_option("--reason", v->reason, "Why (recorded)")->required();
  abandon->add_flag("--dry-run", v->dry_run, "Check that the instance runs; change nothing");
  abandon->add_flag("--json", v->json, "Print the report as one JSON object");
  runners->push_back([ls, show, abandon, v]() -> std::optional<int> {
    if (ls->parsed()) return RunProcessLs(*v);
    if (show->parsed()) return RunProcessShow(*v);
    if (abandon->parsed()) return RunProcessAbandon(*v);
    return std::nullopt;
  });
}

}  // namespace walbus::tools
