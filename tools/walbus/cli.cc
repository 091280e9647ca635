#include "tools/walbus/cli.h"

#include <charconv>
#include <cstdint>
#include <iostream>
#include <limits>
#include <set>

#include "bus/util/rfc3339.h"

namespace walbus::tools {

int Fail(std::string_view command, const Status& s) {
  std::cerr << "walbus " << command << ": " << s.ToString() << "\n";
  return s.IsNotFound() || s.IsInvalidArgument() ? 2 : 1;
}

size_t ReadLimit(size_t limit) {
  return limit == 0 || limit == std::numeric_limits<size_t>::max() ? std::numeric_limits<size_t>::max() : limit + 1;
}

void NoteTruncated(std::string_view command, size_t limit) {
  std::cerr << "walbus " << command << ": showing the first " << limit
            << " entries; use --limit N for more (0 for all)\n";
}

namespace {

// A count, a sequence number or an arrival number: decimal digits only.
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

}  // namespace

void CheckWholeNumbers(CLI::App* app) {
  static const std::set<std::string> kNumbers = {"--limit",  "--seq", "--arrival", "--from-seq",
                                                 "--to-seq", "--max", "--status",  "--cancel"};
  for (CLI::Option* option : app->get_options()) {
    if (kNumbers.count(option->get_name()) > 0) option->check(kWholeNumber);
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) CheckWholeNumbers(sub);
}

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

bool ParseTimeOption(const std::string& text, std::optional<std::chrono::system_clock::time_point>* out) {
  if (text.empty()) return true;
  std::chrono::system_clock::time_point t;
  if (!internal::ParseRfc3339(text, &t)) return false;
  *out = t;
  return true;
}

std::optional<EventId> ParseEventId(std::string_view command, const std::string& text) {
  auto id = EventId::Parse(text);
  if (!id) std::cerr << "walbus " << command << ": '" << text << "' is not an event id (8-4-4-4-12 hex)\n";
  return id;
}

}  // namespace walbus::tools
