// walbus stats|metrics|subscribers DIR [--json]: a database's progress;
// walbus subscribers remove DIR NAME: an operator removes a subscriber.
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

int RunStats(const std::string& dir, bool json) {
  wi::DatabaseReport report;
  if (Status s = wi::InspectDatabase(dir, &report); !s.ok()) return Fail("stats", s);
  std::cout << (json ? wi::ReportJson(report) + "\n" : wi::ReportText(report));
  return 0;
}

int RunMetrics(const std::string& dir, bool json) {
  wi::DatabaseReport report;
  if (Status s = wi::InspectDatabase(dir, &report); !s.ok()) return Fail("metrics", s);
  const std::vector<MetricFamily> families = wi::ReportMetrics(report);
  if (!json) {
    std::cout << PrometheusText(families);
    return 0;
  }
  for (const MetricFamily& f : families) {
    for (const MetricSample& sample : f.samples) std::cout << wi::MetricSampleJson(f, sample) << "\n";
  }
  return 0;
}

int RunSubscribers(const std::string& dir, bool json) {
  std::vector<wi::SubscriberDetail> subscribers;
  if (Status s = wi::ListSubscribers(dir, &subscribers); !s.ok()) return Fail("subscribers", s);
  if (json) {
    for (const auto& d : subscribers) std::cout << wi::SubscriberJson(d) << "\n";
  } else {
    std::cout << wi::SubscribersTable(subscribers);
  }
  return 0;
}

struct Values {
  std::string dir;
  bool json = false;
};

// One command of DIR and --json, run by `run`.
void AddCommand(CLI::App* app, Runners* runners, const std::string& name, const std::string& help,
                const std::string& json_help, int (*run)(const std::string&, bool)) {
  auto v = std::make_shared<Values>();
  CLI::App* cmd = app->add_subcommand(name, help);
  cmd->add_option("dir", v->dir, "Database directory")->required();
  cmd->add_flag("--json", v->json, json_help);
  runners->push_back([cmd, v, run]() -> std::optional<int> {
    if (!cmd->parsed()) return std::nullopt;
    return run(v->dir, v->json);
  });
}

struct RemoveValues {
  std::string dir, name, operator_name, reason;
  bool dry_run = false, json = false;
};

// subscribers DIR lists; subscribers remove DIR NAME removes one.
void AddSubscribersCommands(CLI::App* app, Runners* runners) {
  auto list = std::make_shared<Values>();
  CLI::App* cmd = app->add_subcommand("subscribers",
                                      "Every registered subscriber: checkpoint, lag, counts, and the retries, dead "
                                      "letters and parked subjects waiting now. `subscribers remove` removes one.");
  // Required unless `remove` is given (checked by the runner).
  cmd->add_option("dir", list->dir, "Database directory");
  cmd->add_flag("--json", list->json, "Print JSON Lines: one object per subscriber");
  auto rm = std::make_shared<RemoveValues>();
  CLI::App* remove = cmd->add_subcommand(
      "remove",
      "Remove a subscriber no process runs (a typo, a retired one): its checkpoint, counters, retries, dead "
      "letters and parked subjects go, and the outbox is no longer held for it. Recorded as an operator action.");
  remove->add_option("dir", rm->dir, "Database directory")->required();
  remove->add_option("name", rm->name, "The subscriber's name")->required();
  remove->add_option("--operator", rm->operator_name, "Who acts (recorded)")->required();
  remove->add_option("--reason", rm->reason, "Why (recorded)")->required();
  remove->add_flag("--dry-run", rm->dry_run, "Show what would be dropped; change nothing");
  remove->add_flag("--json", rm->json, "Print the report as one JSON object");
  runners->push_back([cmd, remove, list, rm]() -> std::optional<int> {
    if (remove->parsed()) {
      AdminFields fields{{"subscriber", rm->name}, {"operator", rm->operator_name}, {"reason", rm->reason}};
      if (rm->dry_run) fields.emplace_back("dry-run", "true");
      return RunAdmin("subscribers remove", rm->dir, "subscriber-remove", fields, rm->json);
    }
    if (!cmd->parsed()) return std::nullopt;
    if (list->dir.empty()) {
      std::cerr << "walbus subscribers: DIR is required\n";
      return 2;
    }
    return RunSubscribers(list->dir, list->json);
  });
}

}  // namespace

void AddDatabaseCommands(CLI::App* app, Runners* runners) {
  AddCommand(app, runners, "stats", "Last sequence number, outbox backlog and per-subscriber progress.",
             "Print one JSON object", RunStats);
  AddCommand(app, runners, "metrics",
             "The progress metrics recorded in the database, in Prometheus text format (the names a running "
             "bus's MetricsText uses).",
             "Print JSON Lines: one object per sample (series)", RunMetrics);
  AddSubscribersCommands(app, runners);
}

}  // namespace walbus::tools
