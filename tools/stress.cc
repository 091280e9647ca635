// walbus-stress: a load generator that is also a checker.
//
// Runs the workload of tools/workload.h (producer threads, subscribers,
// optimistic versions), waits until every subscriber has caught up, closes
// the bus, reopens it without running any handler and checks from the
// database: exactly_once, per_subject_order, all_delivered (see
// workload.h), plus outbox_drained (nothing left in the outbox, or exactly
// the newest N events with --retain-events N, which keeps them for
// `walbus replay` on the database afterwards).
//
// Two ways to size the load: --events N commits N events as fast as the
// producers can (or paced, with --rate); --soak SECONDS --rate R runs the
// producers for that long at R events a second in total, open loop (commit
// n is due at start + n / R whether or not the bus kept up, so a slow bus
// shows as lag instead of a lower offered load), and every --report-every
// seconds prints a progress line on stdout:
//
//   {"t":..,"events":..,"rate":..,"rss_mib":..,"anon_rss_mib":..,"disk_mib":..,
//    "device_written_mib":..,"lag_events":..,"outbox_backlog":..,"in_flight":..,
//    "storage_cache_mib":..,"memtable_mib":..,"table_readers_mib":..,
//    "heap_in_use_mib":..,"heap_free_mib":..}
//
// t is seconds since the producers started; events the events committed so
// far and rate those of the last interval per second; rss_mib the resident
// set of this process, anon_rss_mib its anonymous part; disk_mib the size
// of the files in the database directory; device_written_mib what the
// process wrote to the device since the soak started (/proc/self/io,
// process_stats.h); lag_events the largest last_seq - checkpoint of a
// subscriber; outbox_backlog the events not yet passed by every subscriber (as in
// `walbus stats`); in_flight the events the subscribers hold in memory;
// the last three storage's memory (metrics walbus_storage_cache_bytes,
// _memtable_bytes, _table_readers_bytes), the memtables within the cache;
// the last two what the C allocator holds in use and free for reuse
// (process_stats.h).
// Lines go on through the drain after the producers stop, and a last one
// shows the state once every subscriber has caught up.
//
// With --bridge, the events cross NATS JetStream: the producers commit on a
// sender bus whose relay publishes them, an inbound consumer takes them
// into a receiver bus (a sibling directory, "<dir>-receiver"), and the
// subscribers run there; the checks read the final versions from the
// sender and the effects from the receiver. --bridge local starts a
// nats-server of its own (loopback, a free port, its store beside the
// databases), which --kill-server-every SECONDS kills (SIGKILL) and starts
// again on that period; --bridge nats://HOST:PORT uses a running one.
//
// Then prints one JSON object on stdout (in a soak with "mode":"soak", the
// peak RSS and disk size, sampled four times a second, and the device
// bytes written per logical byte committed: keys, values, events' subjects
// and data, the handlers' effects; and what storage wrote to its log, and
// to table files in flushes and in compactions, from the metric
// walbus_storage_written_bytes_total). Exit status: 0
// when every check passed, 1 when a check failed, 2 on bad usage or an
// error.
#include <CLI/CLI.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "tools/guarded_main.h"
#include "tools/nats_server.h"
#include "tools/process_stats.h"
#include "tools/workload.h"
#include "walbus/bus.h"
#include "walbus/event.h"
#include "walbus/jetstream.h"
#include "walbus/options.h"
#include "walbus/status.h"

namespace {

namespace fs = std::filesystem;
using walbus::Status;

using namespace walbus::workload;
constexpr std::chrono::minutes kIdleTimeout{10};

constexpr int kExitPassed = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitError = 2;

struct Config {
  size_t producers = 4;
  size_t subscribers = 2;
  size_t subjects = 100;
  uint64_t events = 100000;
  size_t payload_bytes = 100;
  std::string durability = "buffered";
  uint64_t seed = 0;
  std::string dir;
  bool keep = false;
  size_t workers = 2;
  double poison_rate = 0;     // share of events whose handler always throws
  double transient_rate = 0;  // share of events that fail twice, then pass
  int64_t max_clean_latency_ms = 5000;
  double soak_seconds = 0;        // > 0: run for this long instead of `events`
  double rate = 0;                // events per second over all producers; 0: unpaced
  double report_every = 10;       // seconds between soak progress lines
  bool dir_is_ours = false;       // Created by this run under /tmp.
  std::string bridge;             // "", "local" or a NATS url
  double kill_server_every = 0;   // seconds; --bridge local only
  bool lose_acked = false;        // each kill cuts the stream's tail
  double kill_devices_every = 0;  // seconds; sender and receiver as processes
  std::string role;               // "", or "sender"/"receiver": a device process of the run
  std::string role_url;           // the NATS url of a device process
  double timeout = 600;           // seconds the bridged load may take
  uint64_t retain_events = 0;     // Options::retain_events of every bus
  double inbox_window = 0;        // seconds; Options::inbox_window of every bus
  size_t memory_budget_mib = 0;   // Options::memory_budget of every bus; 0: its default
  bool soak() const { return soak_seconds > 0; }
  bool bridged() const { return !bridge.empty(); }
  bool devices() const { return kill_devices_every > 0; }
  // Where the handlers run: the receiver across the bridge, else the bus.
  std::string handler_dir() const { return bridged() ? dir + "-receiver" : dir; }
  // The store and log of the local nats-server (--bridge local).
  std::string nats_dir() const { return dir + "-nats"; }
};

// Retries of the stress subscribers: short, so poison is dead-lettered
// within a run.
walbus::RetryPolicy StressRetries() {
  walbus::RetryPolicy r;
  r.max_attempts = 3;
  r.base = std::chrono::milliseconds(5);
  r.cap = std::chrono::milliseconds(50);
  return r;
}

// What one producer committed. Counts rather than a list of receipts, so
// that a long soak does not grow this process's memory by itself.
struct ProducerResult {
  uint64_t events = 0;      // every event, faults included
  uint64_t newest_seq = 0;  // the highest seq of a receipt
  std::vector<walbus::EventId> poison;
  std::vector<walbus::EventId> transient;
  uint64_t conflicts = 0;
};

struct Checks {
  bool exactly_once = true;
  bool per_subject_order = true;
  bool all_delivered = true;
  bool outbox_drained = true;
  bool poison_dead_lettered = true;  // dead letters = poison events, per subscriber
  bool others_not_delayed = true;    // clean subjects stayed under the latency bound
  bool passed() const {
    return exactly_once && per_subject_order && all_delivered && outbox_drained && poison_dead_lettered &&
           others_not_delayed;
  }
};

// The first error any thread met; later ones are dropped.
class FirstError {
 public:
  void Set(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = std::move(s);
    failed_.store(true, std::memory_order_release);
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Status Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  Status status_;
  std::atomic<bool> failed_{false};
};

std::string RandomPayload(std::mt19937_64& rng, size_t bytes) {
  std::uniform_int_distribution<int> letter('a', 'z');
  std::string s(bytes, '\0');
  for (char& c : s) c = static_cast<char>(letter(rng));
  return s;
}

// ---- command line and directory ----

// The load: producers, events or a soak, pacing, sizes, durability.
void AddLoadOptions(CLI::App& app, Config* cfg) {
  app.add_option("--producers", cfg->producers, "Producer threads")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1024}));
  app.add_option("--subscribers", cfg->subscribers, "Subscribers")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1024}));
  app.add_option("--subjects", cfg->subjects, "Distinct subjects")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{100000000}));
  CLI::Option* events =
      app.add_option("--events", cfg->events, "Events in total (one per transaction)")->capture_default_str();
  CLI::Option* soak =
      app.add_option("--soak", cfg->soak_seconds, "Soak: run the producers for this many seconds instead of --events")
          ->check(CLI::PositiveNumber)
          ->excludes(events);
  CLI::Option* rate =
      app.add_option("--rate", cfg->rate, "Events per second over all producers, paced open loop (0: unpaced)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1e9));
  app.add_option("--report-every", cfg->report_every, "Seconds between soak progress lines on stdout")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0))
      ->needs(soak);
  soak->needs(rate);
  app.add_option("--payload-bytes", cfg->payload_bytes, "Bytes of state and event data")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{64} << 20));
  app.add_option("--durability", cfg->durability, "sync or buffered")
      ->capture_default_str()
      ->check(CLI::IsMember({"sync", "buffered"}));
}

// The bus under load: where it lives, the failures it meets, what it
// keeps, its memory and workers.
void AddBusOptions(CLI::App& app, Config* cfg) {
  app.add_option("--dir", cfg->dir, "Database directory, missing or empty (default: fresh under /tmp)");
  app.add_flag("--keep", cfg->keep, "Keep the directory created under /tmp");
  app.add_option("--poison-rate", cfg->poison_rate, "Share of events whose handler always throws")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--transient-rate", cfg->transient_rate, "Share of events that fail twice, then succeed")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-clean-latency-ms", cfg->max_clean_latency_ms,
                 "Longest a clean event may wait from commit to handler")
      ->capture_default_str();
  app.add_option("--retain-events", cfg->retain_events,
                 "Keep the newest N handled events in the outbox (Options::retain_events), for replays; the "
                 "outbox check then expects exactly that many")
      ->capture_default_str();
  app.add_option("--inbox-window", cfg->inbox_window,
                 "Seconds after which inbox records at or below the checkpoint may be dropped by compactions "
                 "(Options::inbox_window); 0 keeps them")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--memory-budget-mib", cfg->memory_budget_mib,
                 "Options::memory_budget of every bus, in MiB (0: its default); a soak reports the peak RSS")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  app.add_option("--workers", cfg->workers, "Handler worker threads")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{256}));
}

// A run through NATS JetStream, and the device processes of one.
void AddBridgeOptions(CLI::App& app, Config* cfg) {
  CLI::Option* bridge = app.add_option("--bridge", cfg->bridge,
                                       "Run the events through NATS JetStream into a second bus: 'local' "
                                       "(start a nats-server here) or a nats:// url");
  app.add_option("--kill-server-every", cfg->kill_server_every,
                 "With --bridge local: kill and restart the server every SECONDS")
      ->check(CLI::Range(0.5, 86400.0))
      ->needs(bridge);
  app.add_flag("--lose-acked", cfg->lose_acked,
               "With --kill-server-every: each kill also cuts up to 64 KiB off the end of the stream's newest "
               "block, as a crash of a server that had not yet written what it acknowledged");
  app.add_option("--kill-devices-every", cfg->kill_devices_every,
                 "With --bridge: run the sender and the receiver as processes of their own and SIGKILL one of "
                 "them (at random) about every SECONDS, starting it again at once")
      ->check(CLI::Range(0.5, 86400.0))
      ->needs(bridge);
  app.add_option("--timeout", cfg->timeout, "With --bridge: seconds the receiver may take to get every event")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0))
      ->needs(bridge);
  // A device process of a --kill-devices-every run (started by the run).
  app.add_option("--role", cfg->role)->check(CLI::IsMember({"sender", "receiver"}))->group("");
  app.add_option("--role-url", cfg->role_url)->group("");
}

// Why `cfg` is not a run; nullopt when it is.
std::optional<std::string> ConfigProblem(const Config& cfg) {
  if (cfg.memory_budget_mib > 0 && cfg.memory_budget_mib < (walbus::kMinMemoryBudget >> 20)) {
    return "--memory-budget-mib must be 0 (the default) or at least " + std::to_string(walbus::kMinMemoryBudget >> 20);
  }
  if (cfg.soak() && cfg.rate <= 0) {
    return "--soak needs a --rate above 0";
  }
  if (cfg.rate > 0 && cfg.rate < 0.01) {
    return "--rate must be 0 (unpaced) or at least 0.01";
  }
  if (cfg.kill_server_every > 0 && cfg.bridge != "local") {
    return "--kill-server-every needs --bridge local (a server this run owns)";
  }
  if (cfg.bridged() && cfg.bridge != "local" && !cfg.bridge.starts_with("nats://")) {
    return "--bridge takes 'local' or a nats:// url, not '" + cfg.bridge + "'";
  }
  if (cfg.devices() && (cfg.poison_rate > 0 || cfg.transient_rate > 0)) {
    return "--kill-devices-every checks clean events only (no --poison-rate, "
           "--transient-rate)";
  }
  if (cfg.bridged() && cfg.soak()) {
    return "--bridge runs a fixed --events count, not a soak";
  }
  return std::nullopt;
}

// Returns an exit code when the program should stop now.
std::optional<int> ParseArgs(int argc, char** argv, Config* cfg) {
  CLI::App app{"walbus-stress: concurrent load with exactly-once and order checks"};
  AddLoadOptions(app, cfg);
  CLI::Option* seed = app.add_option("--seed", cfg->seed, "PRNG seed (default: from time)");
  AddBusOptions(app, cfg);
  AddBridgeOptions(app, cfg);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitPassed : kExitError;
  }
  if (std::optional<std::string> problem = ConfigProblem(*cfg)) {
    std::cerr << "walbus-stress: " << *problem << "\n";
    return kExitError;
  }
  if (seed->count() == 0) {
    cfg->seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  return std::nullopt;
}

// The bus gets a path that does not exist yet, inside the chosen directory
// when it was made here, so that it creates its own database.
Status PrepareDir(Config* cfg) {
  std::error_code ec;
  if (cfg->dir.empty()) {
    std::string tmpl = (fs::temp_directory_path(ec) / "walbus-stress-XXXXXX").string();
    if (ec || ::mkdtemp(tmpl.data()) == nullptr) {
      return Status::IOError("cannot create a directory under " + fs::temp_directory_path(ec).string());
    }
    cfg->dir = (fs::path(tmpl) / "db").string();
    cfg->dir_is_ours = true;
    return Status::OK();
  }
  for (const std::string& d : {cfg->dir, cfg->handler_dir(), cfg->nats_dir()}) {
    if (fs::exists(d, ec) && !fs::is_empty(d, ec)) {
      return Status::InvalidArgument(d + " is not empty; the checks need a fresh database");
    }
  }
  return Status::OK();
}

void CleanUp(const Config& cfg, bool passed) {
  std::error_code ec;
  // The server's store is scratch of this run, wherever the databases are.
  if (cfg.bridge == "local" && passed && !cfg.keep) fs::remove_all(cfg.nats_dir(), ec);
  if (!cfg.dir_is_ours) return;
  fs::path root = fs::path(cfg.dir).parent_path();
  if (cfg.keep || !passed) {
    std::cerr << "walbus-stress: database kept in " << cfg.dir << "\n";
    return;
  }
  fs::remove_all(root, ec);
}

// ---- the bridge ----

constexpr char kBridgeStream[] = "WALBUS_STRESS";
constexpr char kBridgePrefix[] = "walbus-stress";

// The NATS server of --bridge local, restarted on --kill-server-every.
class ServerKiller {
 public:
  // With lose_acked, each kill also cuts up to 64 KiB (a few hundred
  // messages) off the stream's newest block before the restart.
  ServerKiller(walbus::tools::NatsServer* server, double every_seconds, bool lose_acked, uint64_t seed)
      : server_(server) {
    if (every_seconds <= 0) return;
    thread_ = std::thread([this, every_seconds, lose_acked, seed] {
      std::mt19937_64 rng(seed ^ 0x5eed);
      std::uniform_int_distribution<uint64_t> cut(1, 64 << 10);
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::duration<double>(every_seconds), [this] { return stop_; })) {
        server_->Kill();
        ++kills_;
        if (lose_acked && server_->DropStreamTail(kBridgeStream, cut(rng)) > 0) ++tails_dropped_;
        cv_.wait_for(lock, std::chrono::milliseconds(300), [this] { return stop_; });
        if (!server_->Start()) std::cerr << "walbus-stress: the NATS server did not come back\n";
      }
    });
  }
  ~ServerKiller() { Stop(); }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  int kills() const { return kills_; }                  // REQUIRES: stopped
  int tails_dropped() const { return tails_dropped_; }  // REQUIRES: stopped

 private:
  walbus::tools::NatsServer* const server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  int kills_ = 0;      // the killer thread's until joined
  int tails_dropped_ = 0;
  std::thread thread_;
};

// ---- the load ----

Status OpenAt(const Config& cfg, const std::string& dir, std::unique_ptr<walbus::Bus>* bus) {
  walbus::Options options = BusOptions(
      dir, cfg.durability == "sync" ? walbus::Durability::kSync : walbus::Durability::kBuffered, cfg.workers);
  options.retain_events = cfg.retain_events;
  options.inbox_window = std::chrono::milliseconds(static_cast<int64_t>(cfg.inbox_window * 1000));
  if (cfg.memory_budget_mib > 0) options.memory_budget = cfg.memory_budget_mib << 20;
  return walbus::Bus::Open(options, bus);
}

using SteadyClock = std::chrono::steady_clock;

// When the producers commit. Paced, they share one open-loop schedule:
// commit k of producer i of P is event n = i + k * P, due at start + n /
// rate, however late the earlier ones were. Unpaced (rate 0), they commit
// as fast as they can.
struct Pace {
  double rate = 0;       // events per second over all producers; 0: unpaced
  size_t producers = 1;  // producers sharing the rate
  SteadyClock::time_point start;
  // No commit starts at or after this point, whatever is left of `count`.
  SteadyClock::time_point until = SteadyClock::time_point::max();
};

// Waits for the slot of commit k of producer `index`; false when the run
// is over.
bool AwaitSlot(const Pace& pace, size_t index, uint64_t k) {
  if (pace.rate > 0) {
    const double n = static_cast<double>(index) + static_cast<double>(k) * static_cast<double>(pace.producers);
    const auto due =
        pace.start + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(n / pace.rate));
    if (due >= pace.until) return false;
    std::this_thread::sleep_until(due);
  }
  return pace.until == SteadyClock::time_point::max() || SteadyClock::now() < pace.until;
}

void RunProducer(walbus::Bus& bus, const Config& cfg, size_t index, uint64_t count, const Pace& pace,
                 ProducerResult* result, std::atomic<uint64_t>* committed, FirstError* error) {
  std::seed_seq seq{cfg.seed, static_cast<uint64_t>(index)};
  std::mt19937_64 rng(seq);
  std::uniform_int_distribution<size_t> pick(0, cfg.subjects - 1);
  std::uniform_real_distribution<double> chance(0.0, 1.0);
  auto record = [&](const walbus::Receipt& receipt) {
    ++result->events;
    result->newest_seq = std::max(result->newest_seq, receipt.first_seq);
    committed->fetch_add(1, std::memory_order_relaxed);
  };
  for (uint64_t n = 0; n < count && !error->failed() && AwaitSlot(pace, index, n); ++n) {
    // Faults go on subjects of their own, so that the delay a poison event
    // imposes on its subject never touches the checked ones.
    const double r = chance(rng);
    if (r < cfg.poison_rate + cfg.transient_rate) {
      const bool poison = r < cfg.poison_rate;
      walbus::Receipt receipt;
      Status s = CommitFault(bus, (poison ? "p-" : "t-") + std::to_string(pick(rng)), poison ? "poison" : "transient",
                             &receipt);
      if (!s.ok()) {
        error->Set(std::move(s));
        return;
      }
      (poison ? result->poison : result->transient).push_back(receipt.event_ids[0]);
      record(receipt);
      continue;
    }
    const std::string subject = SubjectName(pick(rng));
    const std::string payload = RandomPayload(rng, cfg.payload_bytes);
    uint64_t version = 0;
    walbus::Receipt receipt;
    Status s;
    while ((s = CommitItem(bus, subject, payload, &version, &receipt)).IsConflict()) ++result->conflicts;
    if (!s.ok()) {
      error->Set(std::move(s));
      return;
    }
    record(receipt);
  }
}

uint64_t ShareOf(uint64_t total, size_t parts, size_t index) { return total / parts + (index < total % parts ? 1 : 0); }

// Fixed count: each producer commits its share of --events. Soak: they
// commit until the soak time is over.
Status RunProducers(walbus::Bus& bus, const Config& cfg, SteadyClock::time_point start,
                    std::vector<ProducerResult>* results, std::atomic<uint64_t>* committed) {
  results->assign(cfg.producers, ProducerResult{});
  Pace pace;
  pace.rate = cfg.rate;
  pace.producers = cfg.producers;
  pace.start = start;
  if (cfg.soak()) {
    pace.until =
        start + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(cfg.soak_seconds));
  }
  FirstError error;
  std::vector<std::thread> threads;
  threads.reserve(cfg.producers);
  for (size_t i = 0; i < cfg.producers; ++i) {
    const uint64_t count = cfg.soak() ? std::numeric_limits<uint64_t>::max() : ShareOf(cfg.events, cfg.producers, i);
    threads.emplace_back(RunProducer, std::ref(bus), std::cref(cfg), i, count, std::cref(pace), &(*results)[i],
                         committed, &error);
  }
  for (std::thread& t : threads) t.join();
  return error.Get();
}

// ---- soak progress ----

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

double DiskMiB(const std::string& dir) { return MiB(walbus::tools::DirectoryBytes(dir)); }

struct SoakPeaks {
  double rss_mib = 0;
  // The peak over the first quarter of the soak: what memory rose to while
  // caches and memtables filled. Flat afterwards when rss_mib is no higher.
  double warmup_rss_mib = 0;
  double anon_rss_mib = 0;  // the peak of its anonymous part (process_stats.h)
  double disk_mib = 0;
  // At the last sample, since the soak started: what the process wrote to
  // the device, and the logical bytes committed (workload.h).
  double device_written_mib = 0;
  double logical_mib = 0;
  // At the last progress line, since the bus opened: what storage wrote
  // to its log, and to table files in flushes and in compactions.
  double log_mib = 0;
  double flush_mib = 0;
  double compaction_mib = 0;
};

// Samples memory and disk four times a second (for the peaks) and prints a
// progress line (see the top of the file) every cfg.report_every seconds
// from construction, and a last one on Stop().
class SoakReporter {
 public:
  SoakReporter(walbus::Bus& bus, const Config& cfg, SteadyClock::time_point start,
               const std::atomic<uint64_t>& committed)
      : bus_(bus),
        cfg_(cfg),
        start_(start),
        committed_(committed),
        device_start_(walbus::tools::DeviceBytesWritten()),
        logical_start_(LogicalBytesCommitted()),
        thread_([this] { Run(); }) {}
  ~SoakReporter() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // REQUIRES: Stop() returned.
  SoakPeaks peaks() const { return peaks_; }

 private:
  static constexpr auto kSampleEvery = std::chrono::milliseconds(250);

  void Run() {
    const auto report_every =
        std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(cfg_.report_every));
    auto next_report = start_ + report_every;
    auto last_report = start_;
    uint64_t last_events = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      const bool stopping =
          cv_.wait_until(lock, std::min(SteadyClock::now() + kSampleEvery, next_report), [this] { return stop_; });
      const double rss = walbus::tools::ResidentMiB();
      const double disk = DiskMiB(cfg_.dir);
      const double anon = walbus::tools::AnonymousResidentMiB();
      peaks_.rss_mib = std::max(peaks_.rss_mib, rss);
      peaks_.anon_rss_mib = std::max(peaks_.anon_rss_mib, anon);
      peaks_.disk_mib = std::max(peaks_.disk_mib, disk);
      peaks_.device_written_mib = MiB(walbus::tools::DeviceBytesWritten() - device_start_);
      peaks_.logical_mib = MiB(LogicalBytesCommitted() - logical_start_);
      const auto now = SteadyClock::now();
      if (std::chrono::duration<double>(now - start_).count() <= cfg_.soak_seconds / 4)
        peaks_.warmup_rss_mib = peaks_.rss_mib;
      if (!stopping && now < next_report) continue;
      const uint64_t events = committed_.load(std::memory_order_relaxed);
      const double interval = std::chrono::duration<double>(now - last_report).count();
      PrintLine(std::chrono::duration<double>(now - start_).count(), events,
                interval > 0 ? static_cast<double>(events - last_events) / interval : 0.0, rss, anon, disk,
                peaks_.device_written_mib);
      if (stopping) return;
      last_report = now;
      last_events = events;
      while (next_report <= now) next_report += report_every;
    }
  }

  // The sample of metric `name` in MiB, the one labelled `label_value`
  // when that is given (else the first); 0 when there is none.
  static double MetricMiB(const std::vector<walbus::MetricFamily>& metrics, const std::string& name,
                          std::string_view label_value = {}) {
    for (const walbus::MetricFamily& f : metrics) {
      if (f.name != name) continue;
      for (const walbus::MetricSample& sample : f.samples) {
        const bool labelled = !sample.labels.empty() && sample.labels[0].value == label_value;
        if (label_value.empty() || labelled) return sample.value / (1024.0 * 1024.0);
      }
    }
    return 0;
  }

  void PrintLine(double t, uint64_t events, double rate, double rss, double anon, double disk, double device) {
    const walbus::BusStats stats = bus_.Stats();
    const std::vector<walbus::MetricFamily> metrics = bus_.Metrics();
    const walbus::tools::MallocHeap heap = walbus::tools::MallocHeapMiB();
    peaks_.log_mib = MetricMiB(metrics, "walbus_storage_written_bytes_total", "log");
    peaks_.flush_mib = MetricMiB(metrics, "walbus_storage_written_bytes_total", "flush");
    peaks_.compaction_mib = MetricMiB(metrics, "walbus_storage_written_bytes_total", "compaction");
    uint64_t lag = 0, min_checkpoint = stats.last_seq, in_flight = 0;
    for (const walbus::SubscriberStats& sub : stats.subscribers) {
      const uint64_t checkpoint = std::min(sub.checkpoint, stats.last_seq);
      lag = std::max(lag, stats.last_seq - checkpoint);
      min_checkpoint = std::min(min_checkpoint, checkpoint);
      in_flight += sub.in_flight;
    }
    std::printf(
        "{\"t\":%.1f,\"events\":%llu,\"rate\":%.1f,\"rss_mib\":%.1f,\"anon_rss_mib\":%.1f,\"disk_mib\":%.1f,"
        "\"device_written_mib\":%.1f,\"lag_events\":%llu,"
        "\"outbox_backlog\":%llu,\"in_flight\":%llu,\"storage_cache_mib\":%.1f,\"memtable_mib\":%.1f,"
        "\"table_readers_mib\":%.1f,\"heap_in_use_mib\":%.1f,\"heap_free_mib\":%.1f}\n",
        t, static_cast<unsigned long long>(events), rate, rss, anon, disk, device, static_cast<unsigned long long>(lag),
        static_cast<unsigned long long>(stats.last_seq - min_checkpoint), static_cast<unsigned long long>(in_flight),
        MetricMiB(metrics, "walbus_storage_cache_bytes"), MetricMiB(metrics, "walbus_storage_memtable_bytes"),
        MetricMiB(metrics, "walbus_storage_table_readers_bytes"), heap.in_use_mib, heap.free_mib);
    std::fflush(stdout);
  }

  walbus::Bus& bus_;
  const Config& cfg_;
  const SteadyClock::time_point start_;
  const std::atomic<uint64_t>& committed_;
  const uint64_t device_start_;
  const uint64_t logical_start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  SoakPeaks peaks_;    // reporter thread until joined
  std::thread thread_;
};

// Runs the load and closes the bus; `seconds` covers publish and handling.
// In a soak, *peaks gets the highest RSS and disk size seen meanwhile.
Status RunLoad(const Config& cfg, std::vector<ProducerResult>* results, double* seconds, SoakPeaks* peaks) {
  std::unique_ptr<walbus::Bus> bus;
  if (Status s = OpenAt(cfg, cfg.dir, &bus); !s.ok()) return s;
  Status s = SubscribeAll(*bus, cfg.subscribers, HandleItem, StressRetries());
  if (s.ok()) s = bus->Start();
  const auto start = SteadyClock::now();
  std::atomic<uint64_t> committed{0};
  std::optional<SoakReporter> reporter;
  if (s.ok() && cfg.soak()) reporter.emplace(*bus, cfg, start, committed);
  if (s.ok()) s = RunProducers(*bus, cfg, start, results, &committed);
  if (s.ok()) s = bus->WaitIdle(kIdleTimeout);
  *seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  if (reporter) {
    reporter->Stop();
    *peaks = reporter->peaks();
  }
  Status closed = bus->Close();
  return s.ok() ? closed : s;
}

// What the bridge did, for the report.
struct BridgeReport {
  uint64_t published = 0;
  uint64_t republished = 0;  // PubAcks that said duplicate
  uint64_t ingested = 0;
  uint64_t duplicates = 0;  // deliveries the receiver had taken already
  uint64_t disconnects = 0;
  int server_kills = 0;
  int tails_dropped = 0;  // kills after which the stream lost its tail
  int sender_kills = 0;   // --kill-devices-every
  int receiver_kills = 0;
  walbus::jetstream::RelayStats relay;      // the last relay's
  walbus::jetstream::InboundStats inbound;  // the last inbound consumer's
};

// Short timeouts: a killed server costs the relay one request timeout.
walbus::jetstream::RelayOptions StressRelayOptions(const std::string& url) {
  walbus::jetstream::RelayOptions o;
  o.connection.url = url;
  o.connection.request_timeout = std::chrono::milliseconds(1000);
  o.connection.reconnect_wait = std::chrono::milliseconds(100);
  o.stream.name = kBridgeStream;
  o.stream.subjects = {std::string(kBridgePrefix) + ".>"};
  o.subject_prefix = kBridgePrefix;
  return o;
}

walbus::jetstream::InboundOptions StressInboundOptions(const std::string& url) {
  walbus::jetstream::InboundOptions o;
  o.connection.url = url;
  o.connection.request_timeout = std::chrono::milliseconds(1000);
  o.connection.reconnect_wait = std::chrono::milliseconds(100);
  o.stream = kBridgeStream;
  o.durable = "stress-receiver";
  o.filter_subject = std::string(kBridgePrefix) + ".>";
  o.ack_wait = std::chrono::seconds(5);
  // A gap not repaired within this fails the run (the checks see it)
  // instead of holding the subject for the default 5 minutes.
  o.gap_timeout = std::chrono::seconds(30);
  return o;
}

// The load across JetStream: producers on the sender, relay, inbound
// consumer, subscribers on the receiver. Returns once the receiver has
// handled every event the producers committed, with both buses closed.
Status RunBridgedLoad(const Config& cfg, const std::string& url, walbus::tools::NatsServer* server,
                      std::vector<ProducerResult>* results, double* seconds, BridgeReport* report) {
  std::unique_ptr<walbus::Bus> sender, receiver;
  if (Status s = OpenAt(cfg, cfg.dir, &sender); !s.ok()) return s;
  if (Status s = OpenAt(cfg, cfg.handler_dir(), &receiver); !s.ok()) return s;
  std::unique_ptr<walbus::jetstream::Relay> relay;
  Status s = walbus::jetstream::Relay::Attach(sender.get(), StressRelayOptions(url), &relay);
  if (s.ok()) s = SubscribeAll(*receiver, cfg.subscribers, HandleItem, StressRetries());
  const walbus::jetstream::InboundOptions inbound_options = StressInboundOptions(url);
  std::unique_ptr<walbus::jetstream::Inbound> inbound;
  if (s.ok()) s = walbus::jetstream::Inbound::Start(receiver.get(), inbound_options, &inbound);
  if (s.ok()) s = sender->Start();
  if (s.ok()) s = receiver->Start();
  const auto start = SteadyClock::now();
  ServerKiller killer(server, cfg.kill_server_every, cfg.lose_acked, cfg.seed);
  std::atomic<uint64_t> committed{0};
  if (s.ok()) s = RunProducers(*sender, cfg, start, results, &committed);
  if (s.ok()) s = sender->WaitIdle(kIdleTimeout);  // the relay published everything
  const uint64_t sent = sender->Stats().last_seq;
  const auto deadline =
      start + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(cfg.timeout));
  while (s.ok() && receiver->Stats().last_seq < sent) {
    if (SteadyClock::now() > deadline) s = Status::TimedOut("the receiver did not get every event");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (s.ok()) s = receiver->WaitIdle(kIdleTimeout);
  *seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  killer.Stop();
  report->server_kills = killer.kills();
  report->tails_dropped = killer.tails_dropped();
  if (inbound) {
    inbound->Stop();
    report->inbound = inbound->Stats();
    report->ingested = report->inbound.ingested;
    report->duplicates = report->inbound.duplicates;
  }
  if (relay) {
    report->relay = relay->Stats();
    report->published = report->relay.published;
    report->republished = report->relay.duplicates;
    report->disconnects = report->relay.disconnects;
  }
  Status closed_sender = sender->Close();
  Status closed_receiver = receiver->Close();
  if (s.ok()) s = closed_sender;
  return s.ok() ? closed_receiver : s;
}

// ---- the bridge with its devices as processes (--kill-devices-every) ----

// Where a device process leaves what its bridge side did (one line of
// counts), rewritten four times a second and at its end, so that a
// killed one leaves what it did until shortly before: one file a process.
std::string StatsPrefix(const Config& cfg, const std::string& role) { return cfg.dir + "-" + role + ".stats."; }

// Writes `counts()` to this process's file until destroyed.
class StatsWriter {
 public:
  StatsWriter(const Config& cfg, const std::string& role, std::function<std::string()> counts)
      : path_(StatsPrefix(cfg, role) + std::to_string(::getpid())), counts_(std::move(counts)) {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) Write();
    });
  }
  ~StatsWriter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    Write();
  }

 private:
  void Write() {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << counts_() << "\n";
    std::error_code ec;
    fs::rename(tmp, path_, ec);
  }
  const std::string path_;
  const std::function<std::string()> counts_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

std::string Counts(std::initializer_list<uint64_t> values) {
  std::string out;
  for (uint64_t v : values) out += std::to_string(v) + " ";
  return out;
}

// The sender process: commits its share of --events (what the database
// already holds counts: a restarted sender goes on where the killed one
// stopped), then keeps relaying and repairing until SIGTERM.
int RunSenderRole(const Config& cfg) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);  // before any thread: SIGTERM is taken by sigwait alone
  std::unique_ptr<walbus::Bus> bus;
  std::unique_ptr<walbus::jetstream::Relay> relay;
  Status s = OpenAt(cfg, cfg.dir, &bus);
  if (s.ok()) s = walbus::jetstream::Relay::Attach(bus.get(), StressRelayOptions(cfg.role_url), &relay);
  if (s.ok()) s = bus->Start();
  if (!s.ok()) {
    std::cerr << "walbus-stress sender: " << s.ToString() << "\n";
    return kExitError;
  }
  std::optional<StatsWriter> stats;
  stats.emplace(cfg, "sender", [&relay] {
    const walbus::jetstream::RelayStats r = relay->Stats();
    return Counts({r.published, r.duplicates, r.disconnects, r.server_loss_detected, r.repaired, r.unrepairable_losses,
                   r.journal_checks});
  });
  const uint64_t had = bus->Stats().last_seq;
  std::atomic<uint64_t> next{had};
  FirstError error;
  std::vector<std::thread> producers;
  for (size_t i = 0; i < cfg.producers; ++i) {
    producers.emplace_back([&, i] {
      std::seed_seq seq{cfg.seed, static_cast<uint64_t>(i), had};
      std::mt19937_64 rng(seq);
      std::uniform_int_distribution<size_t> pick(0, cfg.subjects - 1);
      while (!error.failed() && next.fetch_add(1) < cfg.events) {
        const std::string subject = SubjectName(pick(rng));
        const std::string payload = RandomPayload(rng, cfg.payload_bytes);
        uint64_t version = 0;
        walbus::Receipt receipt;
        Status c;
        while ((c = CommitItem(*bus, subject, payload, &version, &receipt)).IsConflict()) {
        }
        if (!c.ok()) error.Set(c);
      }
    });
  }
  for (auto& t : producers) t.join();
  if (error.failed()) {
    std::cerr << "walbus-stress sender: " << error.Get().ToString() << "\n";
    return kExitError;
  }
  int sig = 0;
  sigwait(&term, &sig);
  s = bus->WaitIdle(kIdleTimeout);
  stats.reset();
  relay.reset();
  Status closed = bus->Close();
  return s.ok() && closed.ok() ? kExitPassed : kExitError;
}

// The receiver process: takes events in and handles them until it holds
// all of --events and has handled them, then ends.
int RunReceiverRole(const Config& cfg) {
  std::unique_ptr<walbus::Bus> bus;
  std::unique_ptr<walbus::jetstream::Inbound> inbound;
  Status s = OpenAt(cfg, cfg.handler_dir(), &bus);
  if (s.ok()) s = SubscribeAll(*bus, cfg.subscribers, HandleItem, StressRetries());
  if (s.ok()) s = walbus::jetstream::Inbound::Start(bus.get(), StressInboundOptions(cfg.role_url), &inbound);
  if (s.ok()) s = bus->Start();
  std::optional<StatsWriter> stats;
  if (s.ok()) {
    stats.emplace(cfg, "receiver", [&inbound] {
      const walbus::jetstream::InboundStats in = inbound->Stats();
      return Counts({in.ingested, in.duplicates, in.held, in.gaps, in.skipped_positions, in.late, in.consumer_resets});
    });
  }
  while (s.ok() && !(bus->Stats().last_seq >= cfg.events && bus->WaitIdle(std::chrono::seconds(1)).ok())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!s.ok()) {
    std::cerr << "walbus-stress receiver: " << s.ToString() << "\n";
    return kExitError;
  }
  inbound->Stop();
  stats.reset();
  Status closed = bus->Close();
  return closed.ok() ? kExitPassed : kExitError;
}

// A device process of this run: this program again, with --role.
class Device {
 public:
  Device(const Config& cfg, std::string role, const std::string& url) : role_(std::move(role)) {
    const auto n = [](auto v) { return std::to_string(v); };
    args_ = {"/proc/self/exe",
             "--role",
             role_,
             "--role-url",
             url,
             "--bridge",
             cfg.bridge,
             "--dir",
             cfg.dir,
             "--events",
             n(cfg.events),
             "--producers",
             n(cfg.producers),
             "--subjects",
             n(cfg.subjects),
             "--subscribers",
             n(cfg.subscribers),
             "--payload-bytes",
             n(cfg.payload_bytes),
             "--durability",
             cfg.durability,
             "--seed",
             n(cfg.seed),
             "--workers",
             n(cfg.workers),
             "--memory-budget-mib",
             n(cfg.memory_budget_mib)};
  }
  ~Device() { Kill(); }

  bool Start() {
    std::vector<char*> argv;
    for (std::string& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(2, 1);  // the run's stdout is its JSON report alone
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid_ > 0;
  }
  void Kill() { Signal(SIGKILL); }
  // SIGTERM and wait; the exit status, or -1.
  int Stop() { return Signal(SIGTERM); }
  // The exit status once it ended by itself, else nullopt.
  std::optional<int> Ended() {
    int status = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  const std::string& role() const { return role_; }

 private:
  int Signal(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string role_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
};

// The sums of the counts every process of `role` left.
template <size_t N>
void SumCounts(const Config& cfg, const std::string& role, std::array<uint64_t, N>* sums) {
  const std::string prefix = StatsPrefix(cfg, role);
  const fs::path dir = fs::path(prefix).parent_path();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string path = entry.path().string();
    if (!path.starts_with(prefix) || path.ends_with(".tmp")) continue;
    std::ifstream in(path);
    for (uint64_t& sum : *sums) {
      uint64_t v = 0;
      in >> v;
      sum += v;
    }
    fs::remove(entry.path(), ec);
  }
}

// The load across JetStream with sender and receiver as processes, one of
// them SIGKILLed about every --kill-devices-every seconds (and the server
// with --kill-server-every). Returns once the receiver has taken and
// handled every event, with both processes ended.
Status RunBridgedDevices(const Config& cfg, const std::string& url, walbus::tools::NatsServer* server,
                         std::vector<ProducerResult>* results, double* seconds, BridgeReport* report) {
  Device sender(cfg, "sender", url), receiver(cfg, "receiver", url);
  if (!sender.Start() || !receiver.Start()) return Status::IOError("could not start the device processes");
  const auto start = SteadyClock::now();
  ServerKiller killer(server, cfg.kill_server_every, cfg.lose_acked, cfg.seed);
  std::mt19937_64 rng(cfg.seed ^ 0xd371ce);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  auto next_kill = [&] {
    return SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(cfg.kill_devices_every * jitter(rng)));
  };
  auto kill_at = next_kill();
  const auto deadline =
      start + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(cfg.timeout));
  Status s;
  while (s.ok()) {
    if (std::optional<int> rc = receiver.Ended()) {
      if (*rc != 0) s = Status::IOError("the receiver process failed (exit " + std::to_string(*rc) + ")");
      break;
    }
    if (std::optional<int> rc = sender.Ended()) {
      s = Status::IOError("the sender process ended by itself (exit " + std::to_string(*rc) + ")");
      break;
    }
    if (SteadyClock::now() > deadline) {
      s = Status::TimedOut("the receiver did not take and handle every event");
      break;
    }
    if (SteadyClock::now() >= kill_at) {
      Device& victim = rng() % 2 == 0 ? sender : receiver;
      victim.Kill();
      ++(victim.role() == "sender" ? report->sender_kills : report->receiver_kills);
      if (!victim.Start()) s = Status::IOError("could not start the " + victim.role() + " again");
      kill_at = next_kill();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  killer.Stop();
  report->server_kills = killer.kills();
  report->tails_dropped = killer.tails_dropped();
  const int sender_rc = sender.Stop();
  receiver.Kill();
  if (s.ok() && sender_rc != 0) s = Status::IOError("the sender process failed at its end");
  std::array<uint64_t, 7> r{}, in{};
  SumCounts(cfg, "sender", &r);
  SumCounts(cfg, "receiver", &in);
  report->published = r[0];
  report->republished = r[1];
  report->disconnects = r[2];
  report->relay.server_loss_detected = r[3];
  report->relay.repaired = r[4];
  report->relay.unrepairable_losses = r[5];
  report->relay.journal_checks = r[6];
  report->ingested = in[0];
  report->duplicates = in[1];
  report->inbound.held = in[2];
  report->inbound.gaps = in[3];
  report->inbound.skipped_positions = in[4];
  report->inbound.late = in[5];
  report->inbound.consumer_resets = in[6];
  ProducerResult all;
  all.events = cfg.events;
  all.newest_seq = cfg.events;
  results->assign(1, all);
  return s;
}

// ---- verification, on a reopened bus whose handlers never run ----

walbus::Outcome NeverHandle(const walbus::Event&, walbus::HandlerContext&) {
  return walbus::Outcome::RetryAfter(kIdleTimeout);
}

void Report(std::string_view check, const std::string& what) {
  std::cerr << "walbus-stress: " << check << " failed: " << what << "\n";
}

uint64_t NewestSeq(const std::vector<ProducerResult>& results) {
  uint64_t newest = 0;
  for (const ProducerResult& r : results) newest = std::max(newest, r.newest_seq);
  return newest;
}

void CheckCheckpoints(walbus::Bus& bus, const Config& cfg, const std::vector<ProducerResult>& results, Checks* checks) {
  walbus::BusStats stats = bus.Stats();
  if (stats.last_seq != NewestSeq(results)) {
    checks->all_delivered = false;
    Report("all_delivered",
           "last_seq " + std::to_string(stats.last_seq) + ", newest receipt " + std::to_string(NewestSeq(results)));
  }
  for (size_t i = 0; i < cfg.subscribers; ++i) {
    const std::string sub = SubscriberName(i);
    auto it = std::find_if(stats.subscribers.begin(), stats.subscribers.end(),
                           [&](const walbus::SubscriberStats& st) { return st.name == sub; });
    if (it == stats.subscribers.end()) {
      checks->all_delivered = false;
      Report("all_delivered", sub + " missing from Stats()");
    } else if (it->checkpoint != stats.last_seq) {
      checks->all_delivered = false;
      Report("all_delivered",
             sub + " checkpoint " + std::to_string(it->checkpoint) + ", last_seq " + std::to_string(stats.last_seq));
    }
  }
}

// Every subscriber passed every event, so the outbox must have been removed
// (by range) when the load's bus closed, but for the newest --retain-events
// of the `events` committed.
Status CheckOutboxDrained(const Config& cfg, uint64_t events, Checks* checks) {
  const uint64_t expected = std::min<uint64_t>(cfg.retain_events, events);
  for (const std::string& dir : {cfg.dir, cfg.handler_dir()}) {
    size_t left = 0;
    Status s = CountOutbox(dir, &left);
    if (!s.ok()) return s;
    if (left != expected) {
      checks->outbox_drained = false;
      Report("outbox_drained",
             std::to_string(left) + " outbox entries left in " + dir + ", expected " + std::to_string(expected));
    }
  }
  return Status::OK();
}

uint64_t CountOf(const std::vector<ProducerResult>& results, std::vector<walbus::EventId> ProducerResult::*list) {
  uint64_t n = 0;
  for (const ProducerResult& r : results) n += (r.*list).size();
  return n;
}

// Every poison event, and nothing else, ended as a dead letter; clean
// subjects were never held up by the failing ones.
void CheckFaults(walbus::Bus& bus, const Config& cfg, const std::vector<ProducerResult>& results, Checks* checks) {
  const uint64_t poison = CountOf(results, &ProducerResult::poison);
  for (const walbus::SubscriberStats& st : bus.Stats().subscribers) {
    if (st.dead_lettered != poison) {
      checks->poison_dead_lettered = false;
      Report("poison_dead_lettered", st.name + " has " + std::to_string(st.dead_lettered) + " dead letters for " +
                                         std::to_string(poison) + " poison events");
    }
  }
  // Across a bridge the delay includes the server's outages: not checked.
  if (!cfg.bridged() && MaxItemLatencyMs() > cfg.max_clean_latency_ms) {
    checks->others_not_delayed = false;
    Report("others_not_delayed", "a clean event waited " + std::to_string(MaxItemLatencyMs()) + " ms");
  }
}

Status Verify(const Config& cfg, const std::vector<ProducerResult>& results, Checks* checks) {
  std::unique_ptr<walbus::Bus> bus, sender;
  if (Status s = OpenAt(cfg, cfg.handler_dir(), &bus); !s.ok()) return s;
  if (cfg.bridged()) {
    if (Status s = OpenAt(cfg, cfg.dir, &sender); !s.ok()) return s;
  }
  // Registered so Stats() reports them; Start() is never called.
  Status s = SubscribeAll(*bus, cfg.subscribers, NeverHandle, StressRetries());
  if (s.ok()) CheckCheckpoints(*bus, cfg, results, checks);
  if (s.ok()) CheckFaults(*bus, cfg, results, checks);
  walbus::Transaction tx = bus->Begin();  // Read only; never committed.
  walbus::Transaction state = (sender ? *sender : *bus).Begin();
  CheckResult subjects;
  if (s.ok()) s = CheckSubjects(state, tx, cfg.subscribers, cfg.subjects, &subjects);
  for (const std::string& f : subjects.failures) Report("subjects", f);
  checks->exactly_once &= subjects.exactly_once;
  checks->per_subject_order &= subjects.per_subject_order;
  checks->all_delivered &= subjects.all_delivered;
  for (size_t i = 0; s.ok() && i < cfg.subscribers; ++i) {
    for (const ProducerResult& r : results) {
      for (const walbus::EventId& id : r.transient) {
        walbus::Result<uint64_t> n = FaultEffects(tx, SubscriberName(i), id);
        if (!n.ok()) {
          s = n.status();
          break;
        }
        if (*n != 1) {
          checks->exactly_once = false;
          Report("exactly_once",
                 SubscriberName(i) + " transient " + id.ToString() + " effect count " + std::to_string(*n));
        }
      }
    }
  }
  Status closed = bus->Close();
  if (s.ok()) s = closed;
  if (sender) {
    closed = sender->Close();
    if (s.ok()) s = closed;
  }
  uint64_t events = 0;
  for (const ProducerResult& r : results) events += r.events;
  if (s.ok()) s = CheckOutboxDrained(cfg, events, checks);
  return s;
}

// ---- output ----

void PrintJson(const Config& cfg, const std::vector<ProducerResult>& results, double seconds, const SoakPeaks& peaks,
               const BridgeReport& bridge, const Checks& checks) {
  uint64_t events = 0;
  uint64_t conflicts = 0;
  for (const ProducerResult& r : results) {
    events += r.events;
    conflicts += r.conflicts;
  }
  const double rate = seconds > 0 ? static_cast<double>(events) / seconds : 0.0;
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::printf("{");
  if (cfg.soak()) {
    std::printf(
        "\"mode\":\"soak\",\"soak_seconds\":%.1f,\"target_rate\":%.1f,\"memory_budget_mib\":%zu,"
        "\"peak_rss_mib\":%.1f,\"warmup_peak_rss_mib\":%.1f,\"peak_anon_rss_mib\":%.1f,\"peak_disk_mib\":%.1f,"
        "\"device_written_mib\":%.1f,\"logical_mib\":%.1f,\"device_bytes_per_logical_byte\":%.2f,"
        "\"storage_log_mib\":%.1f,\"storage_flush_mib\":%.1f,\"storage_compaction_mib\":%.1f,",
        cfg.soak_seconds, cfg.rate,
        cfg.memory_budget_mib > 0 ? cfg.memory_budget_mib : walbus::kDefaultMemoryBudget >> 20, peaks.rss_mib,
        peaks.warmup_rss_mib, peaks.anon_rss_mib, peaks.disk_mib, peaks.device_written_mib, peaks.logical_mib,
        peaks.logical_mib > 0 ? peaks.device_written_mib / peaks.logical_mib : 0.0, peaks.log_mib, peaks.flush_mib,
        peaks.compaction_mib);
  }
  if (cfg.bridged()) {
    std::printf(
        "\"mode\":\"bridge\",\"relay_published\":%llu,\"relay_republished\":%llu,"
        "\"inbound_ingested\":%llu,\"inbound_duplicates\":%llu,\"relay_disconnects\":%llu,"
        "\"server_kills\":%d,\"server_tails_dropped\":%d,\"sender_kills\":%d,\"receiver_kills\":%d,",
        static_cast<unsigned long long>(bridge.published), static_cast<unsigned long long>(bridge.republished),
        static_cast<unsigned long long>(bridge.ingested), static_cast<unsigned long long>(bridge.duplicates),
        static_cast<unsigned long long>(bridge.disconnects), bridge.server_kills, bridge.tails_dropped,
        bridge.sender_kills, bridge.receiver_kills);
    const auto& r = bridge.relay;
    const auto& in = bridge.inbound;
    std::printf(
        "\"server_loss_detected\":%llu,\"server_loss_repaired\":%llu,\"server_loss_unrepairable\":%llu,"
        "\"journal_checks\":%llu,\"inbound_held\":%llu,\"inbound_gaps\":%llu,"
        "\"inbound_skipped_positions\":%llu,\"inbound_late\":%llu,\"consumer_resets\":%llu,",
        static_cast<unsigned long long>(r.server_loss_detected), static_cast<unsigned long long>(r.repaired),
        static_cast<unsigned long long>(r.unrepairable_losses), static_cast<unsigned long long>(r.journal_checks),
        static_cast<unsigned long long>(in.held), static_cast<unsigned long long>(in.gaps),
        static_cast<unsigned long long>(in.skipped_positions), static_cast<unsigned long long>(in.late),
        static_cast<unsigned long long>(in.consumer_resets));
  }
  std::printf(
      "\"seed\":%llu,\"producers\":%zu,\"subscribers\":%zu,\"subjects\":%zu,\"events\":%llu,"
      "\"conflicts\":%llu,\"seconds\":%.3f,\"events_per_second\":%.1f,"
      "\"poison\":%llu,\"transient\":%llu,\"max_clean_latency_ms\":%lld,"
      "\"checks\":{\"exactly_once\":%s,\"per_subject_order\":%s,\"all_delivered\":%s,"
      "\"outbox_drained\":%s,\"poison_dead_lettered\":%s,\"others_not_delayed\":%s},"
      "\"passed\":%s}\n",
      static_cast<unsigned long long>(cfg.seed), cfg.producers, cfg.subscribers, cfg.subjects,
      static_cast<unsigned long long>(events), static_cast<unsigned long long>(conflicts), seconds, rate,
      static_cast<unsigned long long>(CountOf(results, &ProducerResult::poison)),
      static_cast<unsigned long long>(CountOf(results, &ProducerResult::transient)),
      static_cast<long long>(MaxItemLatencyMs()), b(checks.exactly_once), b(checks.per_subject_order),
      b(checks.all_delivered), b(checks.outbox_drained), b(checks.poison_dead_lettered), b(checks.others_not_delayed),
      b(checks.passed()));
}

int Fail(const Config& cfg, const Status& s) {
  std::cerr << "walbus-stress: " << s.ToString() << "\n";
  CleanUp(cfg, /*passed=*/false);
  return kExitError;
}

}  // namespace

static int Main(int argc, char** argv) {
  Config cfg;
  if (std::optional<int> rc = ParseArgs(argc, argv, &cfg)) return *rc;
  if (cfg.role == "sender") return RunSenderRole(cfg);
  if (cfg.role == "receiver") return RunReceiverRole(cfg);
  std::cerr << "walbus-stress: seed " << cfg.seed << "\n";
  if (Status s = PrepareDir(&cfg); !s.ok()) {
    std::cerr << "walbus-stress: " << s.ToString() << "\n";
    return kExitError;
  }

  std::vector<ProducerResult> results;
  double seconds = 0;
  SoakPeaks peaks;
  BridgeReport bridge;
  if (cfg.bridged()) {
    std::optional<walbus::tools::NatsServer> server;
    std::string url = cfg.bridge;
    if (cfg.bridge == "local") {
      // The server's store is this run's alone: a store shared between runs
      // hands a fresh receiver the streams and consumers of earlier runs.
      server.emplace(cfg.nats_dir());
      if (!server->Start()) return Fail(cfg, Status::IOError("could not start a local nats-server"));
      url = server->url();
    }
    walbus::tools::NatsServer* owned = server ? &*server : nullptr;
    const Status s = cfg.devices() ? RunBridgedDevices(cfg, url, owned, &results, &seconds, &bridge)
                                   : RunBridgedLoad(cfg, url, owned, &results, &seconds, &bridge);
    if (!s.ok()) return Fail(cfg, s);
  } else if (Status s = RunLoad(cfg, &results, &seconds, &peaks); !s.ok()) {
    return Fail(cfg, s);
  }
  Checks checks;
  if (Status s = Verify(cfg, results, &checks); !s.ok()) return Fail(cfg, s);

  PrintJson(cfg, results, seconds, peaks, bridge, checks);
  CleanUp(cfg, checks.passed());
  return checks.passed() ? kExitPassed : kExitCheckFailed;
}

int main(int argc, char** argv) { return walbus::tools::GuardedMain("walbus-stress", Main, argc, argv); }
