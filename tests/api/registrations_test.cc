// Subscriber registrations through the public API (bus/api/
// registrations.cc): where a new subscriber starts, against a real
// RocksDB. Removals are operator actions (operator_actions_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "storage/db.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::OpenBus;
using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

void Publish(Bus& bus, int n) { testing::PublishEach(bus, kType, n); }

// A subscriber that records the seqs it handled.
struct Recorder {
  SubscriberOptions Options(std::string name, StartPosition start = {}) {
    SubscriberOptions s;
    s.name = std::move(name);
    s.start = start;
    s.handler = [this](const Event& e, HandlerContext&) {
      std::lock_guard<std::mutex> lock(mu);
      seqs.push_back(e.seq);
      return Outcome::Done();
    };
    return s;
  }
  // In seq order: events of different subjects may complete in any.
  std::vector<uint64_t> Seqs() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<uint64_t> sorted = seqs;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
  std::mutex mu;
  std::vector<uint64_t> seqs;
};

TEST(RegistrationsTest, AStartPositionChoosesTheFirstEventDelivered) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.retain_events = 1000;  // keep the history for the later starts
  auto bus = OpenBus(o);
  Publish(*bus, 5);
  Recorder now, oldest, at3;
  ASSERT_TRUE(bus->Subscribe(now.Options("now")).ok());
  ASSERT_TRUE(bus->Subscribe(oldest.Options("oldest", StartPosition::OldestRetained())).ok());
  ASSERT_TRUE(bus->Subscribe(at3.Options("at3", StartPosition::AtSeq(3))).ok());
  // Outside what the outbox holds: seq 0, and beyond the next one.
  Recorder refused;
  EXPECT_TRUE(bus->Subscribe(refused.Options("zero", StartPosition::AtSeq(0))).IsInvalidArgument());
  Status beyond = bus->Subscribe(refused.Options("beyond", StartPosition::AtSeq(7)));
  EXPECT_TRUE(beyond.IsInvalidArgument());
  EXPECT_NE(beyond.message().find("seq 1 to 6"), std::string::npos) << beyond.message();
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, 1);
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(now.Seqs(), (std::vector<uint64_t>{6}));
  EXPECT_EQ(oldest.Seqs(), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(at3.Seqs(), (std::vector<uint64_t>{3, 4, 5, 6}));
  ASSERT_TRUE(bus->Close().ok());

  // A known subscriber resumes after its checkpoint, whatever its start.
  auto again = OpenBus(o);
  Recorder resumed;
  ASSERT_TRUE(again->Subscribe(resumed.Options("now", StartPosition::OldestRetained())).ok());
  ASSERT_TRUE(again->Start().ok());
  Publish(*again, 1);
  ASSERT_TRUE(again->WaitIdle(10s).ok());
  EXPECT_EQ(resumed.Seqs(), (std::vector<uint64_t>{7}));
}

TEST(RegistrationsTest, OldestRetainedStartsAtTheTrimmedFloor) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.retain_events = 3;
  o.trim_every_events = 1;
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, 10);
    ASSERT_TRUE(bus->Close().ok());  // trims to the newest 3
  }
  ASSERT_EQ(testing::OutboxSize(*testing::OpenStoppedDatabase(dir.path())), 3u);
  auto bus = OpenBus(o);
  Recorder oldest, trimmed;
  Status gone = bus->Subscribe(trimmed.Options("trimmed", StartPosition::AtSeq(2)));
  EXPECT_TRUE(gone.IsInvalidArgument());
  EXPECT_NE(gone.message().find("seq 8 to 11"), std::string::npos) << gone.message();
  ASSERT_TRUE(bus->Subscribe(oldest.Options("oldest", StartPosition::OldestRetained())).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(oldest.Seqs(), (std::vector<uint64_t>{8, 9, 10}));
}

}  // namespace
}  // namespace walbus
