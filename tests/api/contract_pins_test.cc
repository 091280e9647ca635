// CheckPinnedSchema: a type's schema against the versions a repository
// pinned, pinning new ones only when asked.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"
#include "tools/walbus/schema_source.h"
#include "walbus/contracts.h"

namespace walbus {
namespace {

namespace fs = std::filesystem;

constexpr char kType[] = "orders.order-approved.v1";

std::string Schema(const std::string& fields, const std::string& identifier = "ORDA") {
  const std::string source = "namespace orders; table OrderApproved { " + fields + " }\nroot_type OrderApproved;\n" +
                             (identifier.empty() ? "" : "file_identifier \"" + identifier + "\";\n");
  auto schema = internal::ParseSchemaSource(source, {}, "orders.fbs");
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return schema.ok() ? schema->bytes() : std::string();
}

// Runs `check` with WALBUS_PIN_CONTRACTS=1, as the one run that pins.
Status Pinning(const std::string& schema, const std::string& dir) {
  setenv(kPinContractsVariable, "1", 1);
  Status s = CheckPinnedSchema(kType, schema, dir);
  unsetenv(kPinContractsVariable);
  return s;
}

TEST(ContractPinsTest, PinsOnlyWhenAskedAndThenHolds) {
  testing::TempDir dir;
  const std::string v1 = Schema("order_id: string (required); amount: long;");
  const fs::path pins = fs::path(dir.root()) / kType;

  Status s = CheckPinnedSchema(kType, v1, dir.root());
  ASSERT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("no schema of orders.order-approved.v1 is pinned"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("WALBUS_PIN_CONTRACTS=1"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(pins)) << "nothing is written unless asked";

  ASSERT_TRUE(Pinning(v1, dir.root()).ok());
  EXPECT_TRUE(fs::exists(pins / "v1.bfbs"));
  EXPECT_TRUE(CheckPinnedSchema(kType, v1, dir.root()).ok());

  // A compatible change fails until it is pinned, so the next change is
  // checked against it too.
  const std::string v2 = Schema("order_id: string (required); amount: long; note: string;");
  s = CheckPinnedSchema(kType, v2, dir.root());
  ASSERT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("changed compatibly but is not pinned"), std::string::npos) << s.message();
  ASSERT_TRUE(Pinning(v2, dir.root()).ok());
  EXPECT_TRUE(fs::exists(pins / "v2.bfbs"));
  EXPECT_TRUE(CheckPinnedSchema(kType, v2, dir.root()).ok());
  // Going back to v1 would drop what v2 events carry.
  EXPECT_TRUE(CheckPinnedSchema(kType, v1, dir.root()).IsInvalidArgument());
}

TEST(ContractPinsTest, ABreakingChangeFailsAgainstEveryPinnedVersion) {
  testing::TempDir dir;
  ASSERT_TRUE(Pinning(Schema("order_id: string (required); amount: long;"), dir.root()).ok());
  ASSERT_TRUE(Pinning(Schema("order_id: string (required); amount: long; note: string;"), dir.root()).ok());
  // Dropping `note` passes against v1 alone (it is v1); v2 catches it.
  const Status dropped = CheckPinnedSchema(kType, Schema("order_id: string (required); amount: long;"), dir.root());
  ASSERT_TRUE(dropped.IsInvalidArgument()) << dropped.ToString();
  EXPECT_EQ(dropped.message().find("against v1.bfbs"), std::string::npos) << dropped.message();
  EXPECT_NE(dropped.message().find("against v2.bfbs: orders.OrderApproved.note"), std::string::npos)
      << dropped.message();
  const std::string retyped = Schema("order_id: string (required); amount: int; note: string;");
  for (const bool pinning : {false, true}) {
    const Status s = pinning ? Pinning(retyped, dir.root()) : CheckPinnedSchema(kType, retyped, dir.root());
    ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("against v1.bfbs: orders.OrderApproved.amount changed type from Long to Int"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("against v2.bfbs: orders.OrderApproved.amount changed type"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("new type version"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(fs::exists(fs::path(dir.root()) / kType / "v3.bfbs")) << "a breaking schema is never pinned";
}

TEST(ContractPinsTest, BadInputIsRefused) {
  testing::TempDir dir;
  const std::string good = Schema("order_id: string (required);");
  EXPECT_TRUE(CheckPinnedSchema("Not A Type", good, dir.root()).IsInvalidArgument());
  EXPECT_TRUE(CheckPinnedSchema(kType, "not a schema", dir.root()).IsInvalidArgument());
  // A pinned file that is no schema is reported, not taken as nothing.
  fs::create_directories(fs::path(dir.root()) / kType);
  std::ofstream(fs::path(dir.root()) / kType / "v1.bfbs") << "garbage";
  const Status corrupt = CheckPinnedSchema(kType, good, dir.root());
  ASSERT_TRUE(corrupt.IsCorruption()) << corrupt.ToString();
  EXPECT_NE(corrupt.message().find("v1.bfbs"), std::string::npos) << corrupt.message();
}

}  // namespace
}  // namespace walbus
