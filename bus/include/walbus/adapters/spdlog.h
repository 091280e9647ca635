// walbus/adapters/spdlog.h: an spdlog logger as a walbus::Logger, for an
// application that logs with spdlog:
//
//   opt.logger = std::make_shared<walbus::SpdlogLogger>(spdlog::basic_logger_mt("walbus", "walbus.log"));
//
// Header-only, an adapter: the only kind of walbus header that includes a
// third-party one. The library does not depend on the spdlog an
// application uses.
//
// Threading: as the spdlog logger it wraps (spdlog's _mt loggers are
// thread-safe, which a walbus::Logger must be).
#ifndef WALBUS_ADAPTERS_SPDLOG_H_
#define WALBUS_ADAPTERS_SPDLOG_H_

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>
#include <utility>

#include "walbus/logger.h"

namespace walbus {

// A walbus::Logger that writes to an spdlog logger.
class SpdlogLogger final : public Logger {
 public:
  // REQUIRES: logger is not null.
  explicit SpdlogLogger(std::shared_ptr<spdlog::logger> logger) : logger_(std::move(logger)) {}

  // The wrapped logger's level, as a walbus level (trace counts as debug,
  // off and critical as error).
  LogLevel level() const override {
    switch (logger_->level()) {
      case spdlog::level::trace:
      case spdlog::level::debug: return LogLevel::kDebug;
      case spdlog::level::info: return LogLevel::kInfo;
      case spdlog::level::warn: return LogLevel::kWarning;
      default: return LogLevel::kError;
    }
  }

  // Logs `line` at the matching spdlog level.
  void Log(LogLevel level, std::string_view line) override { logger_->log(SpdlogLevel(level), "{}", line); }

  // The wrapped logger.
  spdlog::logger& logger() const { return *logger_; }

 private:
  static spdlog::level::level_enum SpdlogLevel(LogLevel level) {
    switch (level) {
      case LogLevel::kDebug: return spdlog::level::debug;
      case LogLevel::kInfo: return spdlog::level::info;
      case LogLevel::kWarning: return spdlog::level::warn;
      case LogLevel::kError: break;
    }
    return spdlog::level::err;
  }

  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace walbus

#endif  // WALBUS_ADAPTERS_SPDLOG_H_
