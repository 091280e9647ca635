// Group 3, latency: publish-to-handler percentiles at a fixed offered load,
// open loop. Event n is due at t0 + n / rate whatever happened before it;
// a pool of sender threads takes the next due event, sleeps until its due
// time and commits it. Latency is measured from the due time to the
// moment the handler sees the event, so a commit that stalls its sender
// (or a generator that falls behind) shows in the figures instead of
// silently lowering the offered load: no coordinated omission.
//
// The pool is large enough for the slowest case (kSync at 50k events/s:
// fsync latency times the rate is tens of commits in flight); idle
// senders sleep. Their timer slack is set to 1 us so that a sleep ends on
// time rather than up to 50 us late (Linux's default slack).
//
// LatencyFsync: the floor under every kSync latency, measured in the same
// run on the same file system: a small append to a file, then fdatasync,
// one after another, for as long as a latency run lasts.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "bench/bench_common.h"

namespace bench {
namespace {

constexpr int kSenders = 64;
constexpr uint64_t kSubjects = 1000;
constexpr auto kLateSend = std::chrono::milliseconds(1);
constexpr auto kDrainTimeout = std::chrono::minutes(5);
constexpr auto kStartDelay = std::chrono::milliseconds(20);

void RunLatency(benchmark::State& state, walbus::Durability durability, double rate_eps) {
  const Profile& profile = CurrentProfile();
  for (auto _ : state) {
    const uint64_t warmup_events = static_cast<uint64_t>(profile.latency_warmup_seconds * rate_eps);
    const uint64_t total = warmup_events + static_cast<uint64_t>(profile.latency_seconds * rate_eps);
    const double period_ns = 1e9 / rate_eps;
    auto due = [period_ns](Clock::time_point t0, uint64_t n) {
      return t0 + std::chrono::nanoseconds(std::llround(static_cast<double>(n) * period_ns));
    };
    // Per event: due-to-handler nanoseconds; -1 until handled. Each slot is
    // written by the one handler run of its event.
    std::vector<std::atomic<int64_t>> latency_ns(total);
    for (auto& l : latency_ns) l.store(-1, std::memory_order_relaxed);
    Clock::time_point t0;  // written before the first commit, read by handlers after it

    TempDir dir;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), durability), &bus);
    if (s.ok()) {
      s = bus->Subscribe({.name = "latency",
                          .types = {kEventType},
                          .handler = [&](const walbus::Event& e, walbus::HandlerContext& ctx) {
                            const Clock::time_point seen = Clock::now();
                            uint64_t n = 0;
                            std::memcpy(&n, e.data.data(), sizeof n);
                            if (n < total) latency_ns[n].store((seen - due(t0, n)).count(), std::memory_order_relaxed);
                            return WriteEffect(e, ctx);
                          }});
    }
    if (s.ok()) s = bus->Start();
    if (Failed(state, ErrorText(s))) return;

    std::atomic<uint64_t> next{0};
    std::atomic<uint64_t> late_sends{0};
    std::mutex error_mu;
    std::string error;
    t0 = Clock::now() + kStartDelay;
    std::vector<std::thread> senders;
    for (int k = 0; k < kSenders; ++k) {
      senders.emplace_back([&, k] {
        ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
        std::string data = EventData();
        for (uint64_t n = next.fetch_add(1); n < total; n = next.fetch_add(1)) {
          const Clock::time_point when = due(t0, n);
          std::this_thread::sleep_until(when);
          if (Clock::now() - when > kLateSend) late_sends.fetch_add(1, std::memory_order_relaxed);
          std::memcpy(data.data(), &n, sizeof n);
          walbus::Status c = CommitOne(*bus, DomainKey(k, n), SubjectOf(n, kSubjects), data);
          if (!c.ok()) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (error.empty()) error = c.ToString();
            return;
          }
        }
      });
    }
    for (std::thread& t : senders) t.join();
    if (Failed(state, error)) return;
    if (Failed(state, ErrorText(bus->WaitIdle(kDrainTimeout)))) return;
    bus->Close().IgnoreError();

    std::vector<int64_t> samples;
    samples.reserve(total - warmup_events);
    for (uint64_t n = warmup_events; n < total; ++n) {
      const int64_t l = latency_ns[n].load(std::memory_order_relaxed);
      if (l < 0) {
        Failed(state, "event " + std::to_string(n) + " was never handled");
        return;
      }
      samples.push_back(l);
    }
    const Percentiles p = ComputePercentiles(&samples);
    state.SetIterationTime(profile.latency_seconds);
    state.counters["p50_us"] = p.p50_us;
    state.counters["p99_us"] = p.p99_us;
    state.counters["p999_us"] = p.p999_us;
    state.counters["max_us"] = p.max_us;
    state.counters["events"] = static_cast<double>(samples.size());
    state.counters["late_sends"] = static_cast<double>(late_sends.load());
  }
}

// Appends `append_bytes` to a file in a fresh directory and fdatasyncs it,
// again and again for the profile's latency_seconds (at least 100 times):
// the percentiles of one append and its sync.
void RunFsync(benchmark::State& state, size_t append_bytes) {
  const Profile& profile = CurrentProfile();
  for (auto _ : state) {
    TempDir dir;  // where the buses' databases go: the same file system
    std::error_code made;
    fs::create_directories(dir.path(), made);
    const std::string path = dir.path() + "/appended";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
      Failed(state, "open " + path + ": " + std::strerror(errno));
      return;
    }
    const std::string record(append_bytes, 'r');
    std::vector<int64_t> samples;
    const auto began = Clock::now();
    const auto until = began + std::chrono::duration<double>(profile.latency_seconds);
    std::string error;
    while (error.empty() && (samples.size() < 100 || Clock::now() < until)) {
      const auto start = Clock::now();
      if (::write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size()) || ::fdatasync(fd) != 0) {
        error = std::string("append and fdatasync: ") + std::strerror(errno);
      }
      samples.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
    }
    ::close(fd);
    if (Failed(state, error)) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
    const size_t syncs = samples.size();
    const Percentiles p = ComputePercentiles(&samples);
    state.SetIterationTime(seconds);
    state.counters["p50_us"] = p.p50_us;
    state.counters["p99_us"] = p.p99_us;
    state.counters["max_us"] = p.max_us;
    state.counters["syncs"] = static_cast<double>(syncs);
  }
}

}  // namespace

void RegisterLatencyBenchmarks() {
  // About one commit's bytes in the log: a 100-byte row, an event's envelope.
  constexpr size_t kAppendBytes = 512;
  RegisterMeasurement(BenchName("LatencyFsync", {{"bytes", std::to_string(kAppendBytes)}}),
                      [=](benchmark::State& s) { RunFsync(s, kAppendBytes); });
  for (walbus::Durability durability : {walbus::Durability::kBuffered, walbus::Durability::kSync}) {
    for (double rate : CurrentProfile().latency_rates_eps) {
      const std::string name = BenchName("Latency", {{"durability", DurabilityName(durability)},
                                                     {"rate_eps", std::to_string(static_cast<uint64_t>(rate))}});
      RegisterMeasurement(name, [=](benchmark::State& s) { RunLatency(s, durability, rate); });
    }
  }
}

}  // namespace bench
