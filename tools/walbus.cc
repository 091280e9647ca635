// walbus: the operator's command-line tool.
//
//   walbus stats <dir> [--json]
//
// Exit codes: 0 ok; 1 the operation failed; 2 bad usage, or the directory
// is missing or not a walbus database.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "bus/inspect.h"

namespace {

constexpr const char* kVersion = "0.1.0";

int ExitCodeFor(const walbus::Status& s) {
  return s.IsNotFound() || s.IsInvalidArgument() ? 2 : 1;
}

int RunStats(const std::string& dir, bool json) {
  walbus::internal::DatabaseReport report;
  walbus::Status s = walbus::internal::InspectDatabase(dir, &report);
  if (!s.ok()) {
    std::cerr << "walbus stats: " << s.ToString() << "\n";
    return ExitCodeFor(s);
  }
  std::cout << (json ? walbus::internal::ReportJson(report) + "\n" : walbus::internal::ReportText(report));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"walbus: inspect and operate walbus databases"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);

  std::string dir;
  bool json = false;
  CLI::App* stats = app.add_subcommand(
      "stats", "Last sequence number, outbox backlog and per-subscriber progress. Works on a stopped database "
               "and on one a running process holds.");
  stats->add_option("dir", dir, "Database directory")->required();
  stats->add_flag("--json", json, "Print one JSON object");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (stats->parsed()) return RunStats(dir, json);
  return 2;
}
