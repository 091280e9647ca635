#include "tests/tools/walbus/cli_runner.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

namespace walbus::testing {

int RunCli(const std::string& args) {
  int rc = std::system((std::string(WALBUS_CLI) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int RunCliCapture(const std::string& args, const char* redirect, std::string* out) {
  out->clear();
  FILE* p = popen((std::string(WALBUS_CLI) + " " + args + " " + redirect).c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int rc = pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int RunCliOutput(const std::string& args, std::string* out) { return RunCliCapture(args, "2>/dev/null", out); }

int RunCliErrors(const std::string& args, std::string* err) { return RunCliCapture(args, "2>&1 >/dev/null", err); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace walbus::testing
