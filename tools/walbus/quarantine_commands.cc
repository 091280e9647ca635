// walbus quarantine ls|show: input that failed verification, with the rule
// it broke.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tools/walbus/commands.h"
#include "tools/walbus/inspect.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;

int RunQuarantineLs(const std::string& dir, size_t limit, bool json) {
  std::vector<wi::QuarantineEntry> entries;
  if (Status s = wi::ListQuarantine(dir, &entries, ReadLimit(limit)); !s.ok()) return Fail("quarantine ls", s);
  const bool truncated = Truncate(&entries, limit);
  if (json) {
    for (const auto& e : entries) std::cout << wi::QuarantineJson(e) << "\n";
  } else {
    std::cout << wi::QuarantineTable(entries);
  }
  if (truncated) NoteTruncated("quarantine ls", limit);
  return 0;
}

int RunQuarantineShow(const std::string& dir, uint64_t arrival, bool json) {
  wi::QuarantineEntry entry;
  bool found = false;
  if (Status s = wi::FindQuarantine(dir, arrival, &entry, &found); !s.ok()) return Fail("quarantine show", s);
  if (!found) {
    std::cerr << "walbus quarantine show: nothing in quarantine at arrival " << arrival << "\n";
    return 1;
  }
  std::cout << (json ? wi::QuarantineJson(entry) + "\n" : wi::QuarantineText(entry));
  return 0;
}

struct Values {
  std::string dir;
  bool json = false;
  size_t limit = kDefaultLimit;
  uint64_t arrival = 0;
};

}  // namespace

void AddQuarantineCommands(CLI::App* app, Runners* runners) {
  auto v = std::make_shared<Values>();
  CLI::App* quarantine = app->add_subcommand(
      "quarantine", "The quarantine: input that failed verification (bridge input, files), with the rule broken.");
  quarantine->require_subcommand(1);
  CLI::App* ls = quarantine->add_subcommand(
      "ls", "One line per quarantined input: arrival, time, source, original size, reason. In arrival order.");
  ls->add_option("dir", v->dir, "Database directory")->required();
  ls->add_option("--limit", v->limit, "Show at most N entries; 0 for all")->capture_default_str();
  ls->add_flag("--json", v->json, "Print JSON Lines: one object per entry, with every field");
  CLI::App* show = quarantine->add_subcommand(
      "show",
      "Every field of one quarantined input, with the raw bytes as hex (first 256). Exit 1 when there is "
      "none.");
  show->add_option("dir", v->dir, "Database directory")->required();
  show->add_option("--arrival", v->arrival, "Arrival number, as `quarantine ls` shows it")->required();
  show->add_flag("--json", v->json, "Print one JSON object");
  runners->push_back([ls, show, v]() -> std::optional<int> {
    if (ls->parsed()) return RunQuarantineLs(v->dir, v->limit, v->json);
    if (show->parsed()) return RunQuarantineShow(v->dir, v->arrival, v->json);
    return std::nullopt;
  });
}

}  // namespace walbus::tools
