#include "bus/inspect.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;
using walbus::testing::TempDir;

TEST(InspectTest, ReportsALiveDatabaseHeldByAnotherBus) {
  TempDir dir;
  Options o;
  o.dir = dir.path();
  o.durability = Durability::kBuffered;
  std::unique_ptr<Bus> bus;
  ASSERT_TRUE(Bus::Open(o, &bus).ok());
  SubscriberOptions s;
  s.name = "slow";  // registered, not started: the backlog grows
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  for (int i = 0; i < 25; ++i) {
    Transaction tx = bus->Begin();
    EventSpec e;
    e.type = "orders.order-approved.v1";
    e.subject = "o" + std::to_string(i);
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  std::this_thread::sleep_for(5ms);
  DatabaseReport report;
  Status st = InspectDatabase(dir.path(), &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.last_seq, 25u);
  EXPECT_EQ(report.outbox_backlog, 25u);
  ASSERT_TRUE(report.oldest_backlog_age_ms.has_value());
  EXPECT_GE(*report.oldest_backlog_age_ms, 5);
  ASSERT_EQ(report.subscribers.size(), 1u);
  EXPECT_EQ(report.subscribers[0].name, "slow");
  EXPECT_EQ(report.subscribers[0].lag_events, 25u);
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"last_seq\":25"), std::string::npos) << json;
  EXPECT_NE(json.find("\"lag_events\":25"), std::string::npos) << json;
}

int RunCli(const std::string& args) {
  int rc = std::system((std::string(WALBUS_CLI) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(InspectTest, CliExitCodes) {
  TempDir dir;
  EXPECT_EQ(RunCli("stats " + dir.root() + "/missing"), 2);
  {
    std::ofstream f(dir.root() + "/file");
    f << "x";
  }
  EXPECT_EQ(RunCli("stats " + dir.root()), 2) << "a directory that is not a walbus database";
  EXPECT_EQ(RunCli("frobnicate"), 2);
  Options o;
  o.dir = dir.path();
  {
    std::unique_ptr<Bus> bus;
    ASSERT_TRUE(Bus::Open(o, &bus).ok());
  }
  EXPECT_EQ(RunCli("stats " + dir.path()), 0);
  EXPECT_EQ(RunCli("stats --json " + dir.path()), 0);
}

}  // namespace
}  // namespace walbus::internal
