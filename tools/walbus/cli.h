// What the `walbus` tool's commands share: how each registers itself, how
// errors and exit codes are reported, and the checks of option values.
//
// Exit codes: 0 ok; 1 the operation failed or was refused, or the entry
// asked for does not exist; 2 bad usage (an unknown subscriber included,
// for the reading commands), or the directory is missing or not a walbus
// database, or is held by a process without the admin socket.
#ifndef WALBUS_TOOLS_WALBUS_CLI_H_
#define WALBUS_TOOLS_WALBUS_CLI_H_

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/event.h"
#include "walbus/status.h"

namespace walbus::tools {

// A command's run: its exit code when its subcommand is the one parsed,
// else nullopt. Each command group adds its subcommands to the app and one
// runner per command (tools/walbus/commands.h).
using Runner = std::function<std::optional<int>()>;
using Runners = std::vector<Runner>;

// Entries a listing shows unless --limit says otherwise.
inline constexpr size_t kDefaultLimit = 100;

// Prints "walbus <command>: <status>" to stderr; returns 2 for NotFound and
// InvalidArgument (a usage problem: no such database, subscriber...), else 1.
int Fail(std::string_view command, const Status& s);

// --limit 0 means no limit. One more entry than shown is read to tell
// whether the listing was cut (Truncate).
size_t ReadLimit(size_t limit);
// Cuts `entries` to `limit` (0: no limit); true when it cut some.
template <typename Entry>
bool Truncate(std::vector<Entry>* entries, size_t limit) {
  if (limit == 0 || entries->size() <= limit) return false;
  entries->resize(limit);
  return true;
}
// Tells stderr that a listing was cut at `limit`.
void NoteTruncated(std::string_view command, size_t limit);

// Every option that takes a number, in every command, takes only digits
// (CLI11 alone reads "-1" as 18446744073709551615).
void CheckWholeNumbers(CLI::App* app);

// A usage error as every other error is said: "walbus <command>: why",
// naming an unknown command word and listing the ones there are. Returns 2.
int UsageError(const CLI::App& app, int argc, char** argv, const CLI::ParseError& e);

// A --since/--until value: an RFC 3339 time, or empty (unset). False when
// it is neither.
bool ParseTimeOption(const std::string& text, std::optional<std::chrono::system_clock::time_point>* out);

// An event id as typed; nullopt (with the reason on stderr) when it is not one.
std::optional<EventId> ParseEventId(std::string_view command, const std::string& text);

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_WALBUS_CLI_H_
