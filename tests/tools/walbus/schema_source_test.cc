// tools/walbus/schema_source.cc: .fbs source to the binary schema walbus
// registers, as flatc parses it, refusing what the binary form would lose.
#include "tools/walbus/schema_source.h"

#include <gtest/gtest.h>

#include <string>

namespace walbus::internal {
namespace {

TEST(SchemaSourceTest, ParsesAsFlatcDoes) {
  auto schema = ParseSchemaSource(
      "namespace o; struct P { x: int; } union U { T, label: string, P } table T { u: U; n: ulong = 5; }\n"
      "root_type T; file_identifier \"OOTT\";\n",
      {}, "o.fbs");
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  EXPECT_EQ(schema->RootName(), "o.T");
  auto broken = ParseSchemaSource("table T { x: nosuchtype; } root_type T;", {}, "broken.fbs");
  ASSERT_TRUE(broken.status().IsInvalidArgument());
  EXPECT_EQ(broken.status().message().rfind("broken.fbs: ", 0), 0u) << broken.status().ToString();
}

TEST(SchemaSourceTest, AUlongDefaultTheBinarySchemaCannotHoldIsRefused) {
  const std::string fits = "table T { n: ulong = 9223372036854775807; } root_type T;";
  EXPECT_TRUE(ParseSchemaSource(fits, {}, "t.fbs").ok());
  EXPECT_TRUE(ParseSchemaSource("table T { n: ulong = null; } root_type T;", {}, "t.fbs").ok());
  for (const char* value : {"9223372036854775808", "18446744073709551615"}) {
    auto schema = ParseSchemaSource(std::string("table T { n: ulong = ") + value + "; } root_type T;", {}, "t.fbs");
    ASSERT_TRUE(schema.status().IsInvalidArgument()) << value;
    EXPECT_NE(schema.status().message().find(std::string("t.fbs: T.n: the default ") + value +
                                             " is above 9223372036854775807"),
              std::string::npos)
        << schema.status().ToString();
  }
}

}  // namespace
}  // namespace walbus::internal
