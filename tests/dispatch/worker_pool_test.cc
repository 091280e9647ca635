// bus/dispatch/worker_pool.cc: the workers run what is submitted, on their
// own threads, answer every item, keep the owed wake, count what is
// unanswered, and stop without running what is still queued. A real
// handler runner over a real database, without a Bus.
#include "bus/dispatch/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "tests/dispatch/runner_harness.h"
#include "tests/test_util.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using internal::Message;
using internal::WorkerPool;
using internal::WorkItem;
using testing::RunnerHarness;
using testing::TempDir;

// The replies the workers send, from any thread.
class Replies {
 public:
  void Add(std::vector<Message>& replies) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Message& m : replies) seqs_.insert(m.event->seq);
    cv_.notify_all();
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 30s, [&] { return seqs_.size() >= n; });
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return seqs_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<uint64_t> seqs_;
};

std::vector<WorkItem> Items(internal::Subscriber* sub, uint64_t first, size_t n) {
  std::vector<WorkItem> items;
  for (uint64_t seq = first; seq < first + n; ++seq) {
    WorkItem item;
    item.sub = sub;
    item.event = RunnerHarness::MakeEvent(seq, "x");
    items.push_back(std::move(item));
  }
  return items;
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(h_.opened().ok()) << h_.opened().ToString(); }

  // A subscriber whose handler says it runs, then holds its worker until
  // release_ is set.
  std::unique_ptr<internal::Subscriber> Held() {
    return h_.NewSubscriber([this](const Event&, HandlerContext&) {
      running_.store(true);
      while (!release_.load()) std::this_thread::yield();
      return Outcome::Done();
    });
  }

  TempDir dir_;
  Replies replies_;
  RunnerHarness h_{dir_.path(), [this](std::vector<Message>& r) { replies_.Add(r); }};
  std::atomic<int> wakes_{0};
  std::atomic<bool> running_{false};
  std::atomic<bool> release_{false};
};

TEST_F(WorkerPoolTest, EveryItemRunsOnAWorkerAndIsAnswered) {
  WorkerPool pool(
      &h_.runner(), [this] { ++wakes_; }, /*count_unanswered=*/true);
  std::atomic<int> off_worker{0};
  auto sub = h_.NewSubscriber([&](const Event&, HandlerContext&) {
    if (!pool.OnWorkerThread()) ++off_worker;
    return Outcome::Done();
  });
  pool.Start(2);
  EXPECT_FALSE(pool.OnWorkerThread());
  std::vector<WorkItem> items = Items(sub.get(), 1, 200);
  pool.Submit(&items);
  EXPECT_TRUE(items.empty()) << "Submit takes the items";
  ASSERT_TRUE(replies_.WaitFor(200));
  ASSERT_TRUE(testing::Eventually([&] { return pool.unanswered() == 0; }, 10s));
  EXPECT_EQ(off_worker.load(), 0);
  // The last busy worker wakes the dispatcher just after its count
  // reaches 0: the wake is waited for, not read at once.
  EXPECT_TRUE(testing::Eventually([&] { return wakes_.load() >= 1; }, 10s))
      << "the last busy worker wakes the dispatcher";
  pool.Stop();
}

TEST_F(WorkerPoolTest, AWakeIsOwedOnlyWhileWorkIsQueued) {
  WorkerPool pool(
      &h_.runner(), [this] { ++wakes_; }, /*count_unanswered=*/false);
  EXPECT_FALSE(pool.OweWakeWhileBusy()) << "nothing queued: the caller wakes the dispatcher";
  // Not started: what is submitted stays queued, so the wake is owed...
  auto sub = Held();
  std::vector<WorkItem> items = Items(sub.get(), 1, 3);
  pool.Submit(&items);
  EXPECT_TRUE(pool.OweWakeWhileBusy());
  // ...and the worker that drains the queue pays it.
  pool.Start(1);
  ASSERT_TRUE(testing::Eventually([&] { return wakes_.load() == 1; }, 10s));
  release_.store(true);
  ASSERT_TRUE(replies_.WaitFor(3));
  EXPECT_EQ(wakes_.load(), 1) << "uncounted: no wake when the batch ends";
  pool.Stop();
}

TEST_F(WorkerPoolTest, StopLetsRunningHandlersFinishAndDropsWhatIsQueued) {
  WorkerPool pool(
      &h_.runner(), [] {}, /*count_unanswered=*/false);
  auto sub = Held();
  pool.Start(1);
  std::vector<WorkItem> first = Items(sub.get(), 1, 1);
  pool.Submit(&first);
  ASSERT_TRUE(testing::Eventually([&] { return running_.load(); }, 10s));
  std::vector<WorkItem> queued = Items(sub.get(), 2, 5);
  pool.Submit(&queued);  // behind the running one: never taken
  std::thread stopper([&] { pool.Stop(); });
  // Stopping now, it waits for the running handler.
  ASSERT_TRUE(testing::Eventually([&] { return pool.stopping_for_testing(); }, 10s));
  release_.store(true);
  stopper.join();
  EXPECT_EQ(replies_.size(), 1u) << "the running one was answered; the queued ones are redelivered on the next open";
  pool.Stop();  // idempotent
}

}  // namespace
}  // namespace walbus
