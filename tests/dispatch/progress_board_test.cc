// bus/dispatch/progress_board.cc: waits end when the watermarks they
// wait on reach their seq (not before, and only the named subscribers'),
// when a settled moment is posted after they began, on Cancel, and on
// their timeout; none misses a post made while it waits.
#include "bus/dispatch/progress_board.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace walbus {
namespace {

using namespace std::chrono_literals;
using internal::ProgressBoard;
using internal::Subscriber;

std::shared_ptr<Subscriber> NewSubscriber(const std::string& name, uint32_t id) {
  SubscriberOptions options;
  options.name = name;
  options.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  return std::make_shared<Subscriber>(std::move(options), id, internal::DurableCounters{});
}

// Moves `sub`'s watermark to `seq` and posts it, as the dispatcher does.
void Advance(ProgressBoard& board, Subscriber& sub, uint64_t seq) {
  sub.watermark.store(seq, std::memory_order_release);
  board.PostProgress();
}

TEST(ProgressBoardTest, AWaitEndsWhenEveryWatermarkItWaitsOnReachesTheSeq) {
  ProgressBoard board;
  auto fast = NewSubscriber("fast", 1);
  auto slow = NewSubscriber("slow", 2);
  board.Add(fast);
  board.Add(slow);
  std::future<Status> all = std::async(std::launch::async, [&] { return board.WaitFor(5, 30s); });
  std::future<Status> only_fast = std::async(std::launch::async, [&] { return board.WaitFor(5, 30s, {"fast"}); });
  Advance(board, *fast, 5);
  EXPECT_TRUE(only_fast.get().ok());
  EXPECT_EQ(all.wait_for(50ms), std::future_status::timeout) << "slow is behind";
  Advance(board, *slow, 4);
  EXPECT_EQ(all.wait_for(50ms), std::future_status::timeout) << "one short";
  Advance(board, *slow, 5);
  EXPECT_TRUE(all.get().ok());
  EXPECT_TRUE(board.WaitFor(3, 0ms).ok()) << "already reached";
}

TEST(ProgressBoardTest, AWaitTimesOutAndCancelEndsEveryWaitClosed) {
  ProgressBoard board;
  board.Add(NewSubscriber("behind", 1));
  EXPECT_TRUE(board.WaitFor(1, 20ms).IsTimedOut());
  std::future<Status> waiting = std::async(std::launch::async, [&] { return board.WaitFor(1, 30s); });
  std::future<Status> settling = std::async(std::launch::async, [&] { return board.WaitSettled(30s, [] {}); });
  board.Cancel();
  EXPECT_TRUE(waiting.get().IsClosed());
  EXPECT_TRUE(settling.get().IsClosed());
  EXPECT_TRUE(board.WaitFor(1, 30s).IsClosed()) << "and every wait to come";
}

TEST(ProgressBoardTest, ASettledMomentCountsOnlyWhenPostedAfterTheWaitBeganAndNothingWaits) {
  ProgressBoard board;
  board.PostSettled([] { return false; });  // before any wait: counts for none
  std::atomic<int> looks{0};
  std::promise<void> looked;
  std::future<Status> settling = std::async(std::launch::async, [&] {
    return board.WaitSettled(30s, [&] {
      if (looks.fetch_add(1) == 0) looked.set_value();
    });
  });
  looked.get_future().wait();
  board.PostSettled([] { return true; });  // a message waits: not settled
  EXPECT_EQ(settling.wait_for(50ms), std::future_status::timeout);
  board.PostSettled([] { return false; });
  EXPECT_TRUE(settling.get().ok());
  EXPECT_EQ(looks.load(), 1) << "the dispatcher is asked to look once per wait";
  EXPECT_TRUE(board.WaitSettled(20ms, [] {}).IsTimedOut()) << "an earlier moment does not count";
}

}  // namespace
}  // namespace walbus
