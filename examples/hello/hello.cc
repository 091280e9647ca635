// hello: one transaction publishes an event, one handler reacts to it with a
// write that commits exactly once.   hello [DIR]   (default ./hello-bus)
#include <cstdio>
#include <memory>

#include "walbus/bus.h"

static int Fail(const walbus::Status& s) {
  std::fprintf(stderr, "hello: %s\n", s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  walbus::Options opt;
  opt.dir = argc > 1 ? argv[1] : "hello-bus";
  opt.column_families = {"greetings"};
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = walbus::Bus::Open(opt, &bus); !s.ok()) return Fail(s);

  walbus::SubscriberOptions greeter;
  greeter.name = "greeter";
  greeter.types = {"hello.name-given.v1"};
  greeter.handler = [](const walbus::Event& e, walbus::HandlerContext& ctx) {
    // Commits with the record that "greeter" handled this event: once.
    if (!ctx.Put("greetings", e.subject, "hello, " + e.data).ok())
      return walbus::Outcome::RetryAfter(std::chrono::milliseconds(50));
    return walbus::Outcome::Done();
  };
  if (walbus::Status s = bus->Subscribe(std::move(greeter)); !s.ok()) return Fail(s);
  if (walbus::Status s = bus->Start(); !s.ok()) return Fail(s);

  walbus::Transaction tx = bus->Begin();
  walbus::EventSpec given{.type = "hello.name-given.v1", .subject = "world", .data = "world"};
  if (walbus::Status s = tx.Publish(given).status(); !s.ok()) return Fail(s);
  walbus::Result<walbus::Receipt> receipt = tx.Commit();
  if (!receipt.ok()) return Fail(receipt.status());
  if (walbus::Status s = bus->WaitIdle(std::chrono::seconds(10)); !s.ok()) return Fail(s);

  walbus::Result<std::optional<std::string>> greeting = bus->Begin().Get("greetings", "world");
  if (!greeting.ok()) return Fail(greeting.status());
  std::printf("event %llu handled: %s\n", static_cast<unsigned long long>(receipt->first_seq),
              greeting->value_or("(missing)").c_str());
  if (walbus::Status s = bus->Close(); !s.ok()) return Fail(s);
  return greeting->has_value() ? 0 : 1;
}
