#include "tools/walbus/admin_action.h"

#include <iostream>
#include <memory>
#include <optional>

#include "bus/ops/admin_server.h"
#include "tools/walbus/admin_client.h"
#include "walbus/bus.h"

namespace walbus::tools {

void AddGiven(AdminFields* fields, const CLI::Option* option, const std::string& key, const std::string& value) {
  if (option->count() > 0) fields->emplace_back(key, value);
}
void AddGiven(AdminFields* fields, const CLI::Option* option, const std::string& key,
              const std::vector<std::string>& values) {
  if (option->count() == 0) return;
  for (const std::string& v : values) fields->emplace_back(key, v);
}

namespace {

// Runs `request` on the database in `dir`, which no process holds: opens
// it with default options (no subscriber, nothing started). The exit code
// when that fails, else nullopt and the reply.
std::optional<int> AnswerOnTheDatabase(const std::string& command, const std::string& dir, const std::string& request,
                                       std::string* reply) {
  namespace wi = walbus::internal;
  walbus::Options options;
  options.dir = dir;
  options.create_if_missing = false;
  // The bus's log lines (a replay recorded, say) go to stderr: stdout
  // holds the report alone, JSON with --json.
  options.logger = walbus::NewStandardErrorLogger();
  std::unique_ptr<walbus::Bus> bus;
  walbus::Status s = walbus::Bus::Open(options, &bus);
  if (s.IsBusy()) {
    std::cerr << "walbus " << command << ": " << dir << " is held by a running process that does not listen on "
              << wi::AdminSocketPath(dir) << "; that process must set Options::admin_socket for this command "
              << "to reach it\n";
    return 2;
  }
  if (!s.ok()) {
    std::cerr << "walbus " << command << ": " << s.ToString() << "\n";
    return 2;
  }
  *reply = wi::AnswerAdminRequest(*bus, request);
  if (walbus::Status closed = bus->Close(); !closed.ok()) {
    std::cerr << "walbus " << command << ": closing " << dir << ": " << closed.ToString() << "\n";
    return 1;
  }
  return std::nullopt;
}

}  // namespace

int RunAdmin(const std::string& command, const std::string& dir, const std::string& verb, const AdminFields& fields,
             bool json) {
  namespace wi = walbus::internal;
  const std::string request = wi::FormatAdminRequest(verb, fields);
  wi::AdminRequest checked;
  if (walbus::Status s = wi::ParseAdminRequest(request, &checked); !s.ok()) {
    std::string message = s.message();
    if (message.starts_with(verb + ": ")) message.erase(0, verb.size() + 2);
    std::cerr << "walbus " << command << ": " << message << "\n";
    return 2;
  }
  std::string reply;
  bool listening = false;
  walbus::Status s = wi::CallAdminSocket(dir, request, &reply, &listening);
  if (!s.ok()) {
    std::cerr << "walbus " << command << ": " << s.ToString() << "\n";
    return 2;
  }
  if (!listening) {
    if (std::optional<int> failed = AnswerOnTheDatabase(command, dir, request, &reply)) return *failed;
  }
  wi::AdminReply answer;
  if (walbus::Status r = wi::ParseAdminReply(reply, &answer); !r.ok()) {
    std::cerr << "walbus " << command << ": " << r.message() << "\n";
    return 1;
  }
  if (!answer.status.ok()) {
    std::cerr << "walbus " << command << ": " << answer.status.ToString() << "\n";
    if (!listening && checked.verb == wi::AdminVerb::kDlqRedrive) {
      std::cerr << "walbus " << command << ": no process holds " << dir
                << ", so no subscriber is active; redrive while the application runs, with "
                << "Options::admin_socket set\n";
    }
    return 1;
  }
  std::cout << (json ? answer.body + "\n" : wi::AdminReplyText(answer.body));
  return 0;
}

}  // namespace walbus::tools
