// The bridge's log lines go to the bus's log (Bus::Log: Options::logger,
// or standard error), formatted here with fmt. Its lines are rare (losses,
// gaps, a server's state), so they are formatted before the level check.
#ifndef WALBUS_BRIDGE_BRIDGE_LOG_H_
#define WALBUS_BRIDGE_BRIDGE_LOG_H_

#include <fmt/format.h>

#include <utility>

#include "walbus/bus.h"

namespace walbus::jetstream {

template <typename... Args>
void BridgeLog(Bus* bus, LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  bus->Log(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace walbus::jetstream

#endif  // WALBUS_BRIDGE_BRIDGE_LOG_H_
