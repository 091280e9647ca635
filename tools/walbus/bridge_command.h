// `walbus bridge DIR`: what the NATS JetStream bridge keeps in a database
// (the relays' origins, positions, journals and losses that could not be
// repaired; the inbound consumers' cursors), read from a stopped or a
// running database.
#ifndef WALBUS_TOOLS_WALBUS_BRIDGE_COMMAND_H_
#define WALBUS_TOOLS_WALBUS_BRIDGE_COMMAND_H_

#include <string>

namespace walbus::tools {

// Prints the bridge records of `column_family` in `dir`, as text or one
// JSON object per relay or consumer. Exit status: 0, or 1 on an error.
int RunBridge(const std::string& dir, const std::string& column_family, bool json);

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_WALBUS_BRIDGE_COMMAND_H_
