// Group 9, devices: what a small device notices of an idle bus.
//
//   idle   a bus with one subscriber, after a burst of events is handled
//          and its checkpoint and trim are written, left with nothing to
//          do for idle_seconds: the wake-ups of all its threads
//          (dispatcher, workers, RocksDB's), per second. A fixed-rate poll
//          anywhere shows as tens per second; the goal is at most one.
#include <memory>
#include <thread>

#include "bench/bench_common.h"
#include "tools/process_stats.h"

namespace bench {
namespace {

constexpr uint64_t kBurstEvents = 1000;
constexpr uint64_t kSubjects = 100;

void RunIdle(benchmark::State& state) {
  const double idle_seconds = CurrentProfile().idle_seconds;
  for (auto _ : state) {
    TempDir dir;
    walbus::Options options = BusOptions(dir.path(), walbus::Durability::kBuffered);
    std::unique_ptr<walbus::Bus> bus;
    if (Failed(state, ErrorText(walbus::Bus::Open(options, &bus)))) return;
    walbus::SubscriberOptions sub;
    sub.name = "reactor";
    sub.handler = WriteEffect;
    if (Failed(state, ErrorText(bus->Subscribe(std::move(sub)))) || Failed(state, ErrorText(bus->Start()))) return;
    for (uint64_t i = 0; i < kBurstEvents; ++i) {
      if (Failed(state, ErrorText(CommitOne(*bus, DomainKey(0, i), SubjectOf(i, kSubjects), EventData())))) return;
    }
    if (Failed(state, ErrorText(bus->WaitIdle(std::chrono::minutes(1))))) return;
    // What follows the last event: its checkpoint, then its timed trim.
    std::this_thread::sleep_for(options.trim_interval + options.checkpoint_interval + std::chrono::milliseconds(500));
    const uint64_t before = walbus::tools::OtherThreadsWakeups();
    const auto started = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_seconds));
    const uint64_t wakeups = walbus::tools::OtherThreadsWakeups() - before;
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    bus->Close().IgnoreError();
    state.SetIterationTime(seconds);
    state.counters["wakeups"] = static_cast<double>(wakeups);
    state.counters["wakeups_per_s"] = static_cast<double>(wakeups) / seconds;
  }
}

}  // namespace

void RegisterDeviceBenchmarks() { RegisterMeasurement(BenchName("Devices", {{"measure", "idle"}}), RunIdle); }

}  // namespace bench
