// storage/records.cc: the records' encodings. An operator action's record
// is JSON that any JSON reader takes, whatever an operator typed.
#include "storage/records.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace walbus::storage {
namespace {

TEST(RecordsTest, AnActionRecordIsJsonInAFixedOrder) {
  const ActionRecord record{"redrive",
                            "ops \"ann\"",
                            "line one\nline two \\ done",
                            1'765'000'000'000,
                            {{"subscriber", ActionRecord::JsonText("billing")},
                             {"seqs", ActionRecord::JsonNumbers({3, 14})},
                             {"event_ids", ActionRecord::JsonTexts({"a", "b\"c"})},
                             {"checkpoint", "42"}}};
  EXPECT_EQ(EncodeAction(record),
            "{\"action\":\"redrive\",\"operator\":\"ops \\\"ann\\\"\",\"reason\":\"line one\\nline two \\\\ done\","
            "\"time_ms\":1765000000000,\"subscriber\":\"billing\",\"seqs\":[3,14],\"event_ids\":[\"a\",\"b\\\"c\"],"
            "\"checkpoint\":42}");
}

TEST(RecordsTest, AnActionRecordWithNothingAboutItIsStillWhole) {
  EXPECT_EQ(EncodeAction(ActionRecord{"purge", "o", "r", 0, {}}),
            "{\"action\":\"purge\",\"operator\":\"o\",\"reason\":\"r\",\"time_ms\":0}");
  EXPECT_EQ(ActionRecord::JsonNumbers({}), "[]");
  EXPECT_EQ(ActionRecord::JsonTexts({}), "[]");
}

}  // namespace
}  // namespace walbus::storage
