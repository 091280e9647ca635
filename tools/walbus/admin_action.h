// The operator actions of the tool (dlq redrive|skip|purge, replay): one
// admin request, sent to the process that holds the database through its
// admin socket when one answers there, else run on the database itself.
#ifndef WALBUS_TOOLS_WALBUS_ADMIN_ACTION_H_
#define WALBUS_TOOLS_WALBUS_ADMIN_ACTION_H_

#include <CLI/CLI.hpp>

#include <string>
#include <utility>
#include <vector>

namespace walbus::tools {

// key=value fields of an admin request, in order.
using AdminFields = std::vector<std::pair<std::string, std::string>>;

// Adds the field `key` for each value of an option that was given on the
// command line (an empty value included: the request check refuses it).
void AddGiven(AdminFields* fields, const CLI::Option* option, const std::string& key, const std::string& value);
void AddGiven(AdminFields* fields, const CLI::Option* option, const std::string& key,
              const std::vector<std::string>& values);

// Runs the request `verb` + `fields`: through the admin socket of the
// process that holds `dir` when one answers there, else on the database
// itself, opened here with default options (no subscriber, nothing
// started). The same request text reaches the same function
// (AnswerAdminRequest) either way. Prints the reply (JSON with `json`);
// returns the exit code.
int RunAdmin(const std::string& command, const std::string& dir, const std::string& verb, const AdminFields& fields,
             bool json);

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_WALBUS_ADMIN_ACTION_H_
