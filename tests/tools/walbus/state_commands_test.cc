// walbus get and walbus scan, run as a child process against a database a
// bus in this process holds open, and against the same database stopped.
#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"
#include "tests/tools/walbus/cli_runner.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using testing::RunCli;
using testing::RunCliErrors;
using testing::RunCliOutput;
using testing::TempDir;

void Fill(Bus& bus) {
  Transaction tx = bus.Begin();
  for (int i = 1; i <= 5; ++i)
    ASSERT_TRUE(tx.Put("orders", "sku-" + std::to_string(i), "stock " + std::to_string(i)).ok());
  ASSERT_TRUE(tx.Put("orders", std::string("bin\0\xff", 5), std::string("\x01\x02", 2)).ok());
  ASSERT_TRUE(tx.Put("orders", "counter", "7").ok());
  ASSERT_TRUE(tx.ExpectVersion("orders", "counter", 0).ok());
  ASSERT_TRUE(tx.Commit().ok());
}

// The same checks on a live database and on the stopped one.
void CheckReads(const std::string& dir) {
  std::string out;
  ASSERT_EQ(RunCliOutput("scan " + dir + " orders --prefix sku-", &out), 0);
  EXPECT_EQ(out, "sku-1\tstock 1\nsku-2\tstock 2\nsku-3\tstock 3\nsku-4\tstock 4\nsku-5\tstock 5\n");
  ASSERT_EQ(RunCliOutput("scan " + dir + " orders --start sku-2 --end sku-4 --reverse", &out), 0);
  EXPECT_EQ(out, "sku-3\tstock 3\nsku-2\tstock 2\n");
  ASSERT_EQ(RunCliOutput("scan " + dir + " orders --limit 2", &out), 0);
  EXPECT_EQ(out, "0x62696e00ff\t0x0102\ncounter\t7\n") << "binary bytes print as hex";
  std::string err;
  ASSERT_EQ(RunCliErrors("scan " + dir + " orders --limit 2", &err), 0);
  EXPECT_NE(err.find("--after counter"), std::string::npos) << err;
  ASSERT_EQ(RunCliOutput("scan " + dir + " orders --limit 2 --after counter", &out), 0);
  EXPECT_EQ(out, "sku-1\tstock 1\nsku-2\tstock 2\n");
  ASSERT_EQ(RunCliOutput("scan " + dir + " orders --limit 0 --hex --prefix 636f --keys-hex", &out), 0);
  EXPECT_EQ(out, "0x636f756e746572\t0x37\n");
  ASSERT_EQ(RunCliOutput("scan " + dir + " orders --json --limit 1", &out), 0);
  EXPECT_EQ(
      out,
      "{\"rows\":[\n{\"key_hex\":\"62696e00ff\",\"value_hex\":\"0102\"}],\n\"resume_after_hex\":\"62696e00ff\"}\n");
  ASSERT_EQ(RunCliOutput("scan " + dir + " orders --json --prefix sku-5", &out), 0);
  EXPECT_EQ(out, "{\"rows\":[\n{\"key\":\"sku-5\",\"value\":\"stock 5\"}]}\n");

  ASSERT_EQ(RunCliOutput("get " + dir + " orders sku-3", &out), 0);
  EXPECT_EQ(out, "stock 3\n");
  ASSERT_EQ(RunCliOutput("get " + dir + " orders counter --json", &out), 0);
  EXPECT_EQ(out, "{\"key\":\"counter\",\"value\":\"7\",\"version\":1}\n");
  ASSERT_EQ(RunCliOutput("get " + dir + " orders 62696e00ff --keys-hex", &out), 0);
  EXPECT_EQ(out, "0x0102\n");
  EXPECT_EQ(RunCli("get " + dir + " orders nope"), 1) << "an absent key";
  ASSERT_EQ(RunCliErrors("get " + dir + " nope k", &err), 2);
  EXPECT_NE(err.find("it has: orders, effects"), std::string::npos) << err;
  ASSERT_EQ(RunCliErrors("get " + dir + " orders zz --keys-hex", &err), 2);
  EXPECT_NE(err.find("not hex"), std::string::npos) << err;
  EXPECT_EQ(RunCli("scan " + dir + " orders --limit -1"), 2);
}

TEST(StateCommandsTest, ReadLiveAndStoppedDatabases) {
  TempDir dir;
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    Fill(*bus);
    SCOPED_TRACE("live");
    CheckReads(dir.path());
    // A commit made while the tool runs shows in the next run.
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("orders", "sku-6", "stock 6").ok());
    ASSERT_TRUE(tx.Commit().ok());
    std::string out;
    ASSERT_EQ(RunCliOutput("get " + dir.path() + " orders sku-6", &out), 0);
    EXPECT_EQ(out, "stock 6\n");
    Transaction undo = bus->Begin();
    ASSERT_TRUE(undo.Delete("orders", "sku-6").ok());
    ASSERT_TRUE(undo.Commit().ok());
  }
  SCOPED_TRACE("stopped");
  CheckReads(dir.path());
}

}  // namespace
}  // namespace walbus
