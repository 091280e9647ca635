// BusLog: where a bus writes its log, and how it writes one line per event
// of interest: key=value fields (event id, type, subscriber, seq, attempt,
// correlation id, outcome, duration, error), never the payload. Subjects
// can be personal data: with Options::hash_subjects_in_logs they appear as
// a hash.
//
// Lines are formatted with spdlog (fmt) inside the library and handed to
// the application's walbus::Logger (walbus/logger.h) as finished text, so
// no spdlog type crosses the public API.
//
// Threading: thread-safe (spdlog loggers are, and a walbus::Logger must be).
#ifndef WALBUS_BUS_TELEMETRY_LOG_H_
#define WALBUS_BUS_TELEMETRY_LOG_H_

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

#include "walbus/event.h"
#include "walbus/logger.h"

namespace walbus::internal {

class BusLog {
 public:
  // A null logger means standard error (NewStandardErrorLogger()).
  BusLog(std::shared_ptr<Logger> logger, bool hash_subjects);

  // Formats lines and passes them on to the Logger.
  spdlog::logger& logger() const { return *logger_; }
  // One finished line.
  void Log(LogLevel level, std::string_view line) const;

  // The subject as logs show it: itself, or "h:" + 16 hex digits.
  std::string Subject(std::string_view subject) const;

  // One line for one event's outcome at one subscriber, in logfmt: the
  // error (when not empty) is quoted, with backslash, quote and control
  // characters escaped. `held_back` lines like it that a rate limit did not
  // log are noted after every field: "(N similar lines held back)".
  void EventOutcome(spdlog::level::level_enum level, std::string_view outcome, const Event& event,
                    std::string_view subscriber, uint32_t attempt, double duration_seconds, std::string_view error,
                    uint64_t held_back = 0) const;

 private:
  std::shared_ptr<spdlog::logger> logger_;  // its one sink forwards to the Logger
  const bool hash_subjects_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_TELEMETRY_LOG_H_
