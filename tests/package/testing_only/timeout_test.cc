// A test as an application writes one with the installed kit: a reminder
// due an hour after an order, checked in moments. Exit 0 when it holds.
#include <chrono>
#include <cstdio>
#include <memory>

#include "walbus/testing.h"

int main() {
  using namespace std::chrono_literals;
  std::unique_ptr<walbus::testing::TestBus> t;
  if (!walbus::testing::TestBus::Open(walbus::Options{}, &t).ok()) return 2;
  walbus::SubscriberOptions orders;
  orders.name = "orders";
  orders.types = {"shop.order-placed.v1"};
  orders.handler = [](const walbus::Event& e, walbus::HandlerContext& ctx) {
    walbus::EventSpec remind;
    remind.type = "shop.payment-reminder.v1";
    remind.subject = e.subject;
    remind.deliver_after = 1h;
    return ctx.Publish(remind).ok() ? walbus::Outcome::Done() : walbus::Outcome::RetryAfter(0ms);
  };
  if (!t->Subscribe(orders).ok()) return 2;
  walbus::EventSpec placed;
  placed.type = "shop.order-placed.v1";
  placed.subject = "o-1";
  if (!t->Publish({placed}).ok()) return 2;
  const bool before = t->AdvanceTime(59min).ok() && t->Published("shop.payment-reminder.v1").empty();
  const bool after = t->AdvanceTime(1min).ok() && t->Published("shop.payment-reminder.v1").size() == 1;
  std::printf("timeout_test: %s\n", before && after ? "passed" : "FAILED");
  return before && after ? 0 : 1;
}
