// Group 10, process: process managers (walbus/process.h).
//
//   flow   process_flows sales, each three steps: opened (the instance
//          starts and sets a one-hour payment timeout), paid (the timeout
//          is cancelled), shipped (the instance completes). Published
//          first, then handled: completed instances per second. Against
//          the same flow written by hand on a plain subscriber (its state
//          and its timer's id in a column family of its own, the timer
//          read and cancelled by id), in the same run.
//   open   process_open_instances instances started and left open, each
//          with a timeout a day ahead: the process's peak resident set,
//          and the time to read one instance (ReadProcessInstance) at
//          random.
#include <memory>
#include <random>
#include <string>

#include "bench/bench_common.h"
#include "walbus/process.h"

namespace bench {
namespace {

constexpr const char* kOpened = "bench.sale-opened.v1";
constexpr const char* kPaid = "bench.sale-paid.v1";
constexpr const char* kShipped = "bench.sale-shipped.v1";
constexpr uint64_t kSalesPerCommit = 100;
constexpr uint64_t kReads = 10000;

using walbus::Outcome;

Outcome Retry() { return Outcome::RetryAfter(std::chrono::milliseconds(0)); }

walbus::Result<std::shared_ptr<walbus::Process>> SaleProcess(std::chrono::milliseconds timeout) {
  walbus::ProcessDefinition d;
  d.name = "sale";
  walbus::ProcessStep opened;
  opened.type = kOpened;
  opened.starts = true;
  walbus::ProcessStep paid;
  paid.type = kPaid;
  walbus::ProcessStep shipped;
  shipped.type = kShipped;
  d.steps = {opened, paid, shipped};
  d.handler = [timeout](const walbus::Event& e, walbus::ProcessContext& p) {
    if (p.IsNew())
      return p.SetState("opened").ok() && p.SetTimeout("payment", timeout).ok() ? Outcome::Done() : Retry();
    if (e.type == kPaid) return p.CancelTimeout("payment").ok() && p.SetState("paid").ok() ? Outcome::Done() : Retry();
    if (e.type == kShipped) p.Complete();
    return Outcome::Done();
  };
  return walbus::Process::Define(std::move(d));
}

// The same flow by hand: "<stage>|<timer id>" under sale/<subject>.
walbus::SubscriberOptions HandWrittenSale() {
  walbus::SubscriberOptions s;
  s.name = "sale-by-hand";
  s.types = {kOpened, kPaid, kShipped};
  s.handler = [](const walbus::Event& e, walbus::HandlerContext& ctx) {
    const std::string key = "sale/" + e.subject;
    if (e.type == kOpened) {
      walbus::EventSpec timeout;
      timeout.type = "bench.sale-payment-timed-out.v1";
      timeout.subject = e.subject;
      timeout.deliver_after = std::chrono::hours(1);
      auto id = ctx.Publish(timeout);
      return id.ok() && ctx.Put("effects", key, "opened|" + id->ToString()).ok() ? Outcome::Done() : Retry();
    }
    if (e.type == kShipped) return ctx.Delete("effects", key).ok() ? Outcome::Done() : Retry();
    auto state = ctx.Get("effects", key);
    if (!state.ok() || !state->has_value()) return Retry();
    const std::optional<walbus::EventId> id = walbus::EventId::Parse((*state)->substr((*state)->find('|') + 1));
    if (!id) return Outcome::Reject("a sale without its timer");
    auto where = ctx.GetScheduled(*id);
    if (!where.ok()) return Retry();
    if (where->state == walbus::ScheduledStatus::State::kPending && !ctx.CancelScheduled(*id).ok()) return Retry();
    return ctx.Put("effects", key, "paid|").ok() ? Outcome::Done() : Retry();
  };
  return s;
}

std::string SaleKey(uint64_t n) { return "sale-" + std::to_string(n); }

// Publishes `n` sales' events: opened, then (with `whole`) paid and
// shipped, kSalesPerCommit sales per commit.
std::string PublishSales(walbus::Bus& bus, uint64_t n, bool whole) {
  for (uint64_t done = 0; done < n;) {
    walbus::Transaction tx = bus.Begin();
    for (uint64_t i = 0; i < kSalesPerCommit && done < n; ++i, ++done) {
      for (const char* type : {kOpened, kPaid, kShipped}) {
        if (!whole && std::string_view(type) != kOpened) break;
        walbus::EventSpec spec;
        spec.type = type;
        spec.subject = SaleKey(done);
        if (walbus::Status s = tx.Publish(spec).status(); !s.ok()) return ErrorText(s);
      }
    }
    if (walbus::Status s = tx.Commit().status(); !s.ok()) return ErrorText(s);
  }
  return {};
}

void RunFlow(benchmark::State& state, bool by_hand) {
  const uint64_t n = CurrentProfile().process_flows;
  for (auto _ : state) {
    TempDir dir;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), walbus::Durability::kBuffered), &bus);
    if (Failed(state, ErrorText(s))) return;
    auto process = SaleProcess(std::chrono::hours(1));
    if (Failed(state, ErrorText(process.status()))) return;
    s = bus->Subscribe(by_hand ? HandWrittenSale() : (*process)->subscriber());
    if (Failed(state, ErrorText(s)) || Failed(state, PublishSales(*bus, n, true))) return;
    const auto started = Clock::now();
    s = bus->Start();
    if (s.ok()) s = bus->WaitIdle(std::chrono::minutes(30));
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (Failed(state, ErrorText(s))) return;
    const walbus::BusStats stats = bus->Stats();
    if (stats.scheduled_pending != 0 || stats.scheduled_cancelled != n) {
      Failed(state, "the flow left timers pending: " + std::to_string(stats.scheduled_pending));
      return;
    }
    bus->Close().IgnoreError();
    state.SetIterationTime(seconds);
    state.counters["instances"] = static_cast<double>(n);
    state.counters["instances_per_second"] = static_cast<double>(n) / seconds;
  }
}

void RunOpen(benchmark::State& state) {
  const uint64_t n = CurrentProfile().process_open_instances;
  for (auto _ : state) {
    TempDir dir;
    RssSampler rss;
    std::unique_ptr<walbus::Bus> bus;
    walbus::Status s = walbus::Bus::Open(BusOptions(dir.path(), walbus::Durability::kBuffered), &bus);
    if (Failed(state, ErrorText(s))) return;
    auto process = SaleProcess(std::chrono::hours(24));
    if (Failed(state, ErrorText(process.status()))) return;
    s = bus->Subscribe((*process)->subscriber());
    if (s.ok()) s = bus->Start();
    if (Failed(state, ErrorText(s)) || Failed(state, PublishSales(*bus, n, false))) return;
    s = bus->WaitIdle(std::chrono::minutes(30));
    if (Failed(state, ErrorText(s))) return;
    std::mt19937_64 rng(7);
    const auto started = Clock::now();
    for (uint64_t i = 0; i < kReads; ++i) {
      auto instance = walbus::ReadProcessInstance(*bus, "sale", SaleKey(rng() % n));
      if (!instance.ok() || !instance->has_value()) {
        Failed(state, "an open instance could not be read");
        return;
      }
    }
    const double read_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    auto stats = walbus::ReadProcessStats(*bus, "sale");
    if (!stats.ok() || stats->running != n) {
      Failed(state, "not every instance is running");
      return;
    }
    bus->Close().IgnoreError();
    state.SetIterationTime(read_seconds);
    state.counters["instances"] = static_cast<double>(n);
    state.counters["rss_peak_mib"] = rss.PeakMiB();
    state.counters["read_one_us"] = read_seconds * 1e6 / static_cast<double>(kReads);
  }
}

}  // namespace

void RegisterProcessBenchmarks() {
  for (const bool by_hand : {false, true}) {
    RegisterMeasurement(BenchName("Process", {{"measure", "flow"}, {"system", by_hand ? "hand-written" : "process"}}),
                        [=](benchmark::State& s) { RunFlow(s, by_hand); });
  }
  RegisterMeasurement(BenchName("Process", {{"measure", "open"}}), RunOpen);
}

}  // namespace bench
