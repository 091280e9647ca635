// OldestDropper: Options::drop_oldest_types. When the disk budget would
// refuse an application's commit, the dispatcher makes room with it: the
// oldest events of those types that no active subscriber holds in memory
// are deleted from the outbox, in one write with their counts (per type,
// and per subscriber that had not taken them), and forgotten by the
// event source's caches, so that no subscriber fetches them; subscribers
// pass over the gaps as over trimmed seqs.
//
// An event is held, and never dropped, while any active subscriber has
// fetched it and not completed it (its handler may have started), or
// runs it out of line (a redrive, a replay's selection). A subscriber
// not subscribed in this process has fetched nothing: its events may go,
// uncounted for it (its types are not known here).
//
// Threading: the dispatcher thread's, but for DroppedByType and total,
// which any thread may call.
#ifndef WALBUS_BUS_DISPATCH_OLDEST_DROPPER_H_
#define WALBUS_BUS_DISPATCH_OLDEST_DROPPER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/disk_budget.h"
#include "bus/dispatch/event_source.h"
#include "bus/dispatch/subscriber.h"
#include "bus/telemetry/log.h"
#include "bus/util/mutex.h"
#include "storage/db.h"

namespace walbus::internal {

// The durable count of dropped events of each type (walbus stats, and
// the dropper's counts at open).
Status ReadDroppedByType(const storage::Db& db, std::map<std::string, uint64_t>* out);

class OldestDropper {
 public:
  // What it drops from and tells. REQUIRES: each outlives this.
  struct Parts {
    storage::Db* db;
    Committer* committer;
    DiskBudget* disk_budget;
    EventSource* source;
    const BusLog* log;
    size_t max_payload_bytes;
  };
  // `types`: Options::drop_oldest_types (empty: it never drops).
  OldestDropper(Parts parts, std::vector<std::string> types);
  OldestDropper(const OldestDropper&) = delete;
  OldestDropper& operator=(const OldestDropper&) = delete;

  // Reads the durable counts. Before the first MakeRoom.
  Status Load();
  bool enabled() const { return !types_.empty(); }

  // Deletes the oldest events it may drop until `bytes` (at least a 64th
  // of the budget) are freed, or it found no more in the outbox's seqs
  // [from, up_to]; returns the bytes freed, as the budget counts them.
  // `subs`: the active subscribers. REQUIRES: every seq up to `up_to` was
  // committed and, when the tail cache is in use, appended to it.
  uint64_t MakeRoom(uint64_t bytes, uint64_t from, uint64_t up_to,
                    const std::vector<std::shared_ptr<Subscriber>>& subs);

  // Events dropped of each type, ever (the durable counts and this
  // process's). Thread-safe.
  std::map<std::string, uint64_t> DroppedByType() const;
  // Of those, the ones this process dropped (the metrics' counters).
  // Thread-safe.
  std::map<std::string, uint64_t> DroppedSinceOpen() const;

 private:
  struct Victim {
    uint64_t seq;
    uint64_t bytes;  // key and envelope, as DiskBudget counts them
    std::string type;
  };
  // An event of a type it drops that a subscriber held when the scan
  // passed it: looked at again first (it is older than what follows).
  struct Passed {
    uint64_t bytes;
    std::string type;
  };

  bool Drops(std::string_view type) const;
  // Whether any active subscriber holds `seq`.
  static bool Held(const std::vector<std::shared_ptr<Subscriber>>& subs, uint64_t seq);
  // Chooses the oldest events to drop for `bytes`: those of held_ no
  // longer held, then what a scan of [from, up_to] from the cursor on
  // finds (a failed read is logged; what was chosen before it goes).
  void Choose(uint64_t bytes, uint64_t from, uint64_t up_to, const std::vector<std::shared_ptr<Subscriber>>& subs,
              std::vector<Victim>* victims);
  // The first part of Choose: adds to *victims, returns their bytes.
  uint64_t ChooseReleased(uint64_t bytes, uint64_t from, const std::vector<std::shared_ptr<Subscriber>>& subs,
                          std::vector<Victim>* victims);
  // Deletes `victims` and adds their counts, in one write.
  Status Delete(const std::vector<Victim>& victims, const std::vector<std::shared_ptr<Subscriber>>& subs);
  // Tells the budget, the caches and the counts of deleted `victims`.
  uint64_t Forget(const std::vector<Victim>& victims);

  const Parts parts_;
  const std::vector<std::string> types_;
  // The scan goes on from here: below it, each seq was of a type that
  // rejects, dropped, or is in held_.
  uint64_t cursor_ = 0;
  // By seq. At most what the subscribers' windows hold (and their runs
  // out of line): each went in held by one.
  std::map<uint64_t, Passed> held_;
  mutable Mutex mu_;
  std::map<std::string, uint64_t> dropped_by_type_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> dropped_at_open_ GUARDED_BY(mu_);
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_OLDEST_DROPPER_H_
