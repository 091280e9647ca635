// Logs (bus/telemetry/log.cc): one line per event of interest, with its fields, and
// never the payload; subjects hashed on request; failures rate-limited.
#include "bus/telemetry/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "walbus/adapters/spdlog.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr const char* kSecret = "card-4111-1111-1111-1111";

// Runs one event that fails once and one poison through a bus logging into
// `out`; returns the log.
std::string RunAndLog(bool hash_subjects) {
  TempDir dir;
  auto logger = std::make_shared<testing::CapturingLogger>(LogLevel::kDebug);
  Options o = testing::TestOptions(dir);
  o.logger = logger;
  o.hash_subjects_in_logs = hash_subjects;
  {
    auto bus = testing::OpenBus(o);
    std::atomic<int> calls{0};
    SubscriberOptions s;
    s.name = "payments";
    s.retry.max_attempts = 2;
    s.retry.base = 1ms;
    s.retry.cap = 1ms;
    s.handler = [&](const Event& e, HandlerContext&) -> Outcome {
      if (e.subject == "alice@example.com" && ++calls == 1) throw std::runtime_error("gateway timeout");
      if (e.subject == "bob@example.com") throw std::runtime_error("card declined");
      return Outcome::Done();
    };
    EXPECT_TRUE(bus->Subscribe(std::move(s)).ok());
    EXPECT_TRUE(bus->Start().ok());
    for (const char* subject : {"alice@example.com", "bob@example.com"}) {
      Transaction tx = bus->Begin();
      EventSpec e;
      e.type = "payments.payment-captured.v1";
      e.subject = subject;
      e.data = kSecret;
      EXPECT_TRUE(tx.Publish(e).ok());
      EXPECT_TRUE(tx.Commit().ok());
    }
    EXPECT_TRUE(bus->WaitIdle(10s).ok());
    EXPECT_FALSE(bus->IngestEnvelope(std::string("junk ") + kSecret, {.source = "import"}).ok());
  }
  return logger->text();
}

TEST(LogTest, EventOutcomesCarryTheirFieldsAndNeverThePayload) {
  const std::string log = RunAndLog(false);
  EXPECT_EQ(log.find(kSecret), std::string::npos) << log;
  EXPECT_NE(log.find("outcome=retry subscriber=payments"), std::string::npos) << log;
  EXPECT_NE(log.find("outcome=handled subscriber=payments"), std::string::npos) << log;
  EXPECT_NE(log.find("outcome=dead-lettered subscriber=payments"), std::string::npos) << log;
  EXPECT_NE(log.find("error=\"exception: card declined\""), std::string::npos) << log;
  EXPECT_NE(log.find("type=payments.payment-captured.v1"), std::string::npos) << log;
  EXPECT_NE(log.find("subject=alice@example.com"), std::string::npos) << log;
  EXPECT_NE(log.find("attempt=2"), std::string::npos) << log;
  EXPECT_NE(log.find("quarantined"), std::string::npos) << log;
}

// One outcome line in logfmt: its key=value fields (a quoted value
// unescaped) and what stands after the last field. Fails the test where a
// quoted value does not end.
struct LogfmtLine {
  std::map<std::string, std::string> fields;
  std::string trailer;
};

LogfmtLine ParseOutcomeLine(std::string_view line) {
  LogfmtLine out;
  size_t i = line.find("outcome=");
  while (i < line.size()) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    const size_t eq = line.find('=', i);
    const size_t space = line.find(' ', i);
    if (eq == std::string_view::npos || (space != std::string_view::npos && space < eq)) break;  // not a field
    std::string key(line.substr(i, eq - i)), value;
    i = eq + 1;
    if (i < line.size() && line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        value += line[i];
      }
      EXPECT_LT(i, line.size()) << "the quoted value of " << key << " does not end: " << line;
      ++i;
    } else {
      const size_t end = std::min(line.find(' ', i), line.size());
      value = std::string(line.substr(i, end - i));
      i = end;
    }
    out.fields[key] = value;
  }
  if (i < line.size()) out.trailer = std::string(line.substr(i));
  return out;
}

// A flood of failures: each line that is logged parses, its error whole
// (quotes and all), and the count of lines held back stands after every
// field, never inside the error's quotes.
TEST(LogTest, LinesHeldBackAreNotedOutsideEveryField) {
  TempDir dir;
  auto logger = std::make_shared<testing::CapturingLogger>(LogLevel::kWarning);
  Options o = testing::TestOptions(dir);
  o.logger = logger;
  const std::string error = R"(card "declined" \ twice)";
  auto bus = testing::OpenBus(o);
  ASSERT_NE(bus, nullptr);
  SubscriberOptions s;
  s.name = "payments";
  s.retry.max_attempts = 1;
  s.handler = [&](const Event&, HandlerContext&) -> Outcome { throw std::runtime_error(error); };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  const auto publish = [&](int first, int count) {
    Transaction tx = bus->Begin();
    for (int i = first; i < first + count; ++i) {
      ASSERT_TRUE(
          tx.Publish(EventSpec{.type = "payments.payment-captured.v1", .subject = "p-" + std::to_string(i)}).ok());
    }
    ASSERT_TRUE(tx.Commit().ok());
  };
  publish(0, 100);  // at most 10 lines a second: most are held back
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  std::this_thread::sleep_for(1100ms);  // the limiter's next second, by its clock
  publish(100, 1);
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  ASSERT_TRUE(bus->Close().ok());

  std::istringstream lines(logger->text());
  int logged = 0, noted = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("outcome=dead-lettered") == std::string::npos) continue;
    ++logged;
    const LogfmtLine parsed = ParseOutcomeLine(line);
    EXPECT_EQ(parsed.fields.at("subscriber"), "payments") << line;
    EXPECT_EQ(parsed.fields.at("error"), "exception: " + error) << line;
    if (parsed.trailer.empty()) continue;
    ++noted;
    EXPECT_TRUE(parsed.trailer.starts_with("(") && parsed.trailer.ends_with(" similar lines held back)")) << line;
  }
  EXPECT_GE(logged, 2);
  EXPECT_LT(logged, 101) << "the flood was limited";
  EXPECT_GE(noted, 1) << logger->text();
}

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Given no logger, a bus logs to standard error: an application's standard
// output is its own (a pipe to another program, a report).
TEST(LogTest, WithoutALoggerTheBusWritesToStandardErrorOnly) {
  TempDir dir;
  const std::string out = dir.root() + "/stdout", err = dir.root() + "/stderr";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
    ::dup2(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 2);
    Options o = testing::TestOptions(dir);
    o.logger = nullptr;
    std::unique_ptr<Bus> bus;
    if (!Bus::Open(o, &bus).ok()) ::_exit(3);
    if (bus->IngestEnvelope("not an envelope", {.source = "test"}).ok()) ::_exit(4);  // quarantined: a warning
    (void)bus->Close();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(FileText(out), "");
  EXPECT_NE(FileText(err).find("quarantined"), std::string::npos) << FileText(err);
}

// Each line reaches the application's Logger once, finished, at its level;
// lines below the logger's level are not passed at all.
TEST(LogTest, LinesReachTheApplicationsLoggerAtTheirLevel) {
  const std::string log = RunAndLog(false);
  EXPECT_NE(log.find("debug walbus event outcome=handled subscriber=payments"), std::string::npos) << log;
  EXPECT_NE(log.find("warning walbus event outcome=dead-lettered subscriber=payments"), std::string::npos) << log;
  TempDir dir;
  auto quiet = std::make_shared<testing::CapturingLogger>(LogLevel::kError);
  Options o = testing::TestOptions(dir);
  o.logger = quiet;
  auto bus = testing::OpenBus(o);
  ASSERT_NE(bus, nullptr);
  EXPECT_FALSE(bus->IngestEnvelope("not an envelope", {.source = "test"}).ok());  // quarantined: a warning
  bus->Log(LogLevel::kInfo, "an info line");
  bus->Log(LogLevel::kError, "an error line");
  EXPECT_EQ(quiet->text(), "error an error line\n");
}

// walbus/adapters/spdlog.h: an spdlog logger behind the Logger interface,
// its level and the walbus level mapped both ways.
TEST(LogTest, AnSpdlogLoggerCanBeTheBussLogger) {
  std::ostringstream out;
  auto spd = std::make_shared<spdlog::logger>("app", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spd->set_pattern("%l|%v");
  spd->set_level(spdlog::level::warn);
  auto adapter = std::make_shared<SpdlogLogger>(spd);
  EXPECT_EQ(adapter->level(), LogLevel::kWarning);
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.logger = adapter;
  {
    auto bus = testing::OpenBus(o);
    ASSERT_NE(bus, nullptr);
    EXPECT_FALSE(bus->IngestEnvelope("not an envelope", {.source = "test"}).ok());
    bus->Log(LogLevel::kInfo, "below the level");
    bus->Log(LogLevel::kError, "an error line");
  }
  spd->flush();
  const std::string text = out.str();
  EXPECT_NE(text.find("warning|walbus: quarantined"), std::string::npos) << text;
  EXPECT_NE(text.find("error|an error line"), std::string::npos) << text;
  EXPECT_EQ(text.find("below the level"), std::string::npos) << text;
}

TEST(LogTest, SubjectsCanBeHashed) {
  const std::string log = RunAndLog(true);
  EXPECT_EQ(log.find("alice@example.com"), std::string::npos) << log;
  EXPECT_EQ(log.find("bob@example.com"), std::string::npos) << log;
  internal::BusLog hashed(nullptr, true);
  const std::string h = hashed.Subject("alice@example.com");
  EXPECT_EQ(h.rfind("h:", 0), 0u);
  EXPECT_EQ(h, hashed.Subject("alice@example.com")) << "stable, so one subject's lines can be followed";
  EXPECT_NE(log.find("subject=" + h), std::string::npos) << log;
}

}  // namespace
}  // namespace walbus
