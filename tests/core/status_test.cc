// bus/core/status.cc and walbus/status.h: Status codes, their predicates
// and names, and Result's rule that it holds a value or an error.
#include "walbus/status.h"

#include <gtest/gtest.h>

#include <string>

namespace walbus {
namespace {

TEST(StatusTest, EachCodeHasItsPredicateAndName) {
  struct Case {
    Status status;
    bool (Status::*is)() const;
    const char* name;
  };
  const Case cases[] = {
      {Status::InvalidArgument("m"), &Status::IsInvalidArgument, "InvalidArgument"},
      {Status::NotFound("m"), &Status::IsNotFound, "NotFound"},
      {Status::Conflict("m"), &Status::IsConflict, "Conflict"},
      {Status::Busy("m"), &Status::IsBusy, "Busy"},
      {Status::IOError("m"), &Status::IsIOError, "IOError"},
      {Status::Corruption("m"), &Status::IsCorruption, "Corruption"},
      {Status::Closed("m"), &Status::IsClosed, "Closed"},
      {Status::TimedOut("m"), &Status::IsTimedOut, "TimedOut"},
      {Status::NotSupported("m"), &Status::IsNotSupported, "NotSupported"},
      {Status::ResourceExhausted("m"), &Status::IsResourceExhausted, "ResourceExhausted"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.name;
    EXPECT_STREQ(CodeName(c.status.code()), c.name);
    for (const Case& other : cases) {
      EXPECT_EQ((c.status.*other.is)(), &c == &other) << c.name << " asked whether it is " << other.name;
    }
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
  EXPECT_TRUE(Status::OK().ok());
  for (const Case& c : cases) EXPECT_FALSE((Status::OK().*c.is)()) << c.name;
}

TEST(ResultTest, HoldsAValueOrAnError) {
  Result<int> value(7);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
  EXPECT_TRUE(value.status().ok());
  Result<int> error(Status::NotFound("no such key"));
  EXPECT_FALSE(error.ok());
  EXPECT_TRUE(error.status().IsNotFound());
  EXPECT_EQ(error.status().message(), "no such key");
}

// A Result made from an OK status is a bug in the code that made it: in a
// debug build it asserts; in a release build it is still an error, so
// nobody reads a value that is not there.
TEST(ResultTest, MadeFromAnOkStatusIsNeverAValue) {
#ifdef NDEBUG
  Result<int> r(Status::OK());
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("OK status"), std::string::npos) << r.status().ToString();
#else
  EXPECT_DEATH({ Result<int> r(Status::OK()); }, "status.ok");
#endif
}

}  // namespace
}  // namespace walbus
