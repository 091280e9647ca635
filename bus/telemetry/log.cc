#include "bus/telemetry/log.h"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdio>

#include "bus/util/escape.h"

namespace walbus {

Logger::~Logger() = default;

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: break;
  }
  return "error";
}

namespace {

spdlog::level::level_enum SpdlogLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarning: return spdlog::level::warn;
    case LogLevel::kError: break;
  }
  return spdlog::level::err;
}

LogLevel FromSpdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug: return LogLevel::kDebug;
    case spdlog::level::info: return LogLevel::kInfo;
    case spdlog::level::warn: return LogLevel::kWarning;
    default: return LogLevel::kError;
  }
}

// Standard error, as an application's standard output is its own; the
// spdlog logger is not registered (an application's registry stays its
// own).
class StandardErrorLogger final : public Logger {
 public:
  explicit StandardErrorLogger(LogLevel level)
      : level_(level),
        out_(std::make_shared<spdlog::logger>("walbus", std::make_shared<spdlog::sinks::stderr_color_sink_mt>())) {
    out_->set_level(spdlog::level::trace);  // the bus filters by level()
  }
  LogLevel level() const override { return level_; }
  void Log(LogLevel level, std::string_view line) override { out_->log(SpdlogLevel(level), "{}", line); }

 private:
  const LogLevel level_;
  const std::shared_ptr<spdlog::logger> out_;
};

// Hands each formatted line to a walbus::Logger. No lock of its own: a
// Logger is thread-safe.
class ForwardingSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit ForwardingSink(std::shared_ptr<Logger> to) : to_(std::move(to)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    to_->Log(FromSpdlog(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}

 private:
  const std::shared_ptr<Logger> to_;
};

// The log of buses given no logger: one for the process, made on first use.
const std::shared_ptr<Logger>& DefaultLogger() {
  static const std::shared_ptr<Logger> logger = NewStandardErrorLogger(LogLevel::kInfo);
  return logger;
}

}  // namespace

std::shared_ptr<Logger> NewStandardErrorLogger(LogLevel level) { return std::make_shared<StandardErrorLogger>(level); }

}  // namespace walbus

namespace walbus::internal {
namespace {

std::shared_ptr<spdlog::logger> FormattingLogger(std::shared_ptr<Logger> to) {
  if (to == nullptr) to = DefaultLogger();
  const LogLevel level = to->level();
  auto logger = std::make_shared<spdlog::logger>("walbus", std::make_shared<ForwardingSink>(std::move(to)));
  logger->set_level(SpdlogLevel(level));
  return logger;
}

}  // namespace

BusLog::BusLog(std::shared_ptr<Logger> logger, bool hash_subjects)
    : logger_(FormattingLogger(std::move(logger))), hash_subjects_(hash_subjects) {}

void BusLog::Log(LogLevel level, std::string_view line) const { logger_->log(SpdlogLevel(level), "{}", line); }

std::string BusLog::Subject(std::string_view subject) const {
  if (!hash_subjects_) return std::string(subject);
  uint64_t h = 14695981039346656037ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : subject) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[24];
  std::snprintf(buf, sizeof(buf), "h:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void BusLog::EventOutcome(spdlog::level::level_enum level, std::string_view outcome, const Event& event,
                          std::string_view subscriber, uint32_t attempt, double duration_seconds,
                          std::string_view error, uint64_t held_back) const {
  if (!logger_->should_log(level)) return;
  std::string fields;
  if (!error.empty()) fields = " error=" + internal::LogfmtQuoted(error);
  if (held_back > 0) fields += " (" + std::to_string(held_back) + " similar lines held back)";
  logger_->log(level,
               "walbus event outcome={} subscriber={} event_id={} type={} subject={} seq={} attempt={} "
               "correlation_id={} duration_ms={:.3f}{}",
               outcome, subscriber, event.id.ToString(), event.type, Subject(event.subject), event.seq, attempt,
               event.correlation_id ? event.correlation_id->ToString() : "-", duration_seconds * 1000.0, fields);
}

}  // namespace walbus::internal
