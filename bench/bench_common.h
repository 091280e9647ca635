// What the benchmark groups share: the run profile (how long and how large
// each measurement is), the workload's bytes, temporary directories,
// producer threads, memory and disk readings, and latency percentiles.
//
// Every benchmark is one Google Benchmark run of one iteration with manual
// time: the measurement (a timed load, a drain, a recovery) is the
// iteration, and its figures are counters whose names carry their units
// (events_per_second, p99_us, rss_peak_mib). Benchmark names carry their
// parameters as name:value pairs, units included (producers:16,
// rate_eps:10000, payload_bytes:4096), so bench/run_suite.py reads them
// back without a table of its own.
#ifndef WALBUS_BENCH_BENCH_COMMON_H_
#define WALBUS_BENCH_BENCH_COMMON_H_

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "walbus/bus.h"
#include "walbus/options.h"
#include "walbus/status.h"

namespace bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// How much each group measures. smoke: seconds in all, only to show that
// every benchmark runs; quick: a few minutes; full: the published figures.
struct Profile {
  std::string name;
  double publish_seconds;  // per configuration
  std::vector<int> producer_counts;
  double end_to_end_seconds;  // producers run this long, then the drain
  int end_to_end_producers;
  double latency_warmup_seconds;  // sent, not counted
  double latency_seconds;         // counted
  std::vector<double> latency_rates_eps;
  uint64_t dispatch_events;  // walbus dispatch burst
  uint64_t queue_items;      // raw queue run
  uint64_t backlog_events;
  double scaling_seconds;  // per subject-count point
  std::vector<uint64_t> subject_counts;
  std::vector<size_t> payload_sizes;
  // Each payload-size point runs scaling_seconds or until its events hold
  // this many payload bytes, whichever comes first: bounds the disk and
  // the tail cache (counted in events, so it grows with the payload).
  uint64_t payload_bytes_per_point;
  uint64_t scan_keys;               // rows of the scan group's column family
  uint64_t point_gets;              // point reads per scan-group Get run
  uint64_t timer_fire_events;       // scheduled events fired at once
  uint64_t timer_pending_events;    // scheduled events pending for the RSS figure
  double timer_lateness_seconds;    // the lateness run under live load
  uint64_t process_flows;           // three-step process instances run to completion
  uint64_t process_open_instances;  // instances left open for the RSS and read figures
  double idle_seconds;              // an idle bus watched for wake-ups
  double wear_seconds;              // the steady load whose device writes are counted
};

// Selects the profile by name ("smoke", "quick", "full"); false if unknown.
bool SelectProfile(const std::string& name);
const Profile& CurrentProfile();

// Registration of each group (called by main once the profile is known).
void RegisterPublishBenchmarks();
void RegisterEndToEndBenchmarks();
void RegisterLatencyBenchmarks();
void RegisterDispatchBenchmarks();
void RegisterBacklogBenchmarks();
void RegisterScalingBenchmarks();
void RegisterScanBenchmarks();
void RegisterTimerBenchmarks();
void RegisterDeviceBenchmarks();
void RegisterProcessBenchmarks();

// The backlog group's filler runs as a child process: this program with
// these flags (handled by main before Google Benchmark sees argv).
inline constexpr const char* kFillBacklogFlag = "--fill-backlog=";
inline constexpr const char* kFillEventsFlag = "--fill-events=";
inline constexpr const char* kFillSubscribersFlag = "--fill-subscribers=";
// Writes `events` events behind `subscribers` registered, stopped
// subscribers into a new database in `dir`. Returns the process exit
// status.
int FillBacklog(const std::string& dir, uint64_t events, int subscribers);

// "Group/key:value/key:value". Names are the contract with run_suite.py.
std::string BenchName(const std::string& group, const std::vector<std::pair<std::string, std::string>>& params);

// Registers a one-iteration, manually timed benchmark.
void RegisterMeasurement(const std::string& name, std::function<void(benchmark::State&)> run);

// ---- The workload's bytes ----

inline constexpr size_t kDomainBytes = 100;
inline constexpr size_t kEventDataBytes = 200;
inline const char* const kEventType = "bench.item-recorded.v1";

// The small device's memory budget, as the goals name it: the
// backlog, devices and soak groups measure within it.
inline constexpr size_t kSmallBudgetMiB = 16;

// Deterministic incompressible bytes (RocksDB and SQLite would otherwise
// profit from compressible filler that real payloads do not have).
std::string RandomBytes(size_t n, uint32_t seed);
const std::string& DomainValue();
const std::string& EventData();
// The size of walbus's stored envelope around EventData() for a subject of
// subject_bytes: what the raw RocksDB baseline writes for one event.
size_t EnvelopeBytes(size_t subject_bytes);

std::string DomainKey(int producer, uint64_t n);
std::string SubjectOf(uint64_t n, uint64_t subjects);

// ---- Directories, memory, disk ----

// A fresh directory, removed on destruction. The database goes in path(),
// which does not exist yet. `parent` defaults to the system temp dir;
// "/dev/shm" puts the database in memory.
class TempDir {
 public:
  explicit TempDir(const fs::path& parent = fs::temp_directory_path());
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path() const { return (root_ / "db").string(); }

 private:
  fs::path root_;
};

double RssMiB();
// Bytes of the regular files under `dir` (what the database takes on disk).
uint64_t DirBytes(const fs::path& dir);
inline double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Samples the resident set every `period` on its own thread until
// destroyed; PeakMiB() is the largest sample so far.
class RssSampler {
 public:
  explicit RssSampler(std::chrono::milliseconds period = std::chrono::milliseconds(20));
  ~RssSampler();
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;
  double PeakMiB() const { return peak_mib_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<double> peak_mib_{0};
  std::thread thread_;
};

// ---- Running producers ----

// Runs `producers` threads that call `one(producer, n)` with n = 0, 1, ...
// (unique across threads) until `seconds` have passed or, when
// max_operations > 0, that many calls were made. A call that returns an
// error stops all, and the first error is returned. Returns the calls
// completed and the seconds until the last one completed.
struct LoadResult {
  uint64_t operations = 0;
  double seconds = 0;
  std::string error;  // the first failure, empty when none
};
LoadResult RunClosedLoop(int producers, double seconds, uint64_t max_operations,
                         const std::function<std::string(int, uint64_t)>& one);

// ---- walbus helpers ----

walbus::Options BusOptions(const std::string& dir, walbus::Durability durability);
std::string DurabilityName(walbus::Durability d);
// One domain write (DomainValue) and one event of kEventType, committed
// with `commit`'s options.
walbus::Status CommitOne(walbus::Bus& bus, const std::string& domain_key, const std::string& subject,
                         const std::string& data, const walbus::CommitOptions& commit = {});
// The end-to-end handler: one effect per event, keyed by subscriber, subject
// and seq, committed with the inbox record.
walbus::Outcome WriteEffect(const walbus::Event& e, walbus::HandlerContext& ctx);
// A handler that writes nothing: what delivery costs without the handler's.
walbus::Outcome HandleNothing(const walbus::Event& e, walbus::HandlerContext& ctx);
// Pending events of the slowest active subscriber (0 when none is behind).
uint64_t Pending(walbus::Bus& bus);

// An end-to-end load: `producers` commit "domain write + event" for
// `seconds` (or until max_events, when > 0) while `subscribers` each run
// WriteEffect on every event (or, without write_effect, a handler that
// writes nothing); done when every subscriber has caught up.
struct EndToEndSpec {
  walbus::Durability durability = walbus::Durability::kBuffered;
  int subscribers = 1;
  int producers = 1;
  double seconds = 1;
  uint64_t max_events = 0;
  uint64_t subjects = 1000;
  size_t payload_bytes = kEventDataBytes;
  bool write_effect = true;
};
struct EndToEndResult {
  uint64_t events = 0;
  double publish_seconds = 0;  // producers running
  double total_seconds = 0;    // from the first commit until every subscriber is done
  double rss_peak_mib = 0;
};
std::string RunWalbusEndToEnd(const EndToEndSpec& spec, EndToEndResult* result);
// Sets the iteration time and the end-to-end counters (events_per_second:
// events published per second of total time).
void ReportEndToEnd(benchmark::State& state, const EndToEndResult& r, int subscribers);

// ---- Latency ----

struct Percentiles {
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};
// Nearest-rank percentiles of nanosecond samples (sorts them).
Percentiles ComputePercentiles(std::vector<int64_t>* samples_ns);

// Fails the benchmark with `error` when it is not empty; true if it was.
bool Failed(benchmark::State& state, const std::string& error);
// A status as such an error: empty when OK.
std::string ErrorText(const walbus::Status& s);

}  // namespace bench

#endif  // WALBUS_BENCH_BENCH_COMMON_H_
