#include "tools/process_workload.h"

#include <chrono>
#include <map>

#include "tools/workload.h"

namespace walbus::workload {
namespace {

// Adds one to the counter row `row` of the state column family.
Status Increment(WriteScope& scope, const std::string& row) {
  auto value = scope.Get(kStateCf, row);
  if (!value.ok()) return value.status();
  const uint64_t n = value->has_value() ? std::stoull(**value) : 0;
  return scope.Put(kStateCf, row, std::to_string(n + 1));
}

Outcome Step(const Event& e, ProcessContext& p) {
  HandlerContext& scope = p.Scope();
  if (p.IsNew()) {
    const auto after = std::chrono::milliseconds(std::stoul(e.data));
    if (!Increment(scope, "ps/" + p.Key()).ok() || !p.SetTimeout("deadline", after).ok()) {
      return Outcome::RetryAfter(std::chrono::milliseconds(0));
    }
    return Outcome::Done();
  }
  const bool timed_out = p.FiredTimeout().has_value();
  if (e.type == kOpenedType) return Outcome::Done();  // an instance opens once; a second open changes nothing
  if (!Increment(scope, (timed_out ? "pt/" : "pc/") + p.Key()).ok()) {
    return Outcome::RetryAfter(std::chrono::milliseconds(0));
  }
  p.Complete();
  return Outcome::Done();
}

// The counter rows under `prefix`: key -> count.
Status ReadCounts(Transaction& tx, const std::string& prefix, std::map<std::string, uint64_t>* out) {
  ScanOptions scan;
  scan.prefix = prefix;
  return tx.Scan(kStateCf, scan, [&](std::string_view key, std::string_view value) {
    (*out)[std::string(key.substr(prefix.size()))] = std::stoull(std::string(value));
    return true;
  });
}

}  // namespace

Result<std::shared_ptr<Process>> DefineCrashProcess(const RetryPolicy& retry) {
  ProcessDefinition d;
  d.name = std::string(kCrashProcess);
  d.steps = {ProcessStep{.type = std::string(kOpenedType), .starts = true, .correlate = {}},
             ProcessStep{.type = std::string(kCancelledType), .starts = false, .correlate = {}}};
  d.handler = Step;
  d.retry = retry;
  return Process::Define(std::move(d));
}

std::string OpenedKey(const std::string& key) { return "po/" + key; }

Status CommitOpen(Bus& bus, const std::string& key, uint32_t timeout_ms) {
  Transaction tx = bus.Begin();
  if (Status s = tx.ExpectVersion(kStateCf, OpenedKey(key), 0); !s.ok()) return s;
  if (Status s = tx.Put(kStateCf, OpenedKey(key), "1"); !s.ok()) return s;
  EventSpec opened{.type = std::string(kOpenedType), .subject = key, .data = std::to_string(timeout_ms)};
  if (Status s = tx.Publish(opened).status(); !s.ok()) return s;
  return tx.Commit().status();
}

Status CommitCancel(Bus& bus, const std::string& key) {
  Transaction tx = bus.Begin();
  if (Status s = tx.Publish(EventSpec{.type = std::string(kCancelledType), .subject = key, .data = {}}).status();
      !s.ok()) {
    return s;
  }
  return tx.Commit().status();
}

Status CheckProcesses(Bus& bus, std::vector<std::string>* failures) {
  Transaction tx = bus.Begin();
  std::map<std::string, uint64_t> opened, started, cancelled, timed_out;
  for (auto [prefix, counts] : {std::pair{"po/", &opened}, std::pair{"ps/", &started}, std::pair{"pc/", &cancelled},
                                std::pair{"pt/", &timed_out}}) {
    if (Status s = ReadCounts(tx, prefix, counts); !s.ok()) return s;
  }
  for (const auto& [key, n] : opened) {
    if (started[key] != 1)
      failures->push_back("instance " + key + " started " + std::to_string(started[key]) + " times");
  }
  for (const auto& [key, n] : started) {
    const uint64_t c = cancelled[key], t = timed_out[key];
    if (c + t != 1) {
      failures->push_back("instance " + key + " completed by cancel " + std::to_string(c) + " times and by timeout " +
                          std::to_string(t) + " times");
    }
  }
  auto running = ListProcessInstances(bus, kCrashProcess);
  if (!running.ok()) return running.status();
  if (!running->instances.empty()) {
    failures->push_back(std::to_string(running->instances.size()) + "+ instances still running, e.g. " +
                        running->instances[0].key);
  }
  if (const uint64_t pending = bus.Stats().scheduled_pending; pending != 0) {
    failures->push_back(std::to_string(pending) + " timers still pending");
  }
  if (opened.empty()) failures->push_back("no open was committed: nothing was checked");
  return Status::OK();
}

}  // namespace walbus::workload
