// walbus stats|metrics|subscribers DIR [--json]: a database's progress.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

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

}  // namespace

void AddDatabaseCommands(CLI::App* app, Runners* runners) {
  AddCommand(app, runners, "stats", "Last sequence number, outbox backlog and per-subscriber progress.",
             "Print one JSON object", RunStats);
  AddCommand(app, runners, "metrics",
             "The progress metrics recorded in the database, in Prometheus text format (the names a running "
             "bus's MetricsText uses).",
             "Print JSON Lines: one object per sample (series)", RunMetrics);
  AddCommand(app, runners, "subscribers",
             "Every registered subscriber: checkpoint, lag, counts, and the retries, dead letters and parked "
             "subjects waiting now",
             "Print JSON Lines: one object per subscriber", RunSubscribers);
}

}  // namespace walbus::tools
