// The admin socket's client, for the `walbus` tool: it writes requests in
// the format bus/ops/admin_server.h describes, sends them to the process
// that holds a database and renders its replies for people.
#ifndef WALBUS_TOOLS_WALBUS_ADMIN_CLIENT_H_
#define WALBUS_TOOLS_WALBUS_ADMIN_CLIENT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "walbus/status.h"

namespace walbus::internal {

// The request text: `verb`, one line per field (values escaped) and the
// empty line. Fields are written as given, in order; nothing is checked.
std::string FormatAdminRequest(std::string_view verb, const std::vector<std::pair<std::string, std::string>>& fields);

// A reply, split: `status` is OK for `ok` (then `body` is its JSON) or
// carries the error's code and message.
struct AdminReply {
  Status status;
  std::string body;
};
// InvalidArgument when `text` is not a reply.
Status ParseAdminReply(std::string_view text, AdminReply* out);

// A reply's JSON body for people: one "label  value" line per field, in
// order (arrays joined with ", "; text made terminal-safe). The body as is
// (made safe) when it is not a flat JSON object.
std::string AdminReplyText(std::string_view json);

// Sends `request` to the process listening on AdminSocketPath(dir) and
// reads its whole reply. *listening is false (and the status OK) when
// nobody listens: no socket file, a stale one, or a directory whose socket
// path cannot be a socket address. Otherwise an error is real: IOError when
// the socket refuses this user, the process times out or closes without a
// reply.
Status CallAdminSocket(const std::string& dir, std::string_view request, std::string* reply, bool* listening);

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_ADMIN_CLIENT_H_
