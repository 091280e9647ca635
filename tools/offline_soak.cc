// walbus-offline-soak: days offline on a small disk, compressed. A device
// bus with a disk budget and a relay whose NATS server is down commits
// events of two types at full speed: readings, and now and then a command's
// acknowledgement, which the relay sends first (RelayOptions::priorities).
// Once the budget is reached, commits are refused, or with --drop-oldest
// the oldest readings give way (Options::drop_oldest_types). Then the
// server starts, and the backlog drains.
//
// Measured: the peak size of the database directory (every file: tables,
// write-ahead log, MANIFEST, compaction outputs) against the budget, the
// peak resident set, whether every acknowledgement reached the stream
// before the readings' backlog drained, and how long the drain took.
// Checked: the stream holds every committed event once, but the dropped
// readings (every acknowledgement), each type's subjects in commit order;
// a failed check exits with 1.
//
// Prints progress on stderr and one JSON object on the last line of
// stdout (bench/run_suite.py's "offline" group reads it).
#include <stdlib.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "tools/guarded_main.h"
#include "tools/nats_server.h"
#include "tools/process_stats.h"
#include "tools/stream_reader.h"
#include "walbus/bus.h"
#include "walbus/jetstream.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kReadingType[] = "device.reading-taken.v1";
constexpr char kAckType[] = "device.command-acknowledged.v1";
constexpr char kStream[] = "DEVICE";

struct Config {
  uint64_t events = 1000000;
  uint64_t disk_budget_mib = 64;
  uint64_t memory_budget_mib = 16;
  size_t payload_bytes = 200;
  uint64_t subjects = 200;
  uint64_t ack_every = 1000;
  double timeout = 600;
  std::string dir;
  bool keep = false;
  uint64_t seed = 0;
  bool drop_oldest = false;  // the readings give way (Options::drop_oldest_types)
  // RelayOptions::max_journal_bytes, MiB; 0: an 8th of the disk budget.
  uint64_t max_journal_mib = 0;
  uint64_t confirm_after_ms = 10000;  // RelayOptions::confirm_after
};

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Samples the directory's size, the resident set and the heap every 50 ms
// until stopped, keeping the peaks. A measuring thread of the tool's own.
class PeakSampler {
 public:
  explicit PeakSampler(std::string dir) : dir_(std::move(dir)), thread_([this] { Run(); }) {}
  ~PeakSampler() { Stop(); }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  struct Peaks {
    uint64_t disk = 0;
    double rss_mib = 0;
    double anon_rss_mib = 0;  // heap and stacks: the libraries' code is not in it
    double heap_mib = 0;      // what the allocator had handed out and not got back
  };
  // The peaks since the last call (or the start), and a new phase from now.
  Peaks TakePeaks() {
    std::lock_guard<std::mutex> lock(mu_);
    Peaks peaks = peaks_;
    peaks_ = Peaks{};
    Sample();
    return peaks;
  }

 private:
  void Sample() {
    peaks_.disk = std::max(peaks_.disk, walbus::tools::DirectoryBytes(dir_));
    peaks_.rss_mib = std::max(peaks_.rss_mib, walbus::tools::ResidentMiB());
    peaks_.anon_rss_mib = std::max(peaks_.anon_rss_mib, walbus::tools::AnonymousResidentMiB());
    peaks_.heap_mib = std::max(peaks_.heap_mib, walbus::tools::MallocHeapMiB().in_use_mib);
  }
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    do {
      Sample();
    } while (!cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_; }));
  }

  const std::string dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Peaks peaks_;
  std::thread thread_;  // last: starts once the rest is built
};

// What the offline phase committed and had refused, by type.
struct Committed {
  std::map<std::string, uint64_t> committed, refused;
  uint64_t dropped = 0;  // readings the budget dropped (BusStats::dropped)
};

// Commits cfg.events events, one per transaction, until done; refusals by
// the disk budget are counted, any other failure ends the run.
walbus::Status CommitOffline(walbus::Bus& bus, const Config& cfg, Committed* out) {
  std::mt19937_64 rng(cfg.seed);
  std::string payload(cfg.payload_bytes, '\0');
  uint64_t acks = 0;
  for (uint64_t i = 0; i < cfg.events; ++i) {
    const bool ack = i % cfg.ack_every == cfg.ack_every - 1;
    walbus::EventSpec e;
    e.type = ack ? kAckType : kReadingType;
    e.subject = ack ? "cmd-" + std::to_string(acks++) : "sensor-" + std::to_string(i % cfg.subjects);
    for (char& c : payload) c = static_cast<char>(rng());
    e.data = std::to_string(i) + ":" + payload;
    walbus::Transaction tx = bus.Begin();
    if (auto published = tx.Publish(e); !published.ok()) return published.status();
    walbus::Result<walbus::Receipt> r = tx.Commit();
    if (r.ok()) {
      ++out->committed[e.type];
    } else if (r.status().code() == walbus::Status::Code::kResourceExhausted) {
      ++out->refused[e.type];
    } else {
      return r.status();
    }
  }
  return walbus::Status::OK();
}

// What the stream holds, checked against what was committed.
struct StreamCheck {
  std::string problem;                   // empty: every event once, in order
  uint64_t readings_after_last_ack = 0;  // readings the stream stored after the last acknowledgement
};

StreamCheck CheckStream(const std::string& url, const Committed& committed) {
  StreamCheck check;
  const auto messages = walbus::tools::ReadStream(url, kStream, "walbus.>");
  uint64_t expected = 0;
  for (const auto& [type, n] : committed.committed) expected += n;
  expected -= committed.dropped;
  if (messages.size() != expected) {
    check.problem = "the stream holds " + std::to_string(messages.size()) + " messages, not the " +
                    std::to_string(expected) + " committed";
    return check;
  }
  std::set<std::string> ids;
  std::map<std::string, uint64_t> last_by_subject;
  uint64_t acks = 0;
  for (const auto& m : messages) {
    if (!ids.insert(m.headers.at("ce-id")).second) check.problem = "twice in the stream: " + m.headers.at("ce-id");
    const std::string key = m.headers.at("ce-type") + "/" + m.headers.at("ce-subject");
    const uint64_t n = std::stoull(m.data.substr(0, m.data.find(':')));
    if (last_by_subject.contains(key) && last_by_subject[key] >= n) check.problem = "out of order on " + key;
    last_by_subject[key] = n;
    if (m.headers.at("ce-type") == kAckType) {
      check.readings_after_last_ack = 0;
      ++acks;
    } else {
      ++check.readings_after_last_ack;
    }
  }
  if (check.problem.empty() && acks != committed.committed.at(kAckType)) {
    check.problem = "the stream holds " + std::to_string(acks) + " acknowledgements, not the " +
                    std::to_string(committed.committed.at(kAckType)) + " committed";
  }
  return check;
}

// A device: a bus within the budgets, with a relay whose levels are the
// readings (0) and the acknowledgements (2).
struct Device {
  std::unique_ptr<walbus::Bus> bus;
  std::unique_ptr<walbus::jetstream::Relay> relay;
};

walbus::Status OpenDevice(const Config& cfg, const std::string& db_dir, const std::string& url, Device* device) {
  walbus::Options options;
  options.dir = db_dir;
  options.durability = walbus::Durability::kBuffered;
  options.disk_budget = cfg.disk_budget_mib << 20;
  options.memory_budget = cfg.memory_budget_mib << 20;
  options.column_families = {"jetstream"};
  if (cfg.drop_oldest) options.drop_oldest_types = {kReadingType};
  if (walbus::Status s = walbus::Bus::Open(options, &device->bus); !s.ok()) return s;
  walbus::jetstream::RelayOptions relay;
  relay.connection.url = url;
  relay.connection.reconnect_wait = std::chrono::milliseconds(100);
  relay.stream.name = kStream;
  relay.stream.subjects = {"walbus.>"};
  relay.priorities = {{kAckType, 2}};
  // The journal holds a full copy of what was relayed for confirm_after:
  // bounded, it leaves the drain room within the budget.
  relay.max_journal_bytes = cfg.max_journal_mib != 0 ? cfg.max_journal_mib << 20 : options.disk_budget / 8;
  relay.confirm_after = std::chrono::milliseconds(cfg.confirm_after_ms);
  if (walbus::Status s = walbus::jetstream::Relay::Attach(device->bus.get(), relay, &device->relay); !s.ok()) {
    return s;
  }
  return device->bus->Start();
}

// The drain after the server came back.
struct Drain {
  double acks_seconds = -1;         // until every acknowledgement was sent; -1: never
  uint64_t readings_sent_then = 0;  // readings sent by then
  double seconds = 0;               // until the bus was idle
  walbus::Status idle;              // what waiting for it said
};

Drain DrainBacklog(Device& device, walbus::tools::NatsServer& server, uint64_t acks, double timeout) {
  Drain drain;
  const Clock::time_point online = Clock::now();
  if (!server.Start()) {
    drain.idle = walbus::Status::IOError("the NATS server did not start");
    return drain;
  }
  while (SecondsSince(online) < timeout) {
    const auto levels = device.relay->Levels();
    if (levels.size() == 2 && levels[1].stats.published >= acks) {
      drain.acks_seconds = SecondsSince(online);
      drain.readings_sent_then = levels[0].stats.published;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  drain.idle = device.bus->WaitIdle(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(timeout)));
  drain.seconds = SecondsSince(online);
  return drain;
}

// The result line (bench/run_suite.py reads its keys).
void PrintResult(const Config& cfg, Committed& committed, const PeakSampler::Peaks& offline,
                 const PeakSampler::Peaks& draining, const Drain& drain, const StreamCheck& check,
                 double offline_seconds) {
  const uint64_t acks = committed.committed[kAckType], readings = committed.committed[kReadingType];
  const uint64_t kept = readings - std::min(readings, committed.dropped);  // not dropped
  const uint64_t waiting = kept - std::min(kept, drain.readings_sent_then);
  const uint64_t refused = committed.refused[kReadingType] + committed.refused[kAckType];
  const bool overtakes = drain.acks_seconds >= 0 && waiting > 0;
  const double budget = static_cast<double>(cfg.disk_budget_mib << 20);
  const uint64_t total = readings + acks;
  std::printf("{\"events\":%" PRIu64 ",\"committed\":%" PRIu64 ",\"committed_acks\":%" PRIu64 ",\"refused\":%" PRIu64
              ",\"dropped\":%" PRIu64 ",\"disk_budget_mib\":%" PRIu64
              ",\"offline_disk_peak_mib\":%.2f,\"offline_disk_peak_vs_budget\":%.3f"
              ",\"offline_rss_mib\":%.1f,\"drain_disk_peak_mib\":%.2f,\"drain_disk_peak_vs_budget\":%.3f"
              ",\"drain_rss_mib\":%.1f,\"offline_anon_rss_mib\":%.1f,\"drain_anon_rss_mib\":%.1f"
              ",\"offline_heap_mib\":%.1f,\"drain_heap_mib\":%.1f,\"relay_priority_overtakes\":%s"
              ",\"readings_waiting_when_acks_done\":%" PRIu64 ",\"readings_after_last_ack\":%" PRIu64
              ",\"acks_seconds\":%.2f,\"drain_seconds\":%.2f"
              ",\"drain_events_per_second\":%.0f,\"offline_seconds\":%.2f}\n",
              cfg.events, total, acks, refused, committed.dropped, cfg.disk_budget_mib, MiB(offline.disk),
              static_cast<double>(offline.disk) / budget, offline.rss_mib, MiB(draining.disk),
              static_cast<double>(draining.disk) / budget, draining.rss_mib, offline.anon_rss_mib,
              draining.anon_rss_mib, offline.heap_mib, draining.heap_mib, overtakes ? "true" : "false", waiting,
              check.readings_after_last_ack, drain.acks_seconds, drain.seconds,
              static_cast<double>(total) / drain.seconds, offline_seconds);
  std::cerr << "online: acknowledgements all in the stream after " << drain.acks_seconds << " s, with " << waiting
            << " readings still waiting; drained in " << drain.seconds << " s\n";
}

// Runs in `root` (its db/ and nats/); 0 when the stream holds what was
// committed, 1 when not, 2 when the run could not be made.
int RunIn(const Config& cfg, const std::string& root) {
  const std::string db_dir = root + "/db";
  fs::create_directories(root + "/nats");
  walbus::tools::NatsServer server(root + "/nats");
  Device device;
  if (walbus::Status s = OpenDevice(cfg, db_dir, server.url(), &device); !s.ok()) {
    std::cerr << "open: " << s.ToString() << "\n";
    return 2;
  }
  PeakSampler peaks(db_dir);
  const Clock::time_point offline_start = Clock::now();
  Committed committed;
  if (walbus::Status s = CommitOffline(*device.bus, cfg, &committed); !s.ok()) {
    std::cerr << "commit: " << s.ToString() << "\n";
    return 2;
  }
  const double offline_seconds = SecondsSince(offline_start);
  committed.dropped = device.bus->Stats().dropped;
  const PeakSampler::Peaks offline = peaks.TakePeaks();
  std::cerr << "offline: " << committed.committed[kReadingType] << " readings and " << committed.committed[kAckType]
            << " acknowledgements committed in " << offline_seconds << " s (" << committed.dropped
            << " readings dropped); directory peak " << MiB(offline.disk) << " MiB\n";
  const Drain drain = DrainBacklog(device, server, committed.committed[kAckType], cfg.timeout);
  const PeakSampler::Peaks draining = peaks.TakePeaks();
  peaks.Stop();
  const StreamCheck check = CheckStream(server.url(), committed);
  PrintResult(cfg, committed, offline, draining, drain, check, offline_seconds);
  if (!drain.idle.ok()) {
    std::cerr << "the backlog did not drain: " << drain.idle.ToString() << "\n";
    return 1;
  }
  if (!check.problem.empty()) {
    std::cerr << "stream check: " << check.problem << "\n";
    return 1;
  }
  return 0;
}

int Run(const Config& cfg) {
  std::string root = cfg.dir;
  if (root.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "walbus-offline-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return 2;
    root = tmpl;
  }
  const int rc = RunIn(cfg, root);
  if (!cfg.keep && cfg.dir.empty()) fs::remove_all(root);
  return rc;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "A device offline for days on a small disk, compressed: fill a disk budget with the relay's "
      "server down, then drain."};
  Config cfg;
  app.add_option("--events", cfg.events, "Commits attempted while offline")->capture_default_str();
  app.add_option("--disk-budget-mib", cfg.disk_budget_mib, "Options::disk_budget, MiB")->capture_default_str();
  app.add_option("--memory-budget-mib", cfg.memory_budget_mib, "Options::memory_budget, MiB")->capture_default_str();
  app.add_option("--payload-bytes", cfg.payload_bytes, "Random bytes per event")->capture_default_str();
  app.add_option("--subjects", cfg.subjects, "Reading subjects")->capture_default_str();
  app.add_option("--ack-every", cfg.ack_every, "One acknowledgement per this many events")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--timeout", cfg.timeout, "Seconds the drain may take")->capture_default_str();
  app.add_option("--dir", cfg.dir, "Directory for the database and the server's store (default: fresh under /tmp)");
  app.add_flag("--keep", cfg.keep, "Keep the directory created under /tmp");
  app.add_option("--seed", cfg.seed, "PRNG seed of the payloads")->capture_default_str();
  app.add_flag("--drop-oldest", cfg.drop_oldest, "The oldest readings give way (Options::drop_oldest_types)");
  app.add_option("--max-journal-mib", cfg.max_journal_mib,
                 "RelayOptions::max_journal_bytes, MiB (0: an 8th of the disk budget)")
      ->capture_default_str();
  app.add_option("--confirm-after-ms", cfg.confirm_after_ms,
                 "RelayOptions::confirm_after, ms: with the journal's bound, what paces the drain")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return Run(cfg);
}

}  // namespace

int main(int argc, char** argv) { return walbus::tools::GuardedMain("walbus-offline-soak", Main, argc, argv); }
