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

TEST(WorkerPoolTest, EveryItemRunsOnAWorkerAndIsAnswered) {
  TempDir dir;
  Replies replies;
  RunnerHarness h(dir.path(), [&](std::vector<Message>& r) { replies.Add(r); });
  ASSERT_TRUE(h.opened().ok()) << h.opened().ToString();
  std::atomic<int> wakes{0};
  WorkerPool pool(
      &h.runner(), [&] { ++wakes; }, /*count_unanswered=*/true);
  std::atomic<int> off_worker{0};
  auto sub = h.NewSubscriber([&](const Event&, HandlerContext&) {
    if (!pool.OnWorkerThread()) ++off_worker;
    return Outcome::Done();
  });
  pool.Start(2);
  EXPECT_FALSE(pool.OnWorkerThread());
  std::vector<WorkItem> items = Items(sub.get(), 1, 200);
  pool.Submit(&items);
  EXPECT_TRUE(items.empty()) << "Submit takes the items";
  ASSERT_TRUE(replies.WaitFor(200));
  ASSERT_TRUE(testing::Eventually([&] { return pool.unanswered() == 0; }, 10s));
  EXPECT_EQ(off_worker.load(), 0);
  EXPECT_GE(wakes.load(), 1) << "the last busy worker wakes the dispatcher";
  pool.Stop();
}

TEST(WorkerPoolTest, AWakeIsOwedOnlyWhileWorkIsQueued) {
  TempDir dir;
  Replies replies;
  RunnerHarness h(dir.path(), [&](std::vector<Message>& r) { replies.Add(r); });
  ASSERT_TRUE(h.opened().ok()) << h.opened().ToString();
  std::atomic<int> wakes{0};
  WorkerPool pool(
      &h.runner(), [&] { ++wakes; }, /*count_unanswered=*/false);
  EXPECT_FALSE(pool.OweWakeWhileBusy()) << "nothing queued: the caller wakes the dispatcher";

  // Not started: what is submitted stays queued, so the wake is owed...
  std::atomic<bool> release{false};
  auto sub = h.NewSubscriber([&](const Event&, HandlerContext&) {
    while (!release.load()) std::this_thread::yield();
    return Outcome::Done();
  });
  std::vector<WorkItem> items = Items(sub.get(), 1, 3);
  pool.Submit(&items);
  EXPECT_TRUE(pool.OweWakeWhileBusy());
  // ...and the worker that drains the queue pays it.
  pool.Start(1);
  ASSERT_TRUE(testing::Eventually([&] { return wakes.load() == 1; }, 10s));
  release.store(true);
  ASSERT_TRUE(replies.WaitFor(3));
  EXPECT_EQ(wakes.load(), 1) << "uncounted: no wake when the batch ends";
  pool.Stop();
}

TEST(WorkerPoolTest, StopLetsRunningHandlersFinishAndDropsWhatIsQueued) {
  TempDir dir;
  Replies replies;
  RunnerHarness h(dir.path(), [&](std::vector<Message>& r) { replies.Add(r); });
  ASSERT_TRUE(h.opened().ok()) << h.opened().ToString();
  WorkerPool pool(
      &h.runner(), [] {}, /*count_unanswered=*/false);
  std::atomic<bool> running{false}, release{false};
  auto slow = h.NewSubscriber([&](const Event&, HandlerContext&) {
    running.store(true);
    while (!release.load()) std::this_thread::yield();
    return Outcome::Done();
  });
  pool.Start(1);
  std::vector<WorkItem> first = Items(slow.get(), 1, 1);
  pool.Submit(&first);
  ASSERT_TRUE(testing::Eventually([&] { return running.load(); }, 10s));
  std::vector<WorkItem> queued = Items(slow.get(), 2, 5);
  pool.Submit(&queued);  // behind the running one: never taken
  std::thread stopper([&] { pool.Stop(); });
  // Stopping now, it waits for the running handler.
  ASSERT_TRUE(testing::Eventually([&] { return pool.stopping_for_testing(); }, 10s));
  release.store(true);
  stopper.join();
  EXPECT_EQ(replies.size(), 1u) << "the running one was answered; the queued ones are redelivered on the next open";
  pool.Stop();  // idempotent
}

}  // namespace
}  // namespace walbus
