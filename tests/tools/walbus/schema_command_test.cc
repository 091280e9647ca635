// walbus schema check OLD NEW, run as a child process on schema files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/schema_compat.h"
#include "tests/test_util.h"
#include "tests/tools/walbus/cli_runner.h"
#include "tools/walbus/schema_source.h"

namespace walbus {
namespace {

using testing::RunCli;
using testing::RunCliErrors;
using testing::RunCliOutput;
using testing::TempDir;

constexpr const char* kV1 = R"(
include "money.fbs";
namespace orders;
table OrderApproved { order_id: string (required); amount: Money; }
root_type OrderApproved;
file_identifier "ORDA";
)";

std::string Write(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.root() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(SchemaCommandTest, ChecksSourcesAndBinarySchemas) {
  TempDir dir;
  Write(dir, "money.fbs", "namespace orders;\nstruct Money { units: long; cents: int; }\n");
  const std::string v1 = Write(dir, "v1.fbs", kV1);
  std::string v2_text = kV1;
  v2_text.replace(v2_text.find(" }\nroot_type"), 3, " note: string; }\n");
  const std::string v2 = Write(dir, "v2.fbs", v2_text);
  std::string v3_text = kV1;
  v3_text.replace(v3_text.find("\"ORDA\""), 6, "\"ORDX\"");
  const std::string v3 = Write(dir, "v3.fbs", v3_text);

  std::string out;
  ASSERT_EQ(RunCliOutput("schema check " + v1 + " " + v2, &out), 0) << out;
  EXPECT_NE(out.find("may replace"), std::string::npos) << out;
  ASSERT_EQ(RunCliOutput("schema check " + v1 + " " + v3, &out), 1);
  EXPECT_EQ(out, "the file identifier changed from \"ORDA\" to \"ORDX\"\n");
  std::string err;
  ASSERT_EQ(RunCliErrors("schema check " + v1 + " " + v3, &err), 1);
  EXPECT_NE(err.find("new type version"), std::string::npos) << err;
  ASSERT_EQ(RunCliOutput("schema check " + v2 + " " + v1, &out), 1) << "a field removed";
  EXPECT_NE(out.find("orders.OrderApproved.note (id 2) was removed"), std::string::npos) << out;

  // A binary schema (as flatc --binary --schema writes) checks the same.
  auto binary = internal::ParseSchemaSource(kV1, {dir.root()}, "v1.fbs");
  ASSERT_TRUE(binary.ok()) << binary.status().ToString();
  const std::string v1_binary = Write(dir, "v1.bfbs", binary->bytes());
  ASSERT_EQ(RunCliOutput("schema check " + v1_binary + " " + v2, &out), 0) << out;

  // Bad input: exit 2 and a message naming the file.
  const std::string garbage = Write(dir, "garbage.bfbs", "not a schema");
  ASSERT_EQ(RunCliErrors("schema check " + garbage + " " + v2, &err), 2);
  EXPECT_NE(err.find("garbage.bfbs"), std::string::npos) << err;
  const std::string broken = Write(dir, "broken.fbs", "table T { x: nosuchtype; }");
  ASSERT_EQ(RunCliErrors("schema check " + v1 + " " + broken, &err), 2);
  EXPECT_NE(err.find("broken.fbs"), std::string::npos) << err;
  EXPECT_EQ(RunCli("schema check " + v1 + " " + dir.root() + "/missing.fbs"), 2);
  EXPECT_EQ(RunCli("schema check " + v1), 2) << "NEW is required";
}

// A source that includes one in another folder checks with -I naming it
// (repeatable, looked up in order after the source's own folder), and
// fails without, naming what it could not find.
TEST(SchemaCommandTest, IncludeDirsFindIncludesElsewhere) {
  TempDir dir;
  std::filesystem::create_directories(dir.root() + "/common");
  std::filesystem::create_directories(dir.root() + "/events");
  std::filesystem::create_directories(dir.root() + "/empty");
  Write(dir, "common/money.fbs", "namespace orders;\nstruct Money { units: long; cents: int; }\n");
  const std::string v1 = Write(dir, "events/v1.fbs", kV1);
  std::string v2_text = kV1;
  v2_text.replace(v2_text.find(" }\nroot_type"), 3, " note: string; }\n");
  const std::string v2 = Write(dir, "events/v2.fbs", v2_text);

  std::string err;
  ASSERT_EQ(RunCliErrors("schema check " + v1 + " " + v2, &err), 2) << "money.fbs is not beside them";
  EXPECT_NE(err.find("money.fbs"), std::string::npos) << err;
  std::string out;
  ASSERT_EQ(
      RunCliOutput("schema check -I " + dir.root() + "/empty --include-dir " + dir.root() + "/common " + v1 + " " + v2,
                   &out),
      0)
      << out;
  EXPECT_NE(out.find("may replace"), std::string::npos) << out;
  EXPECT_EQ(RunCli("schema check -I " + dir.root() + "/absent " + v1 + " " + v2), 2) << "a folder that is not there";
}

TEST(SchemaCommandTest, ChecksAgainstADatabaseAndListsItsTypes) {
  TempDir dir;
  Write(dir, "money.fbs", "namespace orders;\nstruct Money { units: long; cents: int; }\n");
  auto v1 = internal::ParseSchemaSource(kV1, {dir.root()}, "v1.fbs");
  ASSERT_TRUE(v1.ok());
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Contracts().RegisterSchema("orders.order-approved.v1", v1->bytes()).ok());
  }
  std::string next_text = kV1;
  next_text.replace(next_text.find(" }\nroot_type"), 3, " note: string; }\n");
  const std::string next = Write(dir, "next.fbs", next_text);
  std::string bad_text = kV1;
  bad_text.replace(bad_text.find("amount: Money;"), 14, "amount: int;");
  const std::string bad = Write(dir, "bad.fbs", bad_text);
  std::string out;
  ASSERT_EQ(RunCliOutput("schema check " + dir.path() + " " + next + " --type orders.order-approved.v1", &out), 0)
      << out;
  ASSERT_EQ(RunCliOutput("schema check " + dir.path() + " " + bad + " --type orders.order-approved.v1", &out), 1);
  EXPECT_EQ(out, "against version 1: orders.OrderApproved.amount changed type from orders.Money to Int\n");
  std::string err;
  ASSERT_EQ(RunCliErrors("schema check " + dir.path() + " " + next, &err), 2);
  EXPECT_NE(err.find("--type"), std::string::npos) << err;
  EXPECT_EQ(RunCli("schema check " + dir.path() + " " + next + " --type orders.other.v1"), 2) << "no such type";

  ASSERT_EQ(RunCliOutput("schema ls " + dir.path() + " --json", &out), 0);
  EXPECT_EQ(out.find("{\"type\":\"orders.order-approved.v1\",\"versions\":1,"), 0u) << out;
  EXPECT_NE(out.find("\"root_table\":\"orders.OrderApproved\""), std::string::npos) << out;
  ASSERT_EQ(RunCliOutput("schema ls " + dir.path(), &out), 0);
  EXPECT_NE(out.find("orders.order-approved.v1"), std::string::npos) << out;
}

// What `schema show` prints between one version's header and the next: the
// source of version `version` (1 is the first).
std::string ShownSource(const std::string& out, int version) {
  const std::string header = "# orders.order-approved.v1 version " + std::to_string(version) + ":";
  size_t at = out.find(header);
  if (at == std::string::npos) return {};
  at = out.find("\n# first registered", at);
  at = out.find('\n', at + 1) + 1;
  const size_t end = out.find("\n# orders.order-approved.v1 version", at);
  return out.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(SchemaCommandTest, ShowsEveryVersionAsSourceThatReadsTheSame) {
  TempDir dir;
  Write(dir, "money.fbs", "namespace orders;\nstruct Money { units: long; cents: int; }\n");
  std::string v2_text = kV1;
  v2_text.replace(v2_text.find(" }\nroot_type"), 3, " note: string; }\n");
  auto v1 = internal::ParseSchemaSource(kV1, {dir.root()}, "v1.fbs");
  auto v2 = internal::ParseSchemaSource(v2_text, {dir.root()}, "v2.fbs");
  ASSERT_TRUE(v1.ok() && v2.ok());
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Contracts().RegisterSchema("orders.order-approved.v1", v1->bytes()).ok());
    ASSERT_TRUE(bus->Contracts().RegisterSchema("orders.order-approved.v1", v2->bytes()).ok());
  }
  std::string out;
  ASSERT_EQ(RunCliOutput("schema show " + dir.path() + " orders.order-approved.v1", &out), 0);
  EXPECT_NE(out.find("# orders.order-approved.v1 version 1: hash " + internal::SchemaHashText(v1->Hash()) +
                     ", root orders.OrderApproved, identifier \"ORDA\""),
            std::string::npos)
      << out;
  // Each version's source, read back, is the schema that was registered:
  // neither may be told from the other by any rule.
  const std::pair<int, const internal::BinarySchema*> versions[] = {{1, &*v1}, {2, &*v2}};
  for (const auto& [version, registered] : versions) {
    const std::string source = ShownSource(out, version);
    auto shown = internal::ParseSchemaSource(source, {}, "shown.fbs");
    ASSERT_TRUE(shown.ok()) << shown.status().ToString() << "\n" << source;
    EXPECT_TRUE(internal::CheckEvolution(*registered, *shown).empty()) << source;
    EXPECT_TRUE(internal::CheckEvolution(*shown, *registered).empty()) << source;
  }
  EXPECT_NE(ShownSource(out, 2).find("note"), std::string::npos);
  EXPECT_EQ(ShownSource(out, 1).find("note"), std::string::npos);

  ASSERT_EQ(RunCliOutput("schema show " + dir.path() + " orders.order-approved.v1 --version 2 --json", &out), 0);
  EXPECT_EQ(out.find("{\"type\":\"orders.order-approved.v1\",\"version\":2,\"hash\":\"" +
                     internal::SchemaHashText(v2->Hash()) +
                     "\",\"root_table\":\"orders.OrderApproved\","
                     "\"file_identifier\":\"ORDA\","),
            0u)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one version, one line: " << out;
  EXPECT_NE(out.find("\"fbs\":\""), std::string::npos) << out;

  std::string err;
  EXPECT_EQ(RunCliErrors("schema show " + dir.path() + " orders.order-approved.v1 --version 3", &err), 2);
  EXPECT_NE(err.find("has 2 schema versions, not 3"), std::string::npos) << err;
  EXPECT_EQ(RunCliErrors("schema show " + dir.path() + " orders.other.v1", &err), 2);
  EXPECT_NE(err.find("no schema of orders.other.v1"), std::string::npos) << err;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SchemaCommandTest, GeneratesBindingsOfBoundSchemasOnly) {
  TempDir dir;
  const std::string bound = Write(dir, "order_approved.fbs", R"(attribute "walbus_event";
namespace orders;
table OrderApproved (walbus_event: "orders.order-approved.v1") { order_id: string (required); }
root_type OrderApproved;
file_identifier "ORDA";
)");
  const std::string header = dir.root() + "/events.h", source = dir.root() + "/events.cc";
  const std::string outputs = " --header " + header + " --source " + source;
  std::string out;
  ASSERT_EQ(RunCliOutput("schema generate " + bound + " --function orders::RegisterEventSchemas" + outputs, &out), 0)
      << out;
  const std::string h = Read(header), cc = Read(source);
  EXPECT_NE(h.find("#include \"order_approved_generated.h\""), std::string::npos) << h;
  EXPECT_NE(h.find("namespace orders {"), std::string::npos) << h;
  EXPECT_NE(h.find("walbus::Status RegisterEventSchemas(walbus::Bus& bus);"), std::string::npos) << h;
  EXPECT_NE(h.find("struct EventContract<::orders::OrderApproved> {\n  static constexpr std::string_view kType = "
                   "\"orders.order-approved.v1\";\n  static constexpr const char* kFileIdentifier = \"ORDA\";"),
            std::string::npos)
      << h;
  EXPECT_NE(cc.find("#include \"events.h\""), std::string::npos) << cc;
  EXPECT_NE(cc.find("return walbus::RegisterContracts<::orders::OrderApproved>(bus);"), std::string::npos) << cc;

  // What cannot be bound is refused, naming the file, and nothing written.
  struct Case {
    std::string name, text, function, expected;
  };
  const std::string table = "namespace orders;\ntable OrderApproved";
  const std::vector<Case> cases = {
      {"unbound.fbs", table + " { id: string; }\nroot_type OrderApproved;\nfile_identifier \"ORDA\";\n", "F",
       "unbound.fbs: root table orders.OrderApproved has no walbus_event attribute"},
      {"badtype.fbs",
       "attribute \"walbus_event\";\n" + table +
           " (walbus_event: \"Not A Type\") { id: string; }\n"
           "root_type OrderApproved;\nfile_identifier \"ORDA\";\n",
       "F", "badtype.fbs: walbus_event of orders.OrderApproved:"},
      {"order_approved.fbs", "", "not a::name", "--function not a::name is no C++ function name"},
  };
  for (const Case& c : cases) {
    const std::string path = c.text.empty() ? bound : Write(dir, c.name, c.text);
    const std::string other = dir.root() + "/other";
    std::string err;
    EXPECT_EQ(RunCliErrors("schema generate " + path + " --function '" + c.function + "' --header " + other +
                               ".h --source " + other + ".cc",
                           &err),
              2)
        << c.name;
    EXPECT_NE(err.find(c.expected), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(other + ".h")) << c.name;
  }
  std::string err;
  EXPECT_EQ(RunCliErrors("schema generate " + bound + " " + bound + " --function F" + outputs, &err), 2);
  EXPECT_NE(err.find("two schemas bind event type orders.order-approved.v1"), std::string::npos) << err;
}

}  // namespace
}  // namespace walbus
