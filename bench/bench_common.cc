#include "bench/bench_common.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <system_error>

#include "bus/core/envelope.h"
#include "tools/process_stats.h"

namespace bench {
namespace {

// The three profiles. The full one is what docs/performance.md reports;
// its largest item, the 10M-event backlog, dominates its run time.
const Profile kProfiles[] = {
    {.name = "smoke",
     .publish_seconds = 0.05,
     .producer_counts = {1, 4, 16},
     .end_to_end_seconds = 0.2,
     .end_to_end_producers = 4,
     .latency_warmup_seconds = 0.1,
     .latency_seconds = 0.3,
     .latency_rates_eps = {1000, 10000},
     .dispatch_events = 5000,
     .queue_items = 100000,
     .backlog_events = 5000,
     .scaling_seconds = 0.2,
     .subject_counts = {1, 100, 1000},
     .payload_sizes = {64, 65536},
     .payload_bytes_per_point = 4u << 20,
     .scan_keys = 20000,
     .point_gets = 20000,
     .timer_fire_events = 20000,
     .timer_pending_events = 50000,
     .timer_lateness_seconds = 0.5,
     .process_flows = 2000,
     .process_open_instances = 20000,
     .idle_seconds = 1,
     .wear_seconds = 1},
    {.name = "quick",
     .publish_seconds = 0.3,
     .producer_counts = {1, 4, 16, 64},
     .end_to_end_seconds = 1,
     .end_to_end_producers = 4,
     .latency_warmup_seconds = 0.5,
     .latency_seconds = 2,
     .latency_rates_eps = {1000, 10000, 50000},
     .dispatch_events = 100000,
     .queue_items = 5000000,
     .backlog_events = 300000,
     .scaling_seconds = 1.5,
     .subject_counts = {1, 100, 1000, 1000000},
     .payload_sizes = {64, 256, 1024, 4096, 16384, 65536},
     .payload_bytes_per_point = 64u << 20,
     .scan_keys = 300000,
     .point_gets = 200000,
     .timer_fire_events = 200000,
     .timer_pending_events = 1000000,
     .timer_lateness_seconds = 3,
     .process_flows = 20000,
     .process_open_instances = 200000,
     .idle_seconds = 5,
     .wear_seconds = 10},
    {.name = "full",
     // Publish and end to end run three times each (bench/run_suite.py).
     .publish_seconds = 1.5,
     .producer_counts = {1, 4, 16, 64},
     .end_to_end_seconds = 2.5,
     .end_to_end_producers = 4,
     .latency_warmup_seconds = 1,
     .latency_seconds = 10,
     .latency_rates_eps = {1000, 10000, 50000},
     .dispatch_events = 300000,
     .queue_items = 20000000,
     .backlog_events = 10000000,
     .scaling_seconds = 4,
     .subject_counts = {1, 100, 1000, 1000000},
     .payload_sizes = {64, 256, 1024, 4096, 16384, 65536},
     .payload_bytes_per_point = 512u << 20,
     .scan_keys = 1000000,
     .point_gets = 1000000,
     .timer_fire_events = 1000000,
     .timer_pending_events = 10000000,
     .timer_lateness_seconds = 10,
     .process_flows = 100000,
     .process_open_instances = 1000000,
     .idle_seconds = 10,
     .wear_seconds = 60},
};

const Profile* g_profile = &kProfiles[2];

}  // namespace

bool SelectProfile(const std::string& name) {
  for (const Profile& p : kProfiles) {
    if (p.name == name) {
      g_profile = &p;
      return true;
    }
  }
  return false;
}

const Profile& CurrentProfile() { return *g_profile; }

std::string BenchName(const std::string& group, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string name = group;
  for (const auto& [key, value] : params) name += "/" + key + ":" + value;
  return name;
}

void RegisterMeasurement(const std::string& name, std::function<void(benchmark::State&)> run) {
  benchmark::RegisterBenchmark(name.c_str(), [run](benchmark::State& state) { run(state); })
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

const std::string& DomainValue() {
  static const std::string v = RandomBytes(kDomainBytes, 1);
  return v;
}

const std::string& EventData() {
  static const std::string v = RandomBytes(kEventDataBytes, 2);
  return v;
}

size_t EnvelopeBytes(size_t subject_bytes) {
  walbus::Event e;
  e.id.bytes.fill(0x5a);
  e.type = kEventType;
  e.source = walbus::Options().source;
  e.subject = std::string(subject_bytes, 'k');
  e.time = std::chrono::system_clock::now();
  e.data = EventData();
  return walbus::internal::EncodeEnvelope(e).size();
}

std::string DomainKey(int producer, uint64_t n) { return "d-" + std::to_string(producer) + "-" + std::to_string(n); }

std::string SubjectOf(uint64_t n, uint64_t subjects) { return "s-" + std::to_string(n % subjects); }

TempDir::TempDir(const fs::path& parent) {
  static std::atomic<uint64_t> counter{0};
  root_ = parent / ("walbus-bench-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(root_);
  fs::create_directories(root_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

double RssMiB() { return walbus::tools::ResidentMiB(); }

uint64_t DirBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  // Files vanish under a running database (compactions): skip, not fail.
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uint64_t size = it->file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

RssSampler::RssSampler(std::chrono::milliseconds period) {
  peak_mib_ = RssMiB();
  thread_ = std::thread([this, period] {
    while (!stop_.load()) {
      const double now = RssMiB();
      if (now > peak_mib_.load()) peak_mib_.store(now);
      std::this_thread::sleep_for(period);
    }
  });
}

RssSampler::~RssSampler() {
  stop_.store(true);
  thread_.join();
}

LoadResult RunClosedLoop(int producers, double seconds, uint64_t max_operations,
                         const std::function<std::string(int, uint64_t)>& one) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> completed{0};
  std::mutex mu;
  std::condition_variable stopped;
  LoadResult result;
  auto halt = [&](std::string error) {
    std::lock_guard<std::mutex> lock(mu);
    if (result.error.empty()) result.error = std::move(error);
    stop.store(true);
    stopped.notify_all();
  };
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t n = next.fetch_add(1, std::memory_order_relaxed);
        if (max_operations > 0 && n >= max_operations) {
          halt({});
          return;
        }
        if (std::string error = one(p, n); !error.empty()) {
          halt(std::move(error));
          return;
        }
        completed.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    stopped.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stop.load(); });
    stop.store(true);
  }
  for (std::thread& t : threads) t.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.operations = completed.load();
  return result;
}

walbus::Options BusOptions(const std::string& dir, walbus::Durability durability) {
  walbus::Options opt;
  opt.dir = dir;
  opt.durability = durability;
  opt.column_families = {"domain", "effects"};
  return opt;
}

std::string DurabilityName(walbus::Durability d) { return d == walbus::Durability::kSync ? "sync" : "buffered"; }

walbus::Status CommitOne(walbus::Bus& bus, const std::string& domain_key, const std::string& subject,
                         const std::string& data, const walbus::CommitOptions& commit) {
  walbus::Transaction tx = bus.Begin();
  if (walbus::Status s = tx.Put("domain", domain_key, DomainValue()); !s.ok()) return s;
  walbus::EventSpec event;
  event.type = kEventType;
  event.subject = subject;
  event.data = data;
  if (auto id = tx.Publish(event); !id.ok()) return id.status();
  return tx.Commit(commit).status();
}

walbus::Outcome WriteEffect(const walbus::Event& e, walbus::HandlerContext& ctx) {
  const std::string key = ctx.SubscriberName() + "/" + e.subject + "/" + std::to_string(e.seq);
  if (!ctx.Put("effects", key, "1").ok()) return walbus::Outcome::RetryAfter(std::chrono::milliseconds(1));
  return walbus::Outcome::Done();
}

walbus::Outcome HandleNothing(const walbus::Event&, walbus::HandlerContext&) { return walbus::Outcome::Done(); }

uint64_t Pending(walbus::Bus& bus) {
  const walbus::BusStats stats = bus.Stats();
  uint64_t pending = 0;
  for (const auto& s : stats.subscribers) pending = std::max(pending, stats.last_seq - s.checkpoint);
  return pending;
}

std::string RunWalbusEndToEnd(const EndToEndSpec& spec, EndToEndResult* result) {
  constexpr auto kDrainTimeout = std::chrono::minutes(30);
  const std::string data = spec.payload_bytes == kEventDataBytes ? EventData() : RandomBytes(spec.payload_bytes, 2);
  TempDir dir;
  walbus::Options opt = BusOptions(dir.path(), spec.durability);
  opt.max_payload_bytes = std::max(opt.max_payload_bytes, spec.payload_bytes);
  std::unique_ptr<walbus::Bus> bus;
  walbus::Status s = walbus::Bus::Open(opt, &bus);
  for (int i = 0; s.ok() && i < spec.subscribers; ++i) {
    s = bus->Subscribe({.name = "effects-" + std::to_string(i),
                        .types = {kEventType},
                        .handler = spec.write_effect ? WriteEffect : HandleNothing});
  }
  if (s.ok()) s = bus->Start();
  if (!s.ok()) return s.ToString();
  RssSampler rss;
  const Clock::time_point start = Clock::now();
  const LoadResult load = RunClosedLoop(spec.producers, spec.seconds, spec.max_events, [&](int p, uint64_t n) {
    return ErrorText(CommitOne(*bus, DomainKey(p, n), SubjectOf(n, spec.subjects), data));
  });
  if (!load.error.empty()) return load.error;
  if (s = bus->WaitIdle(kDrainTimeout); !s.ok()) return s.ToString();
  result->events = load.operations;
  result->publish_seconds = load.seconds;
  result->total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result->rss_peak_mib = rss.PeakMiB();
  return ErrorText(bus->Close());
}

void ReportEndToEnd(benchmark::State& state, const EndToEndResult& r, int subscribers) {
  state.SetIterationTime(r.total_seconds);
  state.counters["events"] = static_cast<double>(r.events);
  state.counters["events_per_second"] = static_cast<double>(r.events) / r.total_seconds;
  state.counters["handled_per_second"] = static_cast<double>(r.events) * subscribers / r.total_seconds;
  state.counters["publish_events_per_second"] = static_cast<double>(r.events) / r.publish_seconds;
  state.counters["drain_seconds"] = r.total_seconds - r.publish_seconds;
}

Percentiles ComputePercentiles(std::vector<int64_t>* samples_ns) {
  Percentiles p;
  if (samples_ns->empty()) return p;
  std::sort(samples_ns->begin(), samples_ns->end());
  auto at = [&](double q) {
    const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(samples_ns->size())));
    return static_cast<double>((*samples_ns)[std::clamp<size_t>(rank, 1, samples_ns->size()) - 1]) / 1000.0;
  };
  p.p50_us = at(0.50);
  p.p99_us = at(0.99);
  p.p999_us = at(0.999);
  p.max_us = static_cast<double>(samples_ns->back()) / 1000.0;
  return p;
}

bool Failed(benchmark::State& state, const std::string& error) {
  if (error.empty()) return false;
  state.SkipWithError(error.c_str());
  return true;
}

std::string ErrorText(const walbus::Status& s) { return s.ok() ? std::string() : s.ToString(); }

}  // namespace bench
