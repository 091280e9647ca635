// bus/dispatch/tail_cache.cc: the ring of recent events, bounded in events and in
// bytes; what it no longer holds is read from disk.
#include "bus/dispatch/tail_cache.h"

#include <gtest/gtest.h>

namespace walbus::internal {
namespace {

std::shared_ptr<const Event> MakeEvent(uint64_t seq, size_t data_bytes) {
  auto e = std::make_shared<Event>();
  e->seq = seq;
  e->type = "t.x.v1";
  e->subject = "s";
  e->data.assign(data_bytes, 'x');
  return e;
}

std::vector<uint64_t> Cached(const TailCache& cache, uint64_t from, size_t limit) {
  std::vector<std::shared_ptr<const Event>> out;
  cache.Read(from, limit, &out);
  std::vector<uint64_t> seqs;
  for (const auto& e : out) seqs.push_back(e->seq);
  return seqs;
}

TEST(TailCacheTest, KeepsTheNewestEventsUpToItsCapacity) {
  TailCache cache(4, 1 << 20);
  for (uint64_t seq = 1; seq <= 6; ++seq) cache.Append({MakeEvent(seq, 10)});
  EXPECT_EQ(Cached(cache, 3, 10), (std::vector<uint64_t>{3, 4, 5, 6}));
  EXPECT_TRUE(Cached(cache, 2, 10).empty()) << "overwritten: read from disk";
  EXPECT_EQ(Cached(cache, 4, 2), (std::vector<uint64_t>{4, 5}));
}

TEST(TailCacheTest, LargePayloadsEvictTheOldestByBytes) {
  const size_t big = 100 << 10;
  const size_t per_event = TailCache::Footprint(*MakeEvent(1, big));
  TailCache cache(1024, 3 * per_event);
  for (uint64_t seq = 1; seq <= 10; ++seq) cache.Append({MakeEvent(seq, big)});
  EXPECT_EQ(Cached(cache, 8, 10), (std::vector<uint64_t>{8, 9, 10})) << "three fit in the byte bound";
  EXPECT_TRUE(Cached(cache, 7, 10).empty());
  EXPECT_EQ(cache.bytes(), 3 * per_event);
}

TEST(TailCacheTest, SeqsNeverAppendedReadAsMissing) {
  // The bus appends nothing while it has no subscriber: a seq skipped then
  // is read from disk, the ones after it from the cache.
  TailCache cache(16, 1 << 20);
  EXPECT_EQ(cache.bytes(), 0u);
  cache.Append({MakeEvent(5, 10), MakeEvent(6, 10)});
  EXPECT_TRUE(Cached(cache, 3, 10).empty());
  EXPECT_EQ(Cached(cache, 5, 10), (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(cache.bytes(), 2 * TailCache::Footprint(*MakeEvent(5, 10)));
}

TEST(TailCacheTest, TheNewestEventStaysEvenAboveTheBound) {
  TailCache cache(16, 1024);
  cache.Append({MakeEvent(1, 10), MakeEvent(2, 10)});
  cache.Append({MakeEvent(3, 4096)});
  EXPECT_EQ(Cached(cache, 3, 10), (std::vector<uint64_t>{3}));
  EXPECT_TRUE(Cached(cache, 1, 10).empty());
  cache.Append({MakeEvent(4, 10)});
  EXPECT_EQ(Cached(cache, 4, 10), (std::vector<uint64_t>{4})) << "the big one made room";
}

TEST(TailCacheTest, DropBelowFreesWhatEveryReaderPassed) {
  TailCache cache(16, 1 << 20);
  const size_t per_event = TailCache::Footprint(*MakeEvent(1, 10));
  for (uint64_t seq = 1; seq <= 6; ++seq) cache.Append({MakeEvent(seq, 10)});
  std::weak_ptr<const Event> third;
  {
    std::vector<std::shared_ptr<const Event>> out;
    ASSERT_EQ(cache.Read(3, 1, &out), 1u);
    third = out[0];
  }
  cache.DropBelow(4);
  EXPECT_TRUE(third.expired()) << "the cache held the last reference: the memory is freed now";
  EXPECT_TRUE(Cached(cache, 1, 10).empty());
  EXPECT_TRUE(Cached(cache, 3, 10).empty());
  EXPECT_EQ(Cached(cache, 4, 10), (std::vector<uint64_t>{4, 5, 6}));
  EXPECT_EQ(cache.bytes(), 3 * per_event);
  cache.DropBelow(2);
  EXPECT_EQ(Cached(cache, 4, 10), (std::vector<uint64_t>{4, 5, 6})) << "a lower seq drops nothing more";
}

TEST(TailCacheTest, DropBelowFarPastTheNewestEmptiesItInOnePass) {
  TailCache cache(8, 1 << 20);
  for (uint64_t seq = 1; seq <= 5; ++seq) cache.Append({MakeEvent(seq, 10)});
  cache.DropBelow(uint64_t{1} << 62);  // far beyond the ring and the newest seq: one pass over the ring
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_TRUE(Cached(cache, 5, 10).empty());
  cache.Append({MakeEvent((uint64_t{1} << 62) - 1, 10), MakeEvent(uint64_t{1} << 62, 10)});
  EXPECT_TRUE(Cached(cache, (uint64_t{1} << 62) - 1, 10).empty()) << "the readers passed it";
  EXPECT_EQ(Cached(cache, uint64_t{1} << 62, 10), (std::vector<uint64_t>{uint64_t{1} << 62}));
}

TEST(TailCacheTest, AnEventAppendedAfterEveryReaderPassedItIsNotKept) {
  // The dispatcher may read a fresh commit from the outbox and pass it
  // before the commit reaches the cache: caching it then would hold
  // memory that no reader asks for.
  TailCache cache(16, 1 << 20);
  cache.Append({MakeEvent(1, 10)});
  cache.DropBelow(3);
  cache.Append({MakeEvent(2, 10), MakeEvent(3, 10)});
  EXPECT_TRUE(Cached(cache, 2, 10).empty());
  EXPECT_EQ(Cached(cache, 3, 10), (std::vector<uint64_t>{3}));
  EXPECT_EQ(cache.bytes(), TailCache::Footprint(*MakeEvent(3, 10)));
}

}  // namespace
}  // namespace walbus::internal
