#include "bus/telemetry/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdio>

namespace walbus::internal {
namespace {

// The log of buses given no logger: standard error, as an application's
// standard output is its own. One for the process, made on first use and
// not registered with spdlog (an application's registry stays its own).
std::shared_ptr<spdlog::logger> StandardErrorLogger() {
  static const std::shared_ptr<spdlog::logger> logger =
      std::make_shared<spdlog::logger>("walbus", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  return logger;
}

}  // namespace

BusLog::BusLog(std::shared_ptr<spdlog::logger> logger, bool hash_subjects)
    : logger_(logger != nullptr ? std::move(logger) : StandardErrorLogger()), hash_subjects_(hash_subjects) {}

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
                          std::string_view error) const {
  if (!logger_->should_log(level)) return;
  logger_->log(level,
               "walbus event outcome={} subscriber={} event_id={} type={} subject={} seq={} attempt={} "
               "correlation_id={} duration_ms={:.3f}{}{}{}",
               outcome, subscriber, event.id.ToString(), event.type, Subject(event.subject), event.seq, attempt,
               event.correlation_id ? event.correlation_id->ToString() : "-", duration_seconds * 1000.0,
               error.empty() ? "" : " error=\"", error, error.empty() ? "" : "\"");
}

}  // namespace walbus::internal
