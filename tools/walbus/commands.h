// The `walbus` tool's command groups. Each adds its subcommands to the app
// and one runner per command; main() parses and runs the one given.
#ifndef WALBUS_TOOLS_WALBUS_COMMANDS_H_
#define WALBUS_TOOLS_WALBUS_COMMANDS_H_

#include <CLI/CLI.hpp>

#include "tools/walbus/cli.h"

namespace walbus::tools {

// stats, metrics, subscribers: a database's progress (database_commands.cc).
void AddDatabaseCommands(CLI::App* app, Runners* runners);
// outbox ls|show, export, event, inbox check: events and where they stand
// (event_commands.cc).
void AddEventCommands(CLI::App* app, Runners* runners);
// dlq ls|show|redrive|skip|purge (dead_letter_commands.cc).
void AddDeadLetterCommands(CLI::App* app, Runners* runners);
// quarantine ls|show (quarantine_commands.cc).
void AddQuarantineCommands(CLI::App* app, Runners* runners);
// scheduled ls|show|cancel (scheduled_commands.cc).
void AddScheduledCommands(CLI::App* app, Runners* runners);
// process ls|show (process_commands.cc).
void AddProcessCommands(CLI::App* app, Runners* runners);
// replay: start, --status, --cancel (replay_command.cc).
void AddReplayCommand(CLI::App* app, Runners* runners);
// get, scan: the application's column families (state_commands.cc).
void AddStateCommands(CLI::App* app, Runners* runners);
// schema check: event contracts (schema_command.cc).
void AddSchemaCommand(CLI::App* app, Runners* runners);
// bridge: what the JetStream bridge keeps (bridge_command.cc).
void AddBridgeCommand(CLI::App* app, Runners* runners);

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_WALBUS_COMMANDS_H_
