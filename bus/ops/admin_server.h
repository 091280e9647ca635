// Live administration (Options::admin_socket): the request format operator
// commands travel in, the one function that runs them on a Bus and the
// server on `<dir>/admin.sock`. The client is the `walbus` tool's
// (tools/walbus/admin_client.h).
//
// A request is text: a verb line, then one `key=value` line per field,
// then an empty line. Lines end with '\n'. In values, '%', '\n' and '\r'
// are written %25, %0A and %0D (no other escape exists); nothing else is
// escaped. At most kMaxAdminRequestBytes in all.
//
//   dlq-purge
//   subscriber=invoicing
//   seq=17
//   seq=18
//   operator=alice
//   reason=orders cancelled by the customer, ticket 4411
//
// Verbs and their keys ("list": may repeat; every other key at most once):
//   ping
//   dlq-redrive | dlq-skip | dlq-purge
//       subscriber (required), seq (list) | all=true | type, subject
//       (exactly one way to select), operator, reason (required),
//       dry-run=true|false
//   replay
//       subscriber, operator, reason (required), mode=same-inbox|fresh-scope,
//       from-seq, to-seq, since, until (RFC 3339), type (list), subject,
//       id (list; event ids), max, dry-run=true|false
//   replay-cancel   replay, operator, reason (required; recorded with the
//                   replay)
//   replay-status   replay (required)
//
// The reply is a line `ok` or `error <code name>` (CodeName), then a body
// and a final '\n': for `ok`, one JSON object (the ActionReport or
// ReplayReport, times as RFC 3339); for an error, its message.
//
// Requests are untrusted input: anything malformed (an unknown verb or
// key, a repeated key that is not a list, a number that is not all digits,
// an oversized value, a bad name, id or time) gets an error reply and
// changes nothing.
#ifndef WALBUS_BUS_OPS_ADMIN_SERVER_H_
#define WALBUS_BUS_OPS_ADMIN_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/ops/socket_server.h"
#include "walbus/bus.h"
#include "walbus/status.h"

namespace walbus::internal {

inline constexpr size_t kMaxAdminRequestBytes = 64 << 10;
// Longest value (after unescaping); names and subjects have tighter rules.
inline constexpr size_t kMaxAdminValueBytes = 1024;

enum class AdminVerb : uint8_t {
  kPing,
  kDlqRedrive,
  kDlqSkip,
  kDlqPurge,
  kReplay,
  kReplayCancel,
  kReplayStatus,
  kScheduledCancel,
  kSubscriberRemove,
  kProcessAbandon,
};

// A checked request.
struct AdminRequest {
  AdminVerb verb = AdminVerb::kPing;
  DeadLetterSelection selection;  // dlq-*: all=true leaves every filter empty; subscriber-remove: the name
  OperatorAction action;          // dlq-*, replay-cancel, scheduled-cancel, subscriber-remove, process-abandon
  ReplayRequest replay;           // replay (its own action)
  uint64_t replay_id = 0;         // replay-cancel, replay-status
  EventId event_id;               // scheduled-cancel
  std::string process;            // process-abandon: the process's name
  std::string key;                // process-abandon: the instance's key
};

// Parses and checks untrusted request text (the whole of it: nothing may
// follow the empty line). InvalidArgument naming the first problem.
Status ParseAdminRequest(std::string_view text, AdminRequest* out);

// Runs a checked request through `actions` and renders the reply. The
// caller's thread does the work; each verb is what the OperatorActions
// method it names does, with the same errors.
std::string ExecuteAdminRequest(OperatorActions& actions, const AdminRequest& request);

// The reply to request text: an error reply for a malformed request
// (which changes nothing), else ExecuteAdminRequest. The one entry point of
// the admin server and of the `walbus` tool on a database no process holds.
std::string AnswerAdminRequest(Bus& bus, std::string_view text);

// `<dir>/admin.sock`.
std::string AdminSocketPath(const std::string& dir);

// The server behind Options::admin_socket: a SocketServer on
// AdminSocketPath(dir), mode 0600 from the moment the path exists. One
// request per connection, answered by AnswerAdminRequest on the server's
// thread, one at a time.
class AdminServer {
 public:
  // Listens on AdminSocketPath(dir) for requests to `bus`, which must
  // outlive the server. A socket file already there is replaced only when
  // nobody answers on it (a process that was killed left it).
  // InvalidArgument when the path does not fit in a Unix socket address
  // (sun_path) or something that is not a socket is in the way; Busy when
  // another process answers there; IOError from the system.
  [[nodiscard]] static Status Start(const std::string& dir, Bus* bus, std::unique_ptr<AdminServer>* out);
  // Stops and joins the thread, then removes the socket file (when it is
  // still the one this server made).
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

 private:
  AdminServer() = default;

  std::string path_;
  dev_t dev_ = 0;  // the socket file's identity, so that only it is removed
  ino_t ino_ = 0;
  std::unique_ptr<SocketServer> server_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_OPS_ADMIN_SERVER_H_
