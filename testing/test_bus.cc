#include <stdlib.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "bus/util/mutex.h"
#include "walbus/testing.h"

namespace walbus::testing {
namespace {

// The kit's own subscriber: it records what enters the outbox.
constexpr char kRecorder[] = "walbus.testing.outbox";

// A fresh directory under $TMPDIR (else /tmp); empty when none was made.
std::string MakeRoot() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/walbus-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

std::string FailureText(const Outcome& out) {
  switch (out.kind()) {
    case Outcome::Kind::kRetry: return "retry after " + std::to_string(out.delay().count()) + " ms";
    case Outcome::Kind::kReject:
    case Outcome::Kind::kWait: return out.reason();
    case Outcome::Kind::kDone: break;
  }
  return {};
}

}  // namespace

// What a subscriber subscribed through the kit is, and what to inject.
struct Injection {
  std::set<uint32_t> attempts;
  Outcome instead = Outcome::Done();
};

struct TestBus::State {
  Options options;
  std::string root;
  std::shared_ptr<ManualClock> clock;
  std::unique_ptr<Bus> bus;
  bool started = false;
  std::vector<SubscriberOptions> subscribed;  // as given, in the order subscribed
  internal::Mutex mu;                         // what handlers record or read
  std::map<std::string, Injection> injections GUARDED_BY(mu);
  std::map<uint64_t, Event> published GUARDED_BY(mu);  // by seq
  std::vector<HandlerRun> runs GUARDED_BY(mu);

  Status OpenBus() {
    if (Status s = Bus::Open(options, &bus); !s.ok()) return s;
    SubscriberOptions recorder;
    recorder.name = kRecorder;
    recorder.start = StartPosition::OldestRetained();
    recorder.handler = [this](const Event& e, HandlerContext&) {
      internal::MutexLock lock(&mu);
      published.emplace(e.seq, e);
      return Outcome::Done();
    };
    if (Status s = bus->Subscribe(std::move(recorder)); !s.ok()) return s;
    for (const SubscriberOptions& sub : subscribed) {
      if (Status s = bus->Subscribe(Watched(sub)); !s.ok()) return s;
    }
    return started ? bus->Start() : Status::OK();
  }

  // `sub` with its handler watched.
  SubscriberOptions Watched(const SubscriberOptions& sub) {
    SubscriberOptions watched = sub;
    watched.handler = [this, name = sub.name, inner = sub.handler](const Event& e, HandlerContext& ctx) {
      return Run(name, inner, e, ctx);
    };
    return watched;
  }

  Outcome Run(const std::string& name, const Handler& inner, const Event& e, HandlerContext& ctx) {
    HandlerRun run;
    run.subscriber = name;
    run.event = e;
    run.attempt = ctx.Attempt();
    std::optional<Outcome> injected;
    {
      internal::MutexLock lock(&mu);
      auto it = injections.find(name);
      if (it != injections.end() && it->second.attempts.count(run.attempt) != 0) injected = it->second.instead;
    }
    if (injected) {
      run.injected = true;
      run.outcome = injected->kind();
      run.error = "injected failure";
      Record(std::move(run));
      return *injected;
    }
    try {
      Outcome out = inner(e, ctx);
      run.outcome = out.kind();
      run.error = FailureText(out);
      if (out.kind() == Outcome::Kind::kDone && !ctx.status().ok()) {
        // The bus retries it, as the handler had asked.
        run.outcome = Outcome::Kind::kRetry;
        run.error = "a call in the handler failed: " + ctx.status().ToString();
      }
      Record(std::move(run));
      return out;
    } catch (const std::exception& ex) {
      run.threw = true;
      run.error = ex.what();
      Record(std::move(run));
      throw;
    } catch (...) {
      run.threw = true;
      run.error = "an exception that is not a std::exception";
      Record(std::move(run));
      throw;
    }
  }

  void Record(HandlerRun run) {
    internal::MutexLock lock(&mu);
    runs.push_back(std::move(run));
  }

  Status Close() {
    if (bus == nullptr) return Status::OK();
    Status s = bus->Close();
    bus.reset();
    return s;
  }
};

TestBus::TestBus(std::unique_ptr<State> state) : state_(std::move(state)) {}

TestBus::~TestBus() {
  state_->Close().IgnoreError();
  std::error_code ec;
  std::filesystem::remove_all(state_->root, ec);
}

Status TestBus::Open(Options options, std::unique_ptr<TestBus>* out) {
  out->reset();
  auto state = std::make_unique<State>();
  state->root = MakeRoot();
  if (state->root.empty()) return Status::IOError("TestBus: no temporary directory could be made");
  std::unique_ptr<TestBus> made(new TestBus(std::move(state)));
  State& s = *made->state_;
  s.clock = std::make_shared<ManualClock>();
  s.options = std::move(options);
  s.options.dir = s.root + "/bus";
  s.options.create_if_missing = true;
  s.options.clock = s.clock;
  if (Status opened = s.OpenBus(); !opened.ok()) return opened;  // the destructor removes the directory
  *out = std::move(made);
  return Status::OK();
}

Bus& TestBus::bus() { return *state_->bus; }
ManualClock& TestBus::clock() { return *state_->clock; }
const std::string& TestBus::dir() const { return state_->options.dir; }

Status TestBus::Subscribe(SubscriberOptions subscriber) {
  if (subscriber.name == kRecorder) return Status::InvalidArgument(std::string(kRecorder) + " is the kit's own");
  if (Status s = state_->bus->Subscribe(state_->Watched(subscriber)); !s.ok()) return s;
  state_->subscribed.push_back(std::move(subscriber));
  return Status::OK();
}

void TestBus::FailAttempts(const std::string& subscriber, std::vector<uint32_t> attempts, Outcome instead) {
  internal::MutexLock lock(&state_->mu);
  state_->injections[subscriber] = Injection{{attempts.begin(), attempts.end()}, std::move(instead)};
}

Result<Receipt> TestBus::Publish(const std::vector<EventSpec>& events) {
  Transaction tx = state_->bus->Begin();
  for (const EventSpec& e : events) {
    if (Result<EventId> id = tx.Publish(e); !id.ok()) return id.status();
  }
  return tx.Commit();
}

Status TestBus::RunUntilIdle() {
  if (!state_->started) {
    if (Status s = state_->bus->Start(); !s.ok()) return s;
    state_->started = true;
  }
  return state_->bus->WaitCaughtUp(kStepTimeout);
}

Status TestBus::AdvanceTime(std::chrono::milliseconds d) {
  if (d.count() < 0) return Status::InvalidArgument("TestBus::AdvanceTime: time moves forward only");
  // What is due now runs at this moment, before time passes. Then time
  // moves to each moment the bus has work for (a timer, a retry) on the
  // way, so that what one step causes within `d` runs within it too.
  if (Status s = RunUntilIdle(); !s.ok()) return s;
  ManualClock& clock = *state_->clock;
  const auto target = clock.Now() + d;
  for (auto next = clock.NextAwaited(); next && *next < target; next = clock.NextAwaited()) {
    const auto step = std::chrono::ceil<std::chrono::milliseconds>(*next - clock.Now());
    clock.Advance(std::max(step, std::chrono::milliseconds(1)));  // something due now has run: move on
    if (Status s = RunUntilIdle(); !s.ok()) return s;
  }
  clock.Advance(std::chrono::duration_cast<std::chrono::milliseconds>(target - clock.Now()));
  return RunUntilIdle();
}

Status TestBus::Restart() {
  if (Status s = state_->Close(); !s.ok()) return s;
  return state_->OpenBus();
}

std::vector<Event> TestBus::Published(std::string_view type) const {
  internal::MutexLock lock(&state_->mu);
  std::vector<Event> out;
  for (const auto& [seq, e] : state_->published) {
    if (type.empty() || e.type == type) out.push_back(e);
  }
  return out;
}

std::vector<HandlerRun> TestBus::Runs(std::string_view subscriber) const {
  internal::MutexLock lock(&state_->mu);
  std::vector<HandlerRun> out;
  for (const HandlerRun& r : state_->runs) {
    if (subscriber.empty() || r.subscriber == subscriber) out.push_back(r);
  }
  return out;
}

std::vector<HandlerRun> TestBus::Failures(std::string_view subscriber) const {
  std::vector<HandlerRun> out = Runs(subscriber);
  out.erase(std::remove_if(out.begin(), out.end(), [](const HandlerRun& r) { return !r.failed(); }), out.end());
  return out;
}

Result<std::vector<Event>> TestBus::DeadLettered(const std::string& subscriber) {
  std::vector<Event> out;
  for (const Event& e : Published()) {
    Result<std::vector<DeliveryState>> states = state_->bus->EventStatus(e.id);
    if (!states.ok()) return states.status();
    for (const DeliveryState& d : *states) {
      if (d.subscriber == subscriber && d.state == Delivery::kDeadLettered) out.push_back(e);
    }
  }
  return out;
}

}  // namespace walbus::testing
