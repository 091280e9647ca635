// Runs the `walbus` tool built in this tree (WALBUS_CLI, set by the test's
// target) as a child process and captures what it prints.
#ifndef WALBUS_TESTS_TOOLS_WALBUS_CLI_RUNNER_H_
#define WALBUS_TESTS_TOOLS_WALBUS_CLI_RUNNER_H_

#include <string>
#include <vector>

namespace walbus::testing {

// The exit code of `walbus <args>`, its output thrown away; -1 when it did
// not exit.
int RunCli(const std::string& args);
// Runs it with `redirect` (shell redirections) and captures what it then
// writes to the pipe; returns the exit code.
int RunCliCapture(const std::string& args, const char* redirect, std::string* out);
// Captures its standard output.
int RunCliOutput(const std::string& args, std::string* out);
// Captures what it says on standard error.
int RunCliErrors(const std::string& args, std::string* err);
// The lines of `text`, without their newlines.
std::vector<std::string> Lines(const std::string& text);

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_TOOLS_WALBUS_CLI_RUNNER_H_
