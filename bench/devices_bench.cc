// Group 9, devices: what a small device notices of an idle bus.
//
//   idle   a bus with one subscriber, after a burst of events is handled
//          and its checkpoint and trim are written, left with nothing to
//          do for idle_seconds: the wake-ups of all its threads
//          (dispatcher, workers, RocksDB's), per second. A fixed-rate poll
//          anywhere shows as tens per second; the goal is at most one.
//   wear   a steady 2,000 events/s (one producer, paced; 2 subscribers,
//          1000 subjects; kBuffered) for wear_seconds: the bytes the
//          process sent to the device (/proc/self/io write_bytes less
//          cancelled_write_bytes: the WAL, table files from flushes and
//          compactions, the MANIFEST) per logical byte committed (the keys
//          and values the application wrote, its events' subjects and
//          data, and the handlers' effects). The goal is at most 3.
//          Twice: with the default memory budget and with 16 MiB, whose
//          small memtables flush (and compact) more often.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "bench/bench_common.h"
#include "tools/process_stats.h"

namespace bench {
namespace {

constexpr uint64_t kBurstEvents = 1000;
constexpr uint64_t kSubjects = 100;
constexpr double kWearRateEps = 2000;
constexpr uint64_t kWearSubjects = 1000;

using walbus::tools::DeviceBytesWritten;

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
    const uint64_t before = walbus::tools::BusThreadsWakeups();
    const auto started = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_seconds));
    const uint64_t wakeups = walbus::tools::BusThreadsWakeups() - before;
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    bus->Close().IgnoreError();
    state.SetIterationTime(seconds);
    state.counters["wakeups"] = static_cast<double>(wakeups);
    state.counters["wakeups_per_s"] = static_cast<double>(wakeups) / seconds;
  }
}

// `budget_mib` 0: the default memory budget.
void RunWear(benchmark::State& state, size_t budget_mib) {
  const double seconds = CurrentProfile().wear_seconds;
  for (auto _ : state) {
    TempDir dir;
    walbus::Options options = BusOptions(dir.path(), walbus::Durability::kBuffered);
    if (budget_mib > 0) options.memory_budget = budget_mib << 20;
    std::unique_ptr<walbus::Bus> bus;
    if (Failed(state, ErrorText(walbus::Bus::Open(options, &bus)))) return;
    std::atomic<uint64_t> effect_bytes{0};
    for (const char* name : {"reactor-a", "reactor-b"}) {
      walbus::SubscriberOptions sub;
      sub.name = name;
      sub.handler = [&effect_bytes](const walbus::Event& e, walbus::HandlerContext& ctx) {
        walbus::Outcome outcome = WriteEffect(e, ctx);
        // WriteEffect's key and its one-byte value.
        const size_t key = ctx.SubscriberName().size() + 1 + e.subject.size() + 1 + std::to_string(e.seq).size();
        effect_bytes.fetch_add(key + 1, std::memory_order_relaxed);
        return outcome;
      };
      if (Failed(state, ErrorText(bus->Subscribe(std::move(sub))))) return;
    }
    if (Failed(state, ErrorText(bus->Start()))) return;
    const uint64_t device_before = DeviceBytesWritten();
    uint64_t logical = 0;
    const auto started = Clock::now();
    const auto period = std::chrono::duration<double>(1.0 / kWearRateEps);
    uint64_t i = 0;
    for (; Clock::now() - started < std::chrono::duration<double>(seconds); ++i) {
      std::this_thread::sleep_until(started + std::chrono::duration_cast<Clock::duration>(period * i));
      const std::string key = DomainKey(0, i);
      const std::string subject = SubjectOf(i, kWearSubjects);
      if (Failed(state, ErrorText(CommitOne(*bus, key, subject, EventData())))) return;
      logical += key.size() + DomainValue().size() + subject.size() + EventData().size();
    }
    if (Failed(state, ErrorText(bus->WaitIdle(std::chrono::minutes(1))))) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    const uint64_t device = DeviceBytesWritten() - device_before;
    logical += effect_bytes.load();
    bus->Close().IgnoreError();
    state.SetIterationTime(elapsed);
    state.counters["events"] = static_cast<double>(i);
    state.counters["logical_mib"] = MiB(logical);
    state.counters["device_mib"] = MiB(device);
    state.counters["device_bytes_per_logical_byte"] = static_cast<double>(device) / static_cast<double>(logical);
  }
}

}  // namespace

void RegisterDeviceBenchmarks() {
  RegisterMeasurement(BenchName("Devices", {{"measure", "idle"}}), RunIdle);
  RegisterMeasurement(BenchName("Devices", {{"measure", "wear"}, {"budget_mib", "default"}}),
                      [](benchmark::State& s) { RunWear(s, 0); });
  RegisterMeasurement(BenchName("Devices", {{"measure", "wear"}, {"budget_mib", std::to_string(kSmallBudgetMiB)}}),
                      [](benchmark::State& s) { RunWear(s, kSmallBudgetMiB); });
}

}  // namespace bench
