#include "bus/core/schema_registry.h"

#include <gtest/gtest.h>

namespace walbus::internal {
namespace {

Event OrderV1(std::string data) {
  Event e;
  e.type = "orders.order-approved.v1";
  e.subject = "order-1";
  e.data = std::move(data);
  return e;
}

TEST(SchemaRegistryTest, SplitsTypesIntoBaseAndVersion) {
  auto tv = SplitType("orders.order-approved.v12");
  ASSERT_TRUE(tv.has_value());
  EXPECT_EQ(tv->base, "orders.order-approved");
  EXPECT_EQ(tv->version, 12u);
  EXPECT_FALSE(SplitType("orders.order-approved").has_value());
  EXPECT_FALSE(SplitType("orders.vx").has_value());
}

TEST(SchemaRegistryTest, FollowsAChainOfUpcasters) {
  SchemaRegistry r;
  ASSERT_TRUE(
      r.AddUpcaster("orders.order-approved.v1", "orders.order-approved.v2", [](const Event& e) -> Result<std::string> {
         return e.data + "+v2";
       }).ok());
  ASSERT_TRUE(
      r.AddUpcaster("orders.order-approved.v2", "orders.order-approved.v3", [](const Event& e) -> Result<std::string> {
         return e.data + "+v3";
       }).ok());
  Event out;
  auto res = r.Resolve(OrderV1("a"), {"orders.order-approved.v3"}, &out);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(*res, SchemaRegistry::Resolution::kUpcast);
  EXPECT_EQ(out.type, "orders.order-approved.v3");
  EXPECT_EQ(out.data, "a+v2+v3");
  EXPECT_EQ(out.subject, "order-1");
  EXPECT_EQ(*r.Resolve(OrderV1("a"), {"orders.order-approved.v1"}, &out), SchemaRegistry::Resolution::kAsIs);
  EXPECT_EQ(*r.Resolve(OrderV1("a"), {}, &out), SchemaRegistry::Resolution::kAsIs);
  EXPECT_EQ(*r.Resolve(OrderV1("a"), {"orders.order-approved.v4"}, &out), SchemaRegistry::Resolution::kNoTranslator);
  EXPECT_EQ(*r.Resolve(OrderV1("a"), {"billing.invoice-raised.v1"}, &out), SchemaRegistry::Resolution::kNotWanted);
}

TEST(SchemaRegistryTest, RefusesUpcastersThatAreNotForward) {
  SchemaRegistry r;
  auto id = [](const Event& e) -> Result<std::string> { return e.data; };
  EXPECT_TRUE(r.AddUpcaster("orders.order-approved.v2", "orders.order-approved.v1", id).IsInvalidArgument());
  EXPECT_TRUE(r.AddUpcaster("orders.order-approved.v1", "billing.order-approved.v2", id).IsInvalidArgument());
  EXPECT_TRUE(r.AddUpcaster("orders.order-approved.v1", "orders.order-approved.v2", nullptr).IsInvalidArgument());
}

TEST(SchemaRegistryTest, UpcasterErrorsAndVerifiersAreReported) {
  SchemaRegistry r;
  ASSERT_TRUE(
      r.AddUpcaster("orders.order-approved.v1", "orders.order-approved.v2", [](const Event&) -> Result<std::string> {
         return Status::InvalidArgument("no total");
       }).ok());
  Event out;
  auto res = r.Resolve(OrderV1("a"), {"orders.order-approved.v2"}, &out);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("no total"), std::string::npos);
  ASSERT_TRUE(r.AddVerifier("orders.order-approved.v1", [](std::string_view d) {
                 return d.starts_with("{") ? Status::OK() : Status::InvalidArgument("not JSON");
               }).ok());
  EXPECT_TRUE(r.Verify("orders.order-approved.v1", "{}").ok());
  EXPECT_TRUE(r.Verify("orders.order-approved.v1", "x").IsInvalidArgument());
  EXPECT_TRUE(r.Verify("orders.other.v1", "x").ok()) << "no verifier: accepted";
}

}  // namespace
}  // namespace walbus::internal
