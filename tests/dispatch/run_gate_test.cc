// bus/dispatch/run_gate.cc: the gate that lets one handler run go alone
// (crash-loop protection). The runner side of it is in handler_runner_test
// (SuspectsRunAloneAfterACrash...).
#include "bus/dispatch/run_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;
using Kind = RunGate::Pass::Kind;

TEST(RunGateTest, SharedPassesOverlapAndAnAlonePassOverlapsNothing) {
  RunGate gate;
  std::atomic<int> shared_inside{0};
  std::atomic<int> alone_inside{0};
  std::atomic<int> most_shared_at_once{0};
  std::atomic<int> overlaps{0};
  constexpr int kThreads = 6;
  constexpr int kPassesEach = 3000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPassesEach; ++i) {
        // One pass in 16 goes alone.
        if ((i + t) % 16 == 0) {
          RunGate::Pass pass(&gate, Kind::kAlone);
          if (alone_inside.fetch_add(1) != 0 || shared_inside.load() != 0) overlaps.fetch_add(1);
          std::this_thread::yield();
          if (shared_inside.load() != 0) overlaps.fetch_add(1);
          alone_inside.fetch_sub(1);
        } else {
          RunGate::Pass pass(&gate, Kind::kShared);
          const int now = shared_inside.fetch_add(1) + 1;
          int most = most_shared_at_once.load();
          while (now > most && !most_shared_at_once.compare_exchange_weak(most, now)) {
          }
          if (alone_inside.load() != 0) overlaps.fetch_add(1);
          std::this_thread::yield();
          shared_inside.fetch_sub(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "an alone pass was held beside another pass";
  EXPECT_GT(most_shared_at_once.load(), 1) << "shared passes never overlapped: the gate serialized everything";
}

TEST(RunGateTest, AWaitingAlonePassKeepsNewSharedPassesOut) {
  RunGate gate;
  std::atomic<int> order{0};
  int alone_entered_at = -1;
  std::atomic<int> late_shared_entered_at{-1};
  auto first = std::make_unique<RunGate::Pass>(&gate, Kind::kShared);
  std::thread alone([&] {
    RunGate::Pass pass(&gate, Kind::kAlone);
    alone_entered_at = order.fetch_add(1);
  });
  // Shared is held: the alone pass can only be waiting.
  while (!gate.alone_for_testing()) std::this_thread::yield();
  std::thread late_shared([&] {
    RunGate::Pass pass(&gate, Kind::kShared);
    late_shared_entered_at.store(order.fetch_add(1));
  });
  // The late shared pass would get in beside the first one if the waiting
  // alone pass did not keep it out: it sleeps in the gate instead.
  while (gate.shared_sleeping_for_testing() == 0 && late_shared_entered_at.load() == -1) std::this_thread::yield();
  EXPECT_EQ(late_shared_entered_at.load(), -1) << "a shared pass got in ahead of a waiting alone pass";
  first.reset();
  alone.join();
  late_shared.join();
  EXPECT_EQ(alone_entered_at, 0);
  EXPECT_EQ(late_shared_entered_at.load(), 1);
}

}  // namespace
}  // namespace walbus::internal
