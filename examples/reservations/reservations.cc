// reservations: a long-running process with a timeout (docs/time.md).
//
//   reservations [DIR]   (default ./reservations-bus; removed first)
//
// A shop holds stock for a reservation until it is confirmed, and no
// longer than a hold time. Placing a reservation takes the stock, records
// the reservation and schedules its expiry, in one commit. A confirmation
// cancels the expiry in the commit that confirms; an expiry that fires
// first releases the stock, and a confirmation after it is refused. A
// reservation the customer released leaves its expiry to fire, and the
// expiry's handler recognises it and ignores it.
//
// Exits 0 when every reservation ended as the story says and the stock
// adds up.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "walbus/bus.h"

namespace {

using namespace std::chrono_literals;

constexpr const char* kPlaced = "shop.reservation-placed.v1";
constexpr const char* kConfirmed = "shop.reservation-confirmed.v1";
constexpr const char* kReleased = "shop.reservation-released.v1";
constexpr const char* kExpired = "shop.reservation-expired.v1";
constexpr auto kHold = 1500ms;
constexpr int kStock = 10;

walbus::Outcome Again() { return walbus::Outcome::RetryAfter(10ms); }

// Adds `delta` to the stock; concurrent reservations assert its version,
// so none is lost (a conflict runs the handler again).
bool MoveStock(walbus::HandlerContext& ctx, int delta) {
  auto stock = ctx.GetWithVersion("shop", "stock");
  if (!stock.ok()) return false;
  const int on_hand = std::stoi(stock->value.value_or(std::to_string(kStock)));
  return ctx.ExpectVersion("shop", "stock", stock->version).ok() &&
         ctx.Put("shop", "stock", std::to_string(on_hand + delta)).ok();
}

// The reservation's state: "held <timer id>", "confirmed", "expired",
// "released"; nullopt when unknown.
std::optional<std::string> StateOf(walbus::HandlerContext& ctx, const std::string& reservation) {
  auto state = ctx.Get("shop", "reservation/" + reservation);
  return state.ok() ? *state : std::nullopt;
}

walbus::Outcome Place(const walbus::Event& e, walbus::HandlerContext& ctx) {
  walbus::EventSpec expiry{.type = kExpired, .subject = e.subject};
  expiry.deliver_after = kHold;
  auto timer = ctx.Publish(expiry);
  if (!timer.ok() || !MoveStock(ctx, -1)) return Again();
  if (!ctx.Put("shop", "reservation/" + e.subject, "held " + timer->ToString()).ok()) return Again();
  return walbus::Outcome::Done();
}

walbus::Outcome Confirm(const walbus::Event& e, walbus::HandlerContext& ctx) {
  const auto state = StateOf(ctx, e.subject);
  if (!state || !state->starts_with("held ")) {
    std::printf("%s: confirmation refused, the reservation is %s\n", e.subject.c_str(),
                state ? state->c_str() : "unknown");
    return walbus::Outcome::Done();
  }
  const auto timer = walbus::EventId::Parse(state->substr(5));
  auto scheduled = ctx.GetScheduled(*timer);
  if (!scheduled.ok()) return Again();
  if (scheduled->state == walbus::ScheduledStatus::State::kPending) {
    // Fails the commit (and runs this again) should the expiry fire first.
    if (!ctx.CancelScheduled(*timer).ok()) return Again();
  } else {
    // Fired: the expiry is on its way behind this event; it wins.
    std::printf("%s: confirmation refused, the hold ran out\n", e.subject.c_str());
    return walbus::Outcome::Done();
  }
  if (!ctx.Put("shop", "reservation/" + e.subject, "confirmed").ok()) return Again();
  std::printf("%s: confirmed, its expiry cancelled\n", e.subject.c_str());
  return walbus::Outcome::Done();
}

// The customer gave up, or the hold ran out: the stock goes back.
walbus::Outcome Release(const walbus::Event& e, walbus::HandlerContext& ctx, const char* outcome) {
  const auto state = StateOf(ctx, e.subject);
  if (!state || !state->starts_with("held ")) {
    std::printf("%s: %s ignored, the reservation is %s already\n", e.subject.c_str(), e.type.c_str(),
                state ? state->c_str() : "unknown");
    return walbus::Outcome::Done();
  }
  // No line printed here: a concurrent stock update fails this commit and
  // runs the handler again, so only the final state tells what happened.
  if (!MoveStock(ctx, +1) || !ctx.Put("shop", "reservation/" + e.subject, outcome).ok()) return Again();
  return walbus::Outcome::Done();
}

walbus::SubscriberOptions Reservations() {
  walbus::SubscriberOptions s;
  s.name = "reservations";
  s.handler = [](const walbus::Event& e, walbus::HandlerContext& ctx) {
    if (e.type == kPlaced) return Place(e, ctx);
    if (e.type == kConfirmed) return Confirm(e, ctx);
    if (e.type == kReleased) return Release(e, ctx, "released");
    if (e.type == kExpired) return Release(e, ctx, "expired");
    return walbus::Outcome::Done();
  };
  return s;
}

walbus::Status Send(walbus::Bus& bus, const char* type, const std::string& reservation) {
  walbus::Transaction tx = bus.Begin();
  if (walbus::Status s = tx.Publish({.type = type, .subject = reservation}).status(); !s.ok()) return s;
  return tx.Commit().status();
}

// Waits until no scheduled event is pending and every event is handled.
walbus::Status WaitForTimers(walbus::Bus& bus) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (bus.Stats().scheduled_pending > 0) {
    if (std::chrono::steady_clock::now() > deadline) return walbus::Status::TimedOut("timers still pending");
    std::this_thread::sleep_for(20ms);
  }
  return bus.WaitIdle(30s);
}

int Fail(const char* what, const walbus::Status& s) {
  std::fprintf(stderr, "reservations: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "reservations-bus";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  walbus::Options options;
  options.dir = dir;
  options.column_families = {"shop"};
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = walbus::Bus::Open(options, &bus); !s.ok()) return Fail("open", s);
  if (walbus::Status s = bus->Subscribe(Reservations()); !s.ok()) return Fail("subscribe", s);
  if (walbus::Status s = bus->Start(); !s.ok()) return Fail("start", s);
  for (const char* r : {"r-1", "r-2", "r-3", "r-4"}) {
    if (walbus::Status s = Send(*bus, kPlaced, r); !s.ok()) return Fail("place", s);
  }
  if (walbus::Status s = bus->WaitIdle(30s); !s.ok()) return Fail("wait", s);
  std::printf("4 reservations held for %lld ms\n", static_cast<long long>(kHold.count()));
  if (walbus::Status s = Send(*bus, kConfirmed, "r-1"); !s.ok()) return Fail("confirm", s);
  if (walbus::Status s = Send(*bus, kReleased, "r-4"); !s.ok()) return Fail("release", s);
  if (walbus::Status s = WaitForTimers(*bus); !s.ok()) return Fail("wait for the expiries", s);
  if (walbus::Status s = Send(*bus, kConfirmed, "r-3"); !s.ok()) return Fail("confirm late", s);
  if (walbus::Status s = bus->WaitIdle(30s); !s.ok()) return Fail("wait", s);

  const std::map<std::string, std::string> expected = {{"reservation/r-1", "confirmed"},
                                                       {"reservation/r-2", "expired"},
                                                       {"reservation/r-3", "expired"},
                                                       {"reservation/r-4", "released"},
                                                       {"stock", std::to_string(kStock - 1)}};
  walbus::ReadView view = bus->Read();
  bool as_told = true;
  for (const auto& [key, want] : expected) {
    auto got = view.Get("shop", key);
    const std::string value = got.ok() ? got->value_or("(none)") : got.status().ToString();
    std::printf("%s = %s\n", key.c_str(), value.c_str());
    as_told &= value == want;
  }
  if (walbus::Status s = bus->Close(); !s.ok()) return Fail("close", s);
  if (!as_told) {
    std::fprintf(stderr, "reservations: the reservations did not end as told\n");
    return 1;
  }
  std::printf("reservations: every reservation ended as told, the stock adds up\n");
  return 0;
}
