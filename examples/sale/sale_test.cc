// The sale process's tests, on the test kit (walbus/testing.h): virtual
// time, so a 15-minute payment window and a 48-hour shipment window are
// tested in milliseconds. Plain checks, no test framework: each story
// prints one line, and the program exits 0 when every story holds, 1 when
// one does not, 2 when the bus cannot be had.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sale_events.h"  // generated from the .fbs files
#include "sale_process.h"
#include "walbus/adapters/flatbuffers.h"
#include "walbus/testing.h"

namespace {

using namespace std::chrono_literals;
using walbus::testing::TestBus;

constexpr const char* kReleased = "shop.reservation-released.v1";
constexpr const char* kLate = "shop.shipment-late.v1";

std::unique_ptr<TestBus> SaleBus() {
  std::unique_ptr<TestBus> t;
  auto process = walbus::Process::Define(sale::SaleProcess());
  if (!process.ok() || !TestBus::Open(walbus::Options{}, &t).ok() || !sale::RegisterContracts(t->bus()).ok() ||
      !t->Subscribe((*process)->subscriber()).ok()) {
    return nullptr;
  }
  return t;
}

walbus::EventSpec Opened(const char* id, uint64_t amount) {
  flatbuffers::FlatBufferBuilder fbb;
  return walbus::TypedEvent(id, fbb, shop::CreateSaleOpenedDirect(fbb, id, amount));
}

walbus::EventSpec Paid(const char* id) {
  flatbuffers::FlatBufferBuilder fbb;
  return walbus::TypedEvent(id, fbb, shop::CreatePaymentTakenDirect(fbb, id, 0));
}

walbus::EventSpec Shipped(const char* id) {
  flatbuffers::FlatBufferBuilder fbb;
  return walbus::TypedEvent(id, fbb, shop::CreateShipmentConfirmedDirect(fbb, id, "TRK-1"));
}

bool Running(TestBus& t, const char* id) {
  auto instance = walbus::ReadProcessInstance(t.bus(), "sale", id);
  return instance.ok() && instance->has_value();
}

// Paid at 10 minutes, shipped a day later: no compensation, nothing late.
bool PaidAndShippedInTime(TestBus& t) {
  return t.Publish({Opened("sale-1", 4200)}).ok() && t.AdvanceTime(10min).ok() && t.Publish({Paid("sale-1")}).ok() &&
         t.AdvanceTime(24h).ok() && t.Publish({Shipped("sale-1")}).ok() && t.AdvanceTime(72h).ok() &&
         t.Published(kReleased).empty() && t.Published(kLate).empty() && !Running(t, "sale-1");
}

// Not paid in 15 minutes: the reservation is released at 15:00, not
// before, once; a payment after that finds no sale.
bool UnpaidIsReleased(TestBus& t) {
  bool ok =
      t.Publish({Opened("sale-2", 990)}).ok() && t.AdvanceTime(15min - 1ms).ok() && t.Published(kReleased).empty();
  ok = ok && t.AdvanceTime(1ms).ok() && t.Published(kReleased).size() == 1 && !Running(t, "sale-2");
  ok = ok && t.Publish({Paid("sale-2")}).ok() && t.AdvanceTime(1h).ok() && t.Published(kReleased).size() == 1;
  const std::vector<walbus::Event> events = t.Published(kReleased);
  const auto* released = ok ? walbus::PayloadAs<shop::ReservationReleased>(events[0]) : nullptr;
  return released != nullptr && released->sale_id()->str() == "sale-2";
}

// Paid in time, never shipped: late after 48 hours, and never released.
bool PaidButNotShippedIsLate(TestBus& t) {
  bool ok = t.Publish({Opened("sale-3", 100)}).ok() && t.AdvanceTime(10min).ok() && t.Publish({Paid("sale-3")}).ok();
  ok = ok && t.AdvanceTime(48h - 1ms).ok() && t.Published(kLate).empty() && Running(t, "sale-3");
  auto instance = walbus::ReadProcessInstance(t.bus(), "sale", "sale-3");
  ok = ok && instance.ok() && instance->has_value() && (*instance)->timeouts.size() == 1 &&
       (*instance)->timeouts[0].name == "shipment" && (*instance)->state_version == 1;
  return ok && t.AdvanceTime(1ms).ok() && t.Published(kLate).size() == 1 && t.Published(kReleased).empty();
}

// A restart between opening and the payment window's end changes
// nothing: the window closes once.
bool ARestartKeepsTheWindow(TestBus& t) {
  return t.Publish({Opened("sale-4", 100)}).ok() && t.AdvanceTime(5min).ok() && t.Restart().ok() &&
         t.AdvanceTime(10min).ok() && t.Published(kReleased).size() == 1 && t.Restart().ok() &&
         t.AdvanceTime(24h).ok() && t.Published(kReleased).size() == 1;
}

}  // namespace

int main() {
  const std::pair<const char*, std::function<bool(TestBus&)>> stories[] = {
      {"paid and shipped in time", PaidAndShippedInTime},
      {"unpaid, the reservation is released", UnpaidIsReleased},
      {"paid but not shipped, reported late", PaidButNotShippedIsLate},
      {"a restart keeps the payment window", ARestartKeepsTheWindow},
  };
  bool all = true;
  for (const auto& [name, story] : stories) {
    std::unique_ptr<TestBus> t = SaleBus();
    if (t == nullptr) return 2;
    const bool held = story(*t) && t->Failures().empty();
    std::printf("%-40s %s\n", name, held ? "ok" : "FAILED");
    all = all && held;
  }
  return all ? 0 : 1;
}
