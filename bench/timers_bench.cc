// Group 8, timers: scheduled events (EventSpec::deliver_after).
//
//   publish   the publish group's commit (domain write + event) with the
//             event scheduled an hour ahead, against the same commit
//             published at once, 4 producers, run one after the other.
//   fire      timer_fire_events timers due together (the clock moved past
//             them), no subscriber: how fast they enter the outbox.
//   lateness  a live load of 10k events/s with 1k timers/s falling due
//             among it; per timer, from its due time to its handler.
//   pending   timer_pending_events timers pending far ahead, then a
//             restart and a live load: the process's resident set.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_common.h"

namespace bench {
namespace {

constexpr const char* kTimerType = "bench.item-expired.v1";
constexpr int kPublishProducers = 4;
constexpr uint64_t kSubjects = 1000;
constexpr int kTimersPerCommit = 1000;

// The real clocks, the wall and monotonic ones both moved by Advance: the
// fire run's way of making every timer due at once.
class MovableClock final : public walbus::Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(offset_ms_.load());
  }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now() + std::chrono::milliseconds(offset_ms_.load());
  }
  void Advance(std::chrono::milliseconds d) { offset_ms_ += d.count(); }

 private:
  std::atomic<int64_t> offset_ms_{0};
};

walbus::Status CommitScheduled(walbus::Bus& bus, const std::string& domain_key, const std::string& subject,
                               std::chrono::milliseconds after) {
  walbus::Transaction tx = bus.Begin();
  if (walbus::Status s = tx.Put("domain", domain_key, DomainValue()); !s.ok()) return s;
  walbus::EventSpec spec;
  spec.type = kTimerType;
  spec.subject = subject;
  spec.data = EventData();
  spec.deliver_after = after;
  if (walbus::Status s = tx.Publish(spec).status(); !s.ok()) return s;
  return tx.Commit().status();
}

// Schedules `n` timers `after` from now, kTimersPerCommit per commit.
std::string ScheduleMany(walbus::Bus& bus, uint64_t n, std::chrono::milliseconds after) {
  for (uint64_t done = 0; done < n;) {
    walbus::Transaction tx = bus.Begin();
    for (int i = 0; i < kTimersPerCommit && done < n; ++i, ++done) {
      walbus::EventSpec spec;
      spec.type = kTimerType;
      spec.subject = SubjectOf(done, kSubjects);
      spec.deliver_after = after;
      if (walbus::Status s = tx.Publish(spec).status(); !s.ok()) return ErrorText(s);
    }
    if (walbus::Status s = tx.Commit().status(); !s.ok()) return ErrorText(s);
  }
  return {};
}

void RunPublish(benchmark::State& state, bool scheduled) {
  for (auto _ : state) {
    TempDir dir;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), walbus::Durability::kBuffered), &bus);
    if (Failed(state, ErrorText(s))) return;
    const LoadResult load =
        RunClosedLoop(kPublishProducers, CurrentProfile().publish_seconds, 0, [&](int p, uint64_t n) {
          const std::string subject = SubjectOf(n, kSubjects);
          return ErrorText(scheduled ? CommitScheduled(*bus, DomainKey(p, n), subject, std::chrono::hours(1))
                                     : CommitOne(*bus, DomainKey(p, n), subject, EventData()));
        });
    if (Failed(state, load.error)) return;
    bus->Close().IgnoreError();
    state.SetIterationTime(load.seconds);
    state.counters["events"] = static_cast<double>(load.operations);
    state.counters["events_per_second"] = static_cast<double>(load.operations) / load.seconds;
  }
}

void RunFire(benchmark::State& state) {
  const uint64_t n = CurrentProfile().timer_fire_events;
  for (auto _ : state) {
    TempDir dir;
    auto clock = std::make_shared<MovableClock>();
    walbus::Options options = BusOptions(dir.path(), walbus::Durability::kBuffered);
    options.clock = clock;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(options, &bus);
    if (Failed(state, ErrorText(s))) return;
    if (Failed(state, ScheduleMany(*bus, n, std::chrono::minutes(1)))) return;
    if (Failed(state, ErrorText(bus->Start()))) return;
    const auto started = Clock::now();
    clock->Advance(std::chrono::minutes(2));
    while (bus->Stats().scheduled_pending > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    bus->Close().IgnoreError();
    state.SetIterationTime(seconds);
    state.counters["events"] = static_cast<double>(n);
    state.counters["events_per_second"] = static_cast<double>(n) / seconds;
  }
}

// Unix microseconds of the wall clock.
int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void RunLateness(benchmark::State& state) {
  constexpr double kLiveEps = 10000;
  constexpr double kTimerEps = 1000;
  constexpr auto kAhead = std::chrono::milliseconds(100);
  const double seconds = CurrentProfile().timer_lateness_seconds;
  for (auto _ : state) {
    TempDir dir;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), walbus::Durability::kBuffered), &bus);
    if (Failed(state, ErrorText(s))) return;
    std::mutex mu;
    std::vector<int64_t> lateness_ns;
    walbus::SubscriberOptions sub;
    sub.name = "reactor";
    sub.handler = [&](const walbus::Event& e, walbus::HandlerContext&) {
      if (e.type == kTimerType) {
        const int64_t late_us = WallMicros() - std::stoll(e.data);
        std::lock_guard<std::mutex> lock(mu);
        lateness_ns.push_back(late_us * 1000);
      }
      return walbus::Outcome::Done();
    };
    if (Failed(state, ErrorText(bus->Subscribe(std::move(sub)))) || Failed(state, ErrorText(bus->Start()))) return;
    // One paced sender per stream: event n is due at t0 + n / rate.
    auto paced = [&](double eps, const std::function<walbus::Status(uint64_t)>& send) {
      const auto t0 = Clock::now();
      const auto total = static_cast<uint64_t>(seconds * eps);
      for (uint64_t i = 0; i < total; ++i) {
        std::this_thread::sleep_until(t0 + std::chrono::nanoseconds(static_cast<int64_t>(1e9 * i / eps)));
        if (walbus::Status c = send(i); !c.ok()) return ErrorText(c);
      }
      return std::string();
    };
    std::string live_error, timer_error;
    std::thread live([&] {
      live_error = paced(
          kLiveEps, [&](uint64_t i) { return CommitOne(*bus, DomainKey(0, i), SubjectOf(i, kSubjects), EventData()); });
    });
    timer_error = paced(kTimerEps, [&](uint64_t i) {
      walbus::Transaction tx = bus->Begin();
      walbus::EventSpec spec;
      spec.type = kTimerType;
      spec.subject = SubjectOf(i, kSubjects);
      const auto due = std::chrono::system_clock::now() + kAhead;
      spec.deliver_at = due;
      spec.data = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(due.time_since_epoch()).count());
      if (walbus::Status p = tx.Publish(spec).status(); !p.ok()) return p;
      return tx.Commit().status();
    });
    live.join();
    if (Failed(state, live_error) || Failed(state, timer_error)) return;
    while (bus->Stats().scheduled_pending > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (Failed(state, ErrorText(bus->WaitIdle(std::chrono::minutes(2))))) return;
    bus->Close().IgnoreError();
    const Percentiles p = ComputePercentiles(&lateness_ns);
    state.SetIterationTime(seconds);
    state.counters["timers"] = static_cast<double>(lateness_ns.size());
    state.counters["p50_ms"] = p.p50_us / 1000;
    state.counters["p99_ms"] = p.p99_us / 1000;
    state.counters["max_ms"] = p.max_us / 1000;
  }
}

void RunPending(benchmark::State& state) {
  const uint64_t n = CurrentProfile().timer_pending_events;
  for (auto _ : state) {
    TempDir dir;
    const auto started = Clock::now();
    {
      std::unique_ptr<walbus::Bus> bus;
      walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), walbus::Durability::kBuffered), &bus);
      if (Failed(state, ErrorText(s))) return;
      if (Failed(state, ScheduleMany(*bus, n, std::chrono::hours(24 * 30)))) return;
      if (Failed(state, ErrorText(bus->Close()))) return;
    }
    // After the restart: the resident set with every timer pending, while
    // live events flow.
    RssSampler rss;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), walbus::Durability::kBuffered), &bus);
    if (Failed(state, ErrorText(s))) return;
    walbus::SubscriberOptions sub;
    sub.name = "reactor";
    sub.handler = WriteEffect;
    if (Failed(state, ErrorText(bus->Subscribe(std::move(sub)))) || Failed(state, ErrorText(bus->Start()))) return;
    const LoadResult load = RunClosedLoop(1, 1.0, 0, [&](int p, uint64_t i) {
      return ErrorText(CommitOne(*bus, DomainKey(p, i), SubjectOf(i, kSubjects), EventData()));
    });
    if (Failed(state, load.error) || Failed(state, ErrorText(bus->WaitIdle(std::chrono::minutes(2))))) return;
    const uint64_t pending = bus->Stats().scheduled_pending;
    bus->Close().IgnoreError();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - started).count());
    state.counters["pending"] = static_cast<double>(pending);
    state.counters["rss_peak_mib"] = rss.PeakMiB();
    state.counters["disk_mib"] = MiB(DirBytes(dir.path()));
  }
}

}  // namespace

void RegisterTimerBenchmarks() {
  for (const bool scheduled : {true, false}) {
    RegisterMeasurement(
        BenchName("Timers", {{"measure", "publish"}, {"system", scheduled ? "scheduled" : "immediate"}}),
        [=](benchmark::State& s) { RunPublish(s, scheduled); });
  }
  RegisterMeasurement(BenchName("Timers", {{"measure", "fire"}}), RunFire);
  RegisterMeasurement(BenchName("Timers", {{"measure", "lateness"}}), RunLateness);
  RegisterMeasurement(BenchName("Timers", {{"measure", "pending"}}), RunPending);
}

}  // namespace bench
