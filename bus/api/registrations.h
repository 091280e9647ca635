// Registrations: what makes a subscriber durable (Bus::Subscribe): its id
// and where it starts, kept in walbus.meta and its checkpoint records, the
// registration a tool on the stopped database reads, and the subjects its
// dead letters park. It writes through the committer and owns no part.
//
// Threading: thread-safe; a registration runs under the registry's lock.
#ifndef WALBUS_BUS_API_REGISTRATIONS_H_
#define WALBUS_BUS_API_REGISTRATIONS_H_

#include <memory>
#include <string>

#include "bus/core/committer.h"
#include "bus/dispatch/subscriber.h"
#include "storage/db.h"
#include "walbus/subscriber.h"

namespace walbus::internal {

class Registrations {
 public:
  // REQUIRES: each outlives this.
  Registrations(storage::Db* db, Committer* committer, Registry* registry);
  Registrations(const Registrations&) = delete;
  Registrations& operator=(const Registrations&) = delete;

  // What Subscribe refuses before anything is read: InvalidArgument for a
  // bad name or type, no handler, or a retry policy of no attempts.
  static Status Check(const SubscriberOptions& options);

  // Makes `options` an active subscriber: registered now (persisted, at
  // its start position) when its name is new, else resumed at its
  // checkpoint with the subjects its dead letters park. Busy when one of
  // that name is active; InvalidArgument for a start position the outbox
  // does not hold. REQUIRES: Check(options) passed, inside an admitted
  // call.
  Result<std::shared_ptr<Subscriber>> Activate(SubscriberOptions options);

 private:
  // Where a subscriber registered now with `start` starts: the checkpoint
  // its first event follows. InvalidArgument for a seq the outbox does
  // not hold.
  Status StartCheckpoint(const std::string& name, const StartPosition& start, uint64_t* checkpoint)
      REQUIRES(registry_.mu);
  Status Register(const std::string& name, const StartPosition& start, Registry::Entry* entry) REQUIRES(registry_.mu);
  // Writes `sub`'s RegistrationRecord.
  Status StoreRegistration(const Subscriber& sub) REQUIRES(registry_.mu);
  // Reads the subjects a dead letter of `sub` holds (PoisonPolicy::kParkKey).
  Status LoadParked(Subscriber* sub);

  storage::Db* const db_;
  Committer* const committer_;
  Registry& registry_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_REGISTRATIONS_H_
