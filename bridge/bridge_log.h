// The bridge's log lines go to the bus's log (Bus::Log: Options::logger,
// or standard error), formatted here with fmt. Its lines are rare (losses,
// gaps, a server's state), so they are formatted before the level check.
#ifndef WALBUS_BRIDGE_BRIDGE_LOG_H_
#define WALBUS_BRIDGE_BRIDGE_LOG_H_

#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "bridge/nats_link.h"
#include "walbus/bus.h"

namespace walbus::jetstream {

template <typename... Args>
void BridgeLog(Bus* bus, LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  bus->Log(level, fmt::format(format, std::forward<Args>(args)...));
}

// Logs the changes of `link`'s connection since the last call, each as
// "walbus <role> <name>: <line>" at its level; costs an atomic load when
// there are none. REQUIRES: on a thread the bus outlives (a handler, the
// inbound consumer's own thread).
inline void LogLinkChanges(Bus* bus, bridge::NatsLink& link, std::string_view role, std::string_view name) {
  for (const bridge::LinkChange& change : link.TakeChanges()) {
    BridgeLog(bus, change.level, "walbus {} {}: {}", role, name, change.line);
  }
}

}  // namespace walbus::jetstream

#endif  // WALBUS_BRIDGE_BRIDGE_LOG_H_
