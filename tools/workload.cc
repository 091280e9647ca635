#include "tools/workload.h"

#include <atomic>
#include <charconv>
#include <cstdint>
#include <stdexcept>

#include "storage/db.h"

namespace walbus::workload {
namespace {

constexpr std::chrono::milliseconds kHandlerRetry{10};

std::string OrderKey(std::string_view sub, std::string_view subject) {
  return std::string(sub) + "/" + std::string(subject);
}
std::string EffectKey(std::string_view sub, std::string_view subject, uint64_t version) {
  return std::string(sub) + "/" + std::string(subject) + "/" + std::to_string(version);
}
std::string ViolationKey(std::string_view sub, std::string_view subject, uint64_t version) {
  return std::string(sub) + "/violations/" + std::string(subject) + "/" + std::to_string(version);
}

// Counters and versions are stored as decimal text; a missing key is 0.
Result<uint64_t> ReadCounter(WriteScope& scope, std::string_view cf, std::string_view key) {
  Result<std::optional<std::string>> got = scope.Get(cf, key);
  if (!got.ok()) return got.status();
  if (!got->has_value()) return uint64_t{0};
  const std::string& text = **got;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Status::Corruption(std::string(cf) + "/" + std::string(key) + ": not a counter");
  }
  return value;
}

}  // namespace

std::string SubscriberName(size_t i) { return "sub-" + std::to_string(i); }
std::string SubjectName(size_t k) { return "s-" + std::to_string(k); }

Options BusOptions(const std::string& dir, Durability durability, size_t workers) {
  Options opt;
  opt.dir = dir;
  opt.durability = durability;
  opt.column_families = {std::string(kStateCf), std::string(kEffectsCf), std::string(kOrderCf), "jetstream"};
  opt.worker_threads = workers;
  opt.source = "walbus-stress";
  return opt;
}

namespace {

std::atomic<int64_t> max_item_latency_ms{0};
std::atomic<uint64_t> logical_bytes{0};

Outcome HandleFault(const Event& e, HandlerContext& ctx) {
  if (e.data == "poison") throw std::runtime_error("poison event " + e.id.ToString());
  if (e.data == "transient" && ctx.Attempt() <= 2) throw std::runtime_error("transient failure");
  const std::string key = ctx.SubscriberName() + "/fault/" + e.id.ToString();
  Result<uint64_t> applied = ReadCounter(ctx, kEffectsCf, key);
  if (!applied.ok()) return Outcome::RetryAfter(kHandlerRetry);
  if (!ctx.Put(kEffectsCf, key, std::to_string(*applied + 1)).ok()) return Outcome::RetryAfter(kHandlerRetry);
  return Outcome::Done();
}

}  // namespace

int64_t MaxItemLatencyMs() { return max_item_latency_ms.load(); }

uint64_t LogicalBytesCommitted() { return logical_bytes.load(std::memory_order_relaxed); }

Result<uint64_t> FaultEffects(Transaction& tx, const std::string& subscriber, const EventId& id) {
  return ReadCounter(tx, kEffectsCf, subscriber + "/fault/" + id.ToString());
}

Status CommitFault(Bus& bus, const std::string& subject, std::string_view kind, Receipt* receipt) {
  Transaction tx = bus.Begin();
  EventSpec event;
  event.type = kFaultType;
  event.subject = subject;
  event.data = std::string(kind);
  if (Result<EventId> id = tx.Publish(event); !id.ok()) return id.status();
  Result<Receipt> committed = tx.Commit();
  if (!committed.ok()) return committed.status();
  *receipt = std::move(*committed);
  return Status::OK();
}

Outcome HandleItem(const Event& e, HandlerContext& ctx) {
  if (e.type == kFaultType) return HandleFault(e, ctx);
  const int64_t lag =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now() - e.time).count();
  for (int64_t seen = max_item_latency_ms.load();
       lag > seen && !max_item_latency_ms.compare_exchange_weak(seen, lag);) {
  }
  const std::string& sub = ctx.SubscriberName();
  const std::string order_key = OrderKey(sub, e.subject);
  const std::string effect_key = EffectKey(sub, e.subject, e.subject_version);
  Result<uint64_t> last = ReadCounter(ctx, kOrderCf, order_key);
  Result<uint64_t> applied = ReadCounter(ctx, kEffectsCf, effect_key);
  if (!last.ok() || !applied.ok()) return Outcome::RetryAfter(kHandlerRetry);
  Status s;
  if (e.subject_version != *last + 1) {
    s = ctx.Put(kOrderCf, ViolationKey(sub, e.subject, e.subject_version),
                "after " + std::to_string(*last) + " at seq " + std::to_string(e.seq));
  }
  const std::string order = std::to_string(e.subject_version);
  const std::string effect = std::to_string(*applied + 1);
  if (s.ok()) s = ctx.Put(kOrderCf, order_key, order);
  if (s.ok()) s = ctx.Put(kEffectsCf, effect_key, effect);
  if (!s.ok()) return Outcome::RetryAfter(kHandlerRetry);
  logical_bytes.fetch_add(order_key.size() + order.size() + effect_key.size() + effect.size(),
                          std::memory_order_relaxed);
  return Outcome::Done();
}

Status SubscribeAll(Bus& bus, size_t count, const Handler& handler, const RetryPolicy& retry) {
  for (size_t i = 0; i < count; ++i) {
    SubscriberOptions options{.name = SubscriberName(i),
                              .types = {std::string(kEventType), std::string(kFaultType)},
                              .handler = handler,
                              .retry = retry};
    Status s = bus.Subscribe(std::move(options));
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status CommitItem(Bus& bus, const std::string& subject, const std::string& payload, uint64_t* version,
                  Receipt* receipt) {
  Transaction tx = bus.Begin();
  Result<uint64_t> current = tx.GetVersion(kStateCf, subject);
  if (!current.ok()) return current.status();
  if (Status s = tx.ExpectVersion(kStateCf, subject, *current); !s.ok()) return s;
  if (Status s = tx.Put(kStateCf, subject, payload); !s.ok()) return s;
  EventSpec event;
  event.type = kEventType;
  event.subject = subject;
  event.subject_version = *current + 1;
  event.data = payload;
  Result<EventId> id = tx.Publish(event);
  if (!id.ok()) return id.status();
  Result<Receipt> committed = tx.Commit();
  if (!committed.ok()) return committed.status();
  if (committed->event_ids.size() != 1 || committed->event_ids[0] != *id) {
    return Status::Corruption("receipt does not list the published event");
  }
  *version = *current + 1;
  *receipt = std::move(*committed);
  logical_bytes.fetch_add(2 * (subject.size() + payload.size()), std::memory_order_relaxed);  // state + event
  return Status::OK();
}

Status CheckSubjects(Transaction& state, Transaction& tx, size_t subscribers, size_t subjects, CheckResult* result) {
  for (size_t k = 0; k < subjects; ++k) {
    const std::string subject = SubjectName(k);
    Result<uint64_t> final_version = state.GetVersion(kStateCf, subject);
    if (!final_version.ok()) return final_version.status();
    for (size_t i = 0; i < subscribers; ++i) {
      const std::string sub = SubscriberName(i);
      Result<uint64_t> applied = ReadCounter(tx, kOrderCf, OrderKey(sub, subject));
      if (!applied.ok()) return applied.status();
      if (*applied != *final_version) {
        result->all_delivered = false;
        result->failures.push_back(sub + " " + subject + ": applied version " + std::to_string(*applied) +
                                   ", state version " + std::to_string(*final_version));
      }
      // One past the last version too: an event without its state change
      // would show up there.
      for (uint64_t v = 1; v <= *final_version + 1; ++v) {
        Result<uint64_t> count = ReadCounter(tx, kEffectsCf, EffectKey(sub, subject, v));
        if (!count.ok()) return count.status();
        const uint64_t expected = v <= *final_version ? 1 : 0;
        if (*count != expected) {
          result->exactly_once = false;
          result->failures.push_back(sub + " " + subject + " version " + std::to_string(v) + ": effect count " +
                                     std::to_string(*count) + ", expected " + std::to_string(expected));
        }
        Result<std::optional<std::string>> violation = tx.Get(kOrderCf, ViolationKey(sub, subject, v));
        if (!violation.ok()) return violation.status();
        if (violation->has_value()) {
          result->per_subject_order = false;
          result->failures.push_back(sub + " " + subject + " version " + std::to_string(v) +
                                     " out of order: " + **violation);
        }
      }
    }
  }
  return Status::OK();
}

Status CountOutbox(const std::string& dir, size_t* entries) {
  storage::OpenOptions so;
  so.dir = dir;
  so.create_if_missing = false;
  std::unique_ptr<storage::Db> db;
  if (Status s = storage::Db::Open(so, &db); !s.ok()) return s;
  *entries = 0;
  return db->ScanOutbox(0, SIZE_MAX, [entries](uint64_t, std::string_view) {
    ++*entries;
    return true;
  });
}

}  // namespace walbus::workload
