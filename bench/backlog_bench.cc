// Group 5, backlog and recovery: a subscriber that was registered and then
// stopped while events kept coming; then the process restarts and the
// subscriber catches up.
//
// The backlog is written by a child process (this program again, with
// --fill-backlog), so the measuring process starts with none of the
// filler's memory: its resident set is the bus recovering and draining,
// nothing else. Measured: the database's size on disk with the backlog;
// the resident set just after Open and its peak while the backlog drains
// (sampled every 20 ms); the time from calling Open to the first handler
// call and to the last event handled; after Close, the events left in the
// outbox and the outbox's table files (a range deletion frees the entries
// at once and their disk space only when compaction rewrites the files).
// Twice: up to 1M events within a 16 MiB Options::memory_budget (a small
// device), and the profile's backlog with the default budget. Then fan-out
// (BacklogFanOut): up to 300k events drained by one subscriber, and by
// three registered together, who share the dispatcher's reads of the
// outbox.
#include <rocksdb/db.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "bench/bench_common.h"
#include "storage/db.h"

extern char** environ;

namespace bench {
namespace {

constexpr uint64_t kSubjects = 1000;
constexpr uint64_t kFillEventsPerCommit = 100;
constexpr int kFillProducers = 2;
constexpr auto kCatchUpTimeout = std::chrono::hours(1);
const char* const kSubscriber = "catch-up";
constexpr uint64_t kFanOutEvents = 300000;

// The name of the i-th of a backlog's subscribers.
std::string SubscriberName(int i) { return i == 0 ? kSubscriber : kSubscriber + std::to_string(i + 1); }

// The small-device point: a backlog of at most this many within
// kSmallBudgetMiB.
constexpr uint64_t kSmallBudgetEvents = 1000000;

// `budget_mib` 0: the default memory budget.
walbus::Options BacklogOptions(const std::string& dir, size_t budget_mib = 0) {
  walbus::Options opt = BusOptions(dir, walbus::Durability::kBuffered);
  opt.column_families = {"effects"};
  if (budget_mib > 0) opt.memory_budget = budget_mib << 20;
  return opt;
}

// Starts this program as `--fill-backlog=dir --fill-events=n
// --fill-subscribers=k` and waits.
std::string SpawnFiller(const std::string& dir, uint64_t events, int subscribers) {
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string dir_arg = std::string(kFillBacklogFlag) + dir;
  std::string events_arg = std::string(kFillEventsFlag) + std::to_string(events);
  std::string subscribers_arg = std::string(kFillSubscribersFlag) + std::to_string(subscribers);
  char* argv[] = {self.data(), dir_arg.data(), events_arg.data(), subscribers_arg.data(), nullptr};
  pid_t pid = 0;
  if (int rc = ::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, environ); rc != 0) {
    return "posix_spawn of the backlog filler failed: " + std::to_string(rc);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "the backlog filler failed (status " + std::to_string(status) + ")";
  }
  return {};
}

struct OutboxAfter {
  uint64_t entries = 0;
  uint64_t sst_bytes = 0;
};

// Reads the closed database's outbox through a secondary (read-only) view.
std::string InspectOutbox(const std::string& dir, OutboxAfter* out) {
  TempDir secondary;
  walbus::storage::OpenOptions o;
  o.dir = dir;
  o.mode = walbus::storage::OpenOptions::Mode::kSecondary;
  o.secondary_dir = secondary.path();
  std::unique_ptr<walbus::storage::Db> db;
  if (walbus::Status s = walbus::storage::Db::Open(o, &db); !s.ok()) return s.ToString();
  walbus::Status s = db->ScanOutbox(0, SIZE_MAX, [&](uint64_t, std::string_view) {
    ++out->entries;
    return true;
  });
  if (!s.ok()) return s.ToString();
  if (!db->raw()->GetIntProperty(db->cf(walbus::storage::Cf::kOutbox), "rocksdb.total-sst-files-size",
                                 &out->sst_bytes)) {
    return "the outbox's table size is not available";
  }
  return {};
}

// `subscribers` drain `events` within Options::memory_budget `budget_mib`
// (0: the default).
void RunBacklog(benchmark::State& state, uint64_t events, size_t budget_mib, int subscribers = 1) {
  for (auto _ : state) {
    TempDir dir;
    if (Failed(state, SpawnFiller(dir.path(), events, subscribers))) return;
    const uint64_t disk_with_backlog = DirBytes(dir.path());

    RssSampler rss;
    std::atomic<uint64_t> disk_peak{disk_with_backlog};
    std::atomic<bool> stop_disk{false};
    std::thread disk_sampler([&] {
      while (!stop_disk.load()) {
        disk_peak.store(std::max(disk_peak.load(), DirBytes(dir.path())));
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    });
    std::atomic<bool> delivered{false};
    Clock::time_point first_delivery;
    const Clock::time_point open_start = Clock::now();
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BacklogOptions(dir.path(), budget_mib), &bus);
    const Clock::time_point opened = Clock::now();
    const double rss_after_open = RssMiB();
    for (int i = 0; s.ok() && i < subscribers; ++i) {
      s = bus->Subscribe({.name = SubscriberName(i),
                          .types = {kEventType},
                          .handler = [&](const walbus::Event& e, walbus::HandlerContext& ctx) {
                            if (!delivered.load(std::memory_order_relaxed) && !delivered.exchange(true)) {
                              first_delivery = Clock::now();
                            }
                            return WriteEffect(e, ctx);
                          }});
    }
    const uint64_t pending_at_start = s.ok() ? Pending(*bus) : 0;
    if (s.ok()) s = bus->Start();
    if (s.ok()) s = bus->WaitIdle(kCatchUpTimeout);
    const Clock::time_point caught_up = Clock::now();
    const uint64_t pending_after = s.ok() ? Pending(*bus) : 0;
    if (bus != nullptr) bus->Close().IgnoreError();
    stop_disk.store(true);
    disk_sampler.join();
    if (Failed(state, ErrorText(s))) return;
    if (pending_at_start != events) {
      Failed(state,
             "expected " + std::to_string(events) + " pending events, found " + std::to_string(pending_at_start));
      return;
    }
    OutboxAfter after;
    if (Failed(state, InspectOutbox(dir.path(), &after))) return;

    auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    const double catch_up_seconds = std::chrono::duration<double>(caught_up - open_start).count();
    state.SetIterationTime(catch_up_seconds);
    state.counters["events"] = static_cast<double>(events);
    state.counters["subscribers"] = subscribers;
    state.counters["disk_with_backlog_mib"] = MiB(disk_with_backlog);
    state.counters["disk_peak_mib"] = MiB(disk_peak.load());
    state.counters["disk_after_mib"] = MiB(DirBytes(dir.path()));
    state.counters["rss_after_open_mib"] = rss_after_open;
    state.counters["rss_peak_mib"] = rss.PeakMiB();
    state.counters["open_ms"] = ms(opened - open_start);
    state.counters["first_delivery_ms"] = ms(first_delivery - open_start);
    state.counters["catch_up_seconds"] = catch_up_seconds;
    state.counters["catch_up_events_per_second"] =
        static_cast<double>(events) / std::chrono::duration<double>(caught_up - first_delivery).count();
    state.counters["pending_after"] = static_cast<double>(pending_after);
    state.counters["outbox_entries_after"] = static_cast<double>(after.entries);
    state.counters["outbox_sst_mib_after"] = MiB(after.sst_bytes);
  }
}

}  // namespace

int FillBacklog(const std::string& dir, uint64_t events, int subscribers) {
  std::unique_ptr<walbus::Bus> bus;
  walbus::Status s = walbus::Bus::Open(BacklogOptions(dir), &bus);
  // Registered, never started: their checkpoints stay where they are, and
  // every event committed from now on waits for them.
  for (int i = 0; s.ok() && i < subscribers; ++i) {
    s = bus->Subscribe({.name = SubscriberName(i), .types = {kEventType}, .handler = WriteEffect});
  }
  if (!s.ok()) {
    std::fprintf(stderr, "fill backlog: %s\n", s.ToString().c_str());
    return 1;
  }
  const uint64_t commits = (events + kFillEventsPerCommit - 1) / kFillEventsPerCommit;
  const LoadResult load = RunClosedLoop(kFillProducers, 1e9, commits, [&](int, uint64_t c) {
    walbus::Transaction tx = bus->Begin();
    for (uint64_t n = c * kFillEventsPerCommit; n < std::min(events, (c + 1) * kFillEventsPerCommit); ++n) {
      walbus::EventSpec e;
      e.type = kEventType;
      e.subject = SubjectOf(n, kSubjects);
      e.data = EventData();
      if (auto id = tx.Publish(e); !id.ok()) return id.status().ToString();
    }
    return ErrorText(tx.Commit().status());
  });
  s = bus->Close();
  if (!load.error.empty() || !s.ok()) {
    std::fprintf(stderr, "fill backlog: %s %s\n", load.error.c_str(), s.ToString().c_str());
    return 1;
  }
  return 0;
}

void RegisterBacklogBenchmarks() {
  const uint64_t events = CurrentProfile().backlog_events;
  // The small budget first: its resident set then starts clean of the
  // default run's memory, which the allocator keeps.
  const uint64_t small = std::min(events, kSmallBudgetEvents);
  RegisterMeasurement(
      BenchName("Backlog", {{"events", std::to_string(small)}, {"budget_mib", std::to_string(kSmallBudgetMiB)}}),
      [=](benchmark::State& s) { RunBacklog(s, small, kSmallBudgetMiB); });
  RegisterMeasurement(BenchName("Backlog", {{"events", std::to_string(events)}, {"budget_mib", "default"}}),
                      [=](benchmark::State& s) { RunBacklog(s, events, 0); });
  const uint64_t fan_out = std::min(events, kFanOutEvents);
  for (int subscribers : {1, 3}) {
    RegisterMeasurement(
        BenchName("BacklogFanOut", {{"events", std::to_string(fan_out)}, {"subscribers", std::to_string(subscribers)}}),
        [=](benchmark::State& s) { RunBacklog(s, fan_out, 0, subscribers); });
  }
}

}  // namespace bench
