// Subscriber state: the durable registry of every subscriber the database
// knows, and the live state of the ones active in this process.
#ifndef WALBUS_BUS_SUBSCRIBER_H_
#define WALBUS_BUS_SUBSCRIBER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/progress.h"
#include "walbus/bus.h"

namespace walbus::internal {

// The events of one subject waiting for one subscriber, oldest first. The
// front one is the only one that may be running (per-key order).
struct KeyQueue {
  std::deque<std::shared_ptr<const Event>> events;
  bool head_busy = false;    // running, or waiting for a retry timer
  uint32_t attempts = 0;     // failed attempts of the front event
  bool check_inbox = false;  // the front event may have committed already
};

struct DurableCounters {
  uint64_t checkpoint = 0;
  uint64_t handled = 0;
  uint64_t duplicates = 0;
  uint64_t rejected = 0;
};

// Threading: the identity fields are immutable; `progress`, `keys` and the
// durable_* fields belong to the dispatcher thread; the atomics are for
// readers on any thread.
struct Subscriber {
  Subscriber(SubscriberOptions opts, uint32_t subscriber_id, const DurableCounters& durable)
      : name(std::move(opts.name)),
        id(subscriber_id),
        types(std::move(opts.types)),
        handler(std::move(opts.handler)),
        retry(opts.retry),
        progress(durable.checkpoint),
        durable_checkpoint(durable.checkpoint),
        watermark(durable.checkpoint),
        handled(durable.handled),
        duplicates(durable.duplicates),
        rejected(durable.rejected) {}

  bool Matches(std::string_view type) const {
    return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
  }

  const std::string name;
  const uint32_t id;
  const std::vector<std::string> types;
  const Handler handler;
  const RetryPolicy retry;

  Progress progress;
  std::unordered_map<std::string, KeyQueue> keys;
  uint64_t durable_checkpoint;
  uint64_t duplicates_to_persist = 0;

  std::atomic<uint64_t> watermark;
  std::atomic<uint64_t> handled;
  std::atomic<uint64_t> duplicates;
  std::atomic<uint64_t> rejected;
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> in_flight{0};
};

// Every subscriber registered in the database (name -> id, checkpoint).
//
// Threading: all members guarded by mu. Trimming the outbox and
// registering a subscriber both hold mu across their commit, so a new
// subscriber's starting point can never be trimmed away under it.
struct Registry {
  struct Entry {
    uint32_t id = 0;
    DurableCounters durable;
    std::shared_ptr<Subscriber> active;  // null when not subscribed here
  };
  std::mutex mu;
  std::map<std::string, Entry> by_name;
  uint32_t next_id = 1;

  // The lowest checkpoint of any registered subscriber, or `otherwise`
  // when there are none. REQUIRES: mu held.
  uint64_t MinCheckpoint(uint64_t otherwise) const {
    uint64_t m = otherwise;
    for (const auto& [name, e] : by_name) m = std::min(m, e.durable.checkpoint);
    return m;
  }
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_SUBSCRIBER_H_
