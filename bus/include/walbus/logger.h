// walbus/logger.h: where a bus writes its log. An application passes a
// Logger in Options::logger to send walbus's lines to its own log; without
// one a bus writes to standard error, never to the application's standard
// output. walbus/adapters/spdlog.h adapts an spdlog logger.
//
// Threading: a Logger is called from any of the bus's threads, and from
// the bridge's, at once: Log must be thread-safe. It must not call into
// the bus, and should not block for long (a handler's thread may be the
// one logging).
#ifndef WALBUS_LOGGER_H_
#define WALBUS_LOGGER_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "walbus/export.h"

namespace walbus {

// How much a line matters, from least to most.
enum class LogLevel : uint8_t {
  // Every handled and stale-skipped event, commit conflicts.
  kDebug,
  // What an operator did (a replay recorded), the bus's life.
  kInfo,
  // Retries, dead letters, quarantined input, settings worth a look.
  kWarning,
  // Failures of the bus or the bridge themselves (a write, a lost message).
  kError,
};

// The level's name: "debug", "info", "warning", "error".
WALBUS_EXPORT const char* LogLevelName(LogLevel level);

// The application's end of the bus's log.
class WALBUS_EXPORT Logger {
 public:
  // Destroyed by the last bus (or bridge) that holds it.
  virtual ~Logger();

  // Lines below this level are neither formatted nor passed to Log. Read
  // once, when a bus opens.
  virtual LogLevel level() const { return LogLevel::kInfo; }

  // One line, without its line end, at `level` (never below level()).
  virtual void Log(LogLevel level, std::string_view line) = 0;
};

// A logger that writes "[<time>] [walbus] [<level>] <line>" lines to
// standard error (in color on a terminal), from `level` up.
WALBUS_EXPORT std::shared_ptr<Logger> NewStandardErrorLogger(LogLevel level = LogLevel::kInfo);

}  // namespace walbus

#endif  // WALBUS_LOGGER_H_
