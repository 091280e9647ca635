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
//   walbus get <dir> <column family> <key> [--json] [--hex] [--keys-hex]
//   walbus scan <dir> <column family> [--prefix P] [--start K] [--end K]
//          [--after K] [--limit N] [--reverse] [--json] [--hex] [--keys-hex]
//   walbus schema check <old schema> <new schema>
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
// entry (scan: one object holding the rows and where the next page starts).
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
//
// Each command group is a file of its own (tools/walbus/commands.h).
#include <CLI/CLI.hpp>

#include <optional>

#include "tools/guarded_main.h"
#include "tools/walbus/cli.h"
#include "tools/walbus/commands.h"
#include "walbus/version.h"

static int Main(int argc, char** argv) {
  namespace tools = walbus::tools;
  CLI::App app{
      "walbus: inspect and operate walbus databases. The reading commands change nothing and work on a "
      "stopped database and on one a running process holds; the actions (dlq redrive|skip|purge, replay) "
      "go to the running process through its admin socket, or to a stopped database directly."};
  app.set_version_flag("--version", WALBUS_VERSION_STRING);
  app.require_subcommand(1);
  tools::Runners runners;
  tools::AddDatabaseCommands(&app, &runners);
  tools::AddBridgeCommand(&app, &runners);
  tools::AddDeadLetterCommands(&app, &runners);
  tools::AddQuarantineCommands(&app, &runners);
  tools::AddScheduledCommands(&app, &runners);
  tools::AddProcessCommands(&app, &runners);
  tools::AddEventCommands(&app, &runners);
  tools::AddStateCommands(&app, &runners);
  tools::AddSchemaCommand(&app, &runners);
  tools::AddReplayCommand(&app, &runners);
  tools::CheckWholeNumbers(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return tools::UsageError(app, argc, argv, e);
  }
  for (const tools::Runner& run : runners) {
    if (std::optional<int> code = run()) return *code;
  }
  return 2;
}

int main(int argc, char** argv) { return walbus::tools::GuardedMain("walbus", Main, argc, argv); }
