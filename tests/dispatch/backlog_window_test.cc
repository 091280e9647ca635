// BacklogWindow (bus/dispatch/backlog_window.cc): what it holds for
// subscribers catching up, and what its bounds drop.
#include "bus/dispatch/backlog_window.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bus/dispatch/tail_cache.h"

namespace walbus::internal {
namespace {

BacklogWindow::Slot MakeEvent(uint64_t seq, size_t data_bytes = 10) {
  auto e = std::make_shared<Event>();
  e->seq = seq;
  e->subject = "s";
  e->data = std::string(data_bytes, 'x');
  return e;
}

std::vector<uint64_t> SeqsRead(const BacklogWindow& window, uint64_t from, size_t limit) {
  std::vector<BacklogWindow::Slot> out;
  const size_t n = window.Read(from, limit, &out);
  EXPECT_EQ(n, out.size());
  std::vector<uint64_t> seqs;
  for (size_t i = 0; i < out.size(); ++i) seqs.push_back(out[i] ? out[i]->seq : 0);
  return seqs;
}

TEST(BacklogWindowTest, ReadsWhatItHoldsFromAnySeqWithin) {
  BacklogWindow window(100, 1 << 20);
  for (uint64_t seq = 10; seq < 15; ++seq) window.Put(seq, MakeEvent(seq));
  EXPECT_EQ(SeqsRead(window, 10, 100), (std::vector<uint64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(SeqsRead(window, 12, 2), (std::vector<uint64_t>{12, 13}));
  EXPECT_TRUE(SeqsRead(window, 9, 10).empty());
  EXPECT_TRUE(SeqsRead(window, 15, 10).empty());
}

TEST(BacklogWindowTest, KeepsASeqWithNothingToDeliverAsANullSlot) {
  BacklogWindow window(100, 1 << 20);
  window.Put(1, MakeEvent(1));
  window.Put(2, nullptr);
  window.Put(3, MakeEvent(3));
  EXPECT_EQ(SeqsRead(window, 1, 10), (std::vector<uint64_t>{1, 0, 3}));
}

TEST(BacklogWindowTest, ASeqThatDoesNotFollowStartsTheWindowOver) {
  BacklogWindow window(100, 1 << 20);
  for (uint64_t seq = 1; seq <= 3; ++seq) window.Put(seq, MakeEvent(seq));
  window.Put(50, MakeEvent(50));
  EXPECT_TRUE(SeqsRead(window, 1, 10).empty());
  EXPECT_EQ(SeqsRead(window, 50, 10), (std::vector<uint64_t>{50}));
  EXPECT_EQ(window.size(), 1u);
  EXPECT_EQ(window.bytes(), TailCache::Footprint(*MakeEvent(50)));
}

TEST(BacklogWindowTest, PastEitherBoundTheOldestGo) {
  BacklogWindow by_count(3, 1 << 20);
  for (uint64_t seq = 1; seq <= 5; ++seq) by_count.Put(seq, MakeEvent(seq));
  EXPECT_EQ(SeqsRead(by_count, 1, 10), std::vector<uint64_t>{});
  EXPECT_EQ(SeqsRead(by_count, 3, 10), (std::vector<uint64_t>{3, 4, 5}));

  const size_t one = TailCache::Footprint(*MakeEvent(1, 1000));
  BacklogWindow by_bytes(100, 2 * one);
  for (uint64_t seq = 1; seq <= 5; ++seq) by_bytes.Put(seq, MakeEvent(seq, 1000));
  EXPECT_EQ(SeqsRead(by_bytes, 4, 10), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(by_bytes.bytes(), 2 * one);
  // One event larger than the bound is still held: the newest stays.
  by_bytes.Put(6, MakeEvent(6, 10000));
  EXPECT_EQ(SeqsRead(by_bytes, 6, 10), (std::vector<uint64_t>{6}));
}

TEST(BacklogWindowTest, DropBelowFreesWhatEverySubscriberFetched) {
  BacklogWindow window(100, 1 << 20);
  for (uint64_t seq = 1; seq <= 5; ++seq) window.Put(seq, MakeEvent(seq));
  window.DropBelow(4);
  EXPECT_EQ(SeqsRead(window, 4, 10), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(window.bytes(), 2 * TailCache::Footprint(*MakeEvent(1)));
  window.DropBelow(100);
  EXPECT_EQ(window.size(), 0u);
  EXPECT_EQ(window.bytes(), 0u);
  // Empty, it starts again wherever the next read begins.
  window.Put(7, MakeEvent(7));
  EXPECT_EQ(SeqsRead(window, 7, 10), (std::vector<uint64_t>{7}));
}

}  // namespace
}  // namespace walbus::internal
