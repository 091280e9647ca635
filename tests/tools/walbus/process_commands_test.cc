// tools/walbus/process_commands.cc: `walbus process ls|show`, on a
// stopped database and on one a running bus holds.
#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"
#include "tests/tools/walbus/cli_runner.h"
#include "walbus/bus.h"
#include "walbus/process.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::ManualClock;
using testing::RunCliErrors;
using testing::RunCliOutput;
using testing::TempDir;

constexpr const char* kOpened = "shop.sale-opened.v1";

// A process whose instances hold their subject as text state, or bytes
// that are not text for "sale-binary", and a payment timeout.
std::shared_ptr<Process> Sales() {
  ProcessDefinition d;
  d.name = "sale";
  d.steps = {ProcessStep{.type = kOpened, .starts = true, .correlate = {}}};
  d.handler = [](const Event& e, ProcessContext& p) {
    const std::string state = e.subject == "sale-binary" ? std::string("\0\1\2", 3) : "awaiting " + e.subject;
    if (!p.SetState(state).ok() || !p.SetTimeout("payment", 15min).ok()) return Outcome::RetryAfter(0ms);
    return Outcome::Done();
  };
  auto process = Process::Define(std::move(d));
  EXPECT_TRUE(process.ok());
  return process.ok() ? *process : nullptr;
}

// A bus running the process on `dir`; opens three sales unless `open` is
// false.
std::unique_ptr<Bus> RunSales(const TempDir& dir, bool open = true) {
  Options o = testing::TestOptions(dir);
  o.clock = std::make_shared<ManualClock>();
  auto bus = testing::OpenBus(o);
  if (bus == nullptr || !bus->Subscribe(Sales()->subscriber()).ok() || !bus->Start().ok()) return nullptr;
  if (!open) {
    EXPECT_TRUE(bus->WaitIdle(30s).ok());
    return bus;
  }
  Transaction tx = bus->Begin();
  for (const char* subject : {"sale-2", "sale-1", "sale-binary"}) {
    EXPECT_TRUE(tx.Publish(EventSpec{.type = kOpened, .subject = subject, .data = "{}"}).ok());
  }
  EXPECT_TRUE(tx.Commit().ok());
  EXPECT_TRUE(bus->WaitIdle(30s).ok());
  return bus;
}

TEST(ProcessCommandsTest, ListsAndShowsRunningInstances) {
  TempDir dir;
  auto bus = RunSales(dir);
  ASSERT_NE(bus, nullptr);
  for (bool live : {true, false}) {
    if (!live) {
      ASSERT_TRUE(bus->Close().ok());
    }
    std::string out;
    ASSERT_EQ(RunCliOutput("process ls " + dir.path() + " sale", &out), 0) << out;
    const size_t first = out.find("sale-1"), second = out.find("sale-2");
    ASSERT_NE(first, std::string::npos) << out;
    ASSERT_NE(second, std::string::npos) << out;
    EXPECT_LT(first, second) << "in key order: " << out;
    EXPECT_NE(out.find("payment at "), std::string::npos) << out;
    ASSERT_EQ(RunCliOutput("process ls " + dir.path() + " sale --json", &out), 0);
    EXPECT_EQ(testing::Lines(out).size(), 3u) << out;
    ASSERT_EQ(RunCliOutput("process show " + dir.path() + " sale sale-1", &out), 0);
    EXPECT_NE(out.find("awaiting sale-1"), std::string::npos) << out;
    EXPECT_NE(out.find(kOpened), std::string::npos) << "the last events handled: " << out;
    ASSERT_EQ(RunCliOutput("process show " + dir.path() + " sale sale-binary --json", &out), 0);
    EXPECT_NE(out.find("\"state_hex\":\"000102\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"timeouts\":[{\"name\":\"payment\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"definition_version\":1"), std::string::npos) << out;
    std::string err;
    EXPECT_EQ(RunCliErrors("process show " + dir.path() + " sale sale-9", &err), 1);
    EXPECT_NE(err.find("no instance of sale runs under key sale-9"), std::string::npos) << err;
    ASSERT_EQ(RunCliOutput("process ls " + dir.path() + " other", &out), 0);
    EXPECT_NE(out.find("no instances running"), std::string::npos) << out;
  }
}

// On a stopped database the abandonment is recorded at once and takes
// effect when the application next runs the process.
TEST(ProcessCommandsTest, AbandonIsARecordedActionTheProcessCarriesOut) {
  TempDir dir;
  {
    auto bus = RunSales(dir);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Close().ok());
  }
  const std::string abandon = "process abandon " + dir.path() + " sale sale-1";
  std::string out;
  EXPECT_EQ(RunCliOutput(abandon, &out), 2) << "who and why are required";
  ASSERT_EQ(RunCliOutput(abandon + " --operator ann --reason stuck --dry-run --json", &out), 0) << out;
  EXPECT_NE(out.find("\"dry_run\":true,\"action_id\":0"), std::string::npos) << out;
  ASSERT_EQ(RunCliOutput(abandon + " --operator ann --reason stuck --json", &out), 0) << out;
  EXPECT_NE(out.find("\"action\":\"process-abandon\",\"process\":\"sale\",\"key\":\"sale-1\""), std::string::npos)
      << out;
  std::string err;
  EXPECT_EQ(RunCliErrors("process abandon " + dir.path() + " sale sale-9 --operator ann --reason stuck", &err), 1);
  EXPECT_NE(err.find("no instance of process sale runs under key sale-9"), std::string::npos) << err;
  ASSERT_EQ(RunCliOutput("process show " + dir.path() + " sale sale-1", &out), 0) << "until the process runs";
  {
    auto bus = RunSales(dir, false);  // the application runs the process again
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Close().ok());
  }
  EXPECT_EQ(RunCliErrors("process show " + dir.path() + " sale sale-1", &err), 1);
  ASSERT_EQ(RunCliOutput("process ls " + dir.path() + " sale --json", &out), 0);
  EXPECT_EQ(testing::Lines(out).size(), 2u) << out;
}

}  // namespace
}  // namespace walbus
