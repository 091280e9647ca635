// Group 4, dispatch ceiling: how fast walbus moves already-committed
// events from memory to handlers, against moodycamel's ConcurrentQueue
// moving pointers from one thread to another (the queue walbus itself uses
// between its threads).
//
// walbus has no storage-free mode, so this measures its in-memory path
// with the cheapest storage that keeps its guarantees: the database on
// tmpfs (/dev/shm; no disk I/O, no fsync), kBuffered, a handler that does
// nothing. The events are committed before the subscriber starts, into a
// tail cache large enough to hold them all, so delivery never reads the
// outbox back: what is timed is Start() to WaitIdle(), i.e. the dispatcher
// (tail cache reads, per-subject queues, the work queue), the workers
// (handler context, handler call) and the completion of each event (its
// inbox record and counter, written in batches to the tmpfs RocksDB).
//
// path:filtered runs the same burst past a subscriber that takes another
// type: each event is fetched and completed by the dispatcher alone, no
// worker and no write; it splits the cost between routing and handling.
#include <concurrentqueue/concurrentqueue.h>

#include <memory>
#include <string>
#include <thread>

#include "bench/bench_common.h"

namespace bench {
namespace {

constexpr uint64_t kSubjects = 4096;
constexpr uint64_t kEventsPerCommit = 256;
constexpr size_t kMaxTailCache = size_t{1} << 24;  // Options::tail_cache_events' bound
// What one event of the burst counts against Options::tail_cache_bytes, with
// room to spare: its ~200 B payload, its strings and sizeof(Event).
constexpr size_t kTailBytesPerEvent = 1024;
constexpr auto kDrainTimeout = std::chrono::minutes(10);

fs::path MemoryBackedDir() {
  std::error_code ec;
  return fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
}

// Commits `events` events in transactions of kEventsPerCommit (no domain
// writes: only the outbox is being filled).
walbus::Status CommitBurst(walbus::Bus& bus, uint64_t events) {
  for (uint64_t n = 0; n < events;) {
    walbus::Transaction tx = bus.Begin();
    for (uint64_t i = 0; i < kEventsPerCommit && n < events; ++i, ++n) {
      walbus::EventSpec e;
      e.type = kEventType;
      e.subject = SubjectOf(n, kSubjects);
      e.data = EventData();
      if (auto id = tx.Publish(e); !id.ok()) return id.status();
    }
    if (walbus::Status s = tx.Commit().status(); !s.ok()) return s;
  }
  return walbus::Status::OK();
}

void RunWalbus(benchmark::State& state, bool handled) {
  const uint64_t events = CurrentProfile().dispatch_events;
  for (auto _ : state) {
    TempDir dir(MemoryBackedDir());
    walbus::Options opt = BusOptions(dir.path(), walbus::Durability::kBuffered);
    opt.tail_cache_events = std::clamp<size_t>(static_cast<size_t>(events) + 1, 16, kMaxTailCache);
    // Room for every event's bytes too: past the default 64 MiB the oldest
    // would be read back from the outbox, which is not the in-memory path.
    opt.tail_cache_bytes = std::max<size_t>(opt.tail_cache_bytes, static_cast<size_t>(events) * kTailBytesPerEvent);
    // The memory budget gives the tail cache a quarter of itself at most
    // (Options::memory_budget): raise it to match, or the cap above is cut.
    opt.memory_budget = std::max(opt.memory_budget, 4 * opt.tail_cache_bytes);
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(opt, &bus);
    if (s.ok()) {
      s = bus->Subscribe({.name = "dispatch",
                          .types = {handled ? kEventType : "bench.other-thing-happened.v1"},
                          .handler = HandleNothing});
    }
    if (s.ok()) s = CommitBurst(*bus, events);
    if (Failed(state, ErrorText(s))) return;
    const Clock::time_point start = Clock::now();
    s = bus->Start();
    if (s.ok()) s = bus->WaitIdle(kDrainTimeout);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (Failed(state, ErrorText(s))) return;
    bus->Close().IgnoreError();
    state.SetIterationTime(seconds);
    state.counters["events"] = static_cast<double>(events);
    state.counters["events_per_second"] = static_cast<double>(events) / seconds;
  }
}

// One producer enqueues pointers one at a time, one consumer dequeues them
// one at a time: the plain use, without tokens or bulk calls.
void RunQueue(benchmark::State& state) {
  const uint64_t items = CurrentProfile().queue_items;
  const walbus::Event event;
  for (auto _ : state) {
    moodycamel::ConcurrentQueue<const walbus::Event*> queue;
    uint64_t consumed_seq_sum = 0;  // reading each item keeps the consumer honest
    const Clock::time_point start = Clock::now();
    std::thread consumer([&] {
      const walbus::Event* item = nullptr;
      for (uint64_t got = 0; got < items;) {
        if (queue.try_dequeue(item)) {
          consumed_seq_sum += item->seq;
          ++got;
        }
      }
    });
    for (uint64_t i = 0; i < items; ++i) queue.enqueue(&event);
    consumer.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    benchmark::DoNotOptimize(consumed_seq_sum);
    state.SetIterationTime(seconds);
    state.counters["events"] = static_cast<double>(items);
    state.counters["events_per_second"] = static_cast<double>(items) / seconds;
  }
}

}  // namespace

void RegisterDispatchBenchmarks() {
  RegisterMeasurement(BenchName("Dispatch", {{"system", "walbus"}, {"path", "handler"}}),
                      [](benchmark::State& s) { RunWalbus(s, true); });
  RegisterMeasurement(BenchName("Dispatch", {{"system", "walbus"}, {"path", "filtered"}}),
                      [](benchmark::State& s) { RunWalbus(s, false); });
  RegisterMeasurement(BenchName("Dispatch", {{"system", "queue"}, {"path", "spsc"}}), RunQueue);
}

}  // namespace bench
