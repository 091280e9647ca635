// tools/walbus/scheduled_commands.cc: `walbus scheduled ls|show|cancel`,
// on a stopped database and on one a running bus holds.
#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"
#include "tests/tools/walbus/cli_runner.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::ManualClock;
using testing::RunCliErrors;
using testing::RunCliOutput;
using testing::TempDir;

EventId Schedule(Bus& bus, const std::string& subject, std::chrono::milliseconds after) {
  Transaction tx = bus.Begin();
  EventSpec spec;
  spec.type = "shop.reservation-expired.v1";
  spec.subject = subject;
  spec.deliver_after = after;
  auto id = tx.Publish(spec);
  EXPECT_TRUE(id.ok());
  EXPECT_TRUE(tx.Commit().ok());
  return id.ok() ? *id : EventId{};
}

TEST(ScheduledCommandsTest, ListsAndShowsWhatWaitsInDueOrder) {
  TempDir dir;
  EventId later, sooner;
  {
    Options o = testing::TestOptions(dir);
    o.clock = std::make_shared<ManualClock>();
    auto bus = testing::OpenBus(o);
    ASSERT_NE(bus, nullptr);
    later = Schedule(*bus, "reservation-later", 2h);
    sooner = Schedule(*bus, "reservation-sooner", 1h);
    ASSERT_TRUE(bus->Close().ok());
  }
  std::string out;
  ASSERT_EQ(RunCliOutput("scheduled ls " + dir.path(), &out), 0) << out;
  const size_t first = out.find(sooner.ToString()), second = out.find(later.ToString());
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_LT(first, second) << "in due order: " << out;
  ASSERT_EQ(RunCliOutput("scheduled ls " + dir.path() + " --json", &out), 0);
  EXPECT_EQ(testing::Lines(out).size(), 2u);
  EXPECT_NE(out.find("\"state\":\"pending\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"subject\":\"reservation-sooner\""), std::string::npos) << out;
  ASSERT_EQ(RunCliOutput("scheduled show " + dir.path() + " --id " + later.ToString(), &out), 0);
  EXPECT_NE(out.find("pending"), std::string::npos) << out;
  EXPECT_NE(out.find("shop.reservation-expired.v1"), std::string::npos) << out;
  std::string err;
  EXPECT_EQ(RunCliErrors("scheduled show " + dir.path() + " --id " + EventId::Generate().ToString(), &err), 1);
  EXPECT_NE(err.find("was scheduled here"), std::string::npos) << err;
  EXPECT_EQ(RunCliErrors("scheduled show " + dir.path() + " --id not-an-id", &err), 2);
  EXPECT_NE(err.find("not an event id"), std::string::npos) << err;
}

TEST(ScheduledCommandsTest, CancelsThroughTheAdminSocketOfALiveBusAndRecordsIt) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.clock = std::make_shared<ManualClock>();
  o.admin_socket = true;
  auto bus = testing::OpenBus(o);
  ASSERT_NE(bus, nullptr);
  const EventId id = Schedule(*bus, "reservation-1", 1h);
  const std::string cancel = "scheduled cancel " + dir.path() + " --id " + id.ToString();
  std::string out, err;
  EXPECT_EQ(RunCliErrors(cancel, &err), 2) << "an operator action needs who and why";
  ASSERT_EQ(RunCliOutput(cancel + " --operator ann --reason 'customer called' --dry-run --json", &out), 0) << out;
  EXPECT_NE(out.find("\"dry_run\":true"), std::string::npos) << out;
  {
    Transaction tx = bus->Begin();
    EXPECT_EQ(tx.GetScheduled(id)->state, ScheduledStatus::State::kPending);
  }
  ASSERT_EQ(RunCliOutput(cancel + " --operator ann --reason 'customer called' --json", &out), 0) << out;
  EXPECT_NE(out.find("\"action_id\":1"), std::string::npos) << out;
  {
    Transaction tx = bus->Begin();
    EXPECT_EQ(tx.GetScheduled(id)->state, ScheduledStatus::State::kCancelled);
  }
  EXPECT_EQ(RunCliErrors(cancel + " --operator ann --reason again", &err), 1);
  EXPECT_NE(err.find("cancelled already"), std::string::npos) << err;
  ASSERT_TRUE(bus->Close().ok());
  ASSERT_EQ(RunCliOutput("scheduled show " + dir.path() + " --id " + id.ToString(), &out), 0);
  EXPECT_NE(out.find("cancelled"), std::string::npos) << out;
}

TEST(ScheduledCommandsTest, CancelsOnAStoppedDatabase) {
  TempDir dir;
  EventId id;
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    id = Schedule(*bus, "reservation-1", 24h);
    ASSERT_TRUE(bus->Close().ok());
  }
  std::string out;
  ASSERT_EQ(
      RunCliOutput(
          "scheduled cancel " + dir.path() + " --id " + id.ToString() + " --operator ann --reason 'stale hold'", &out),
      0)
      << out;
  ASSERT_EQ(RunCliOutput("scheduled ls " + dir.path(), &out), 0);
  EXPECT_NE(out.find("no scheduled events pending"), std::string::npos) << out;
}

}  // namespace
}  // namespace walbus
