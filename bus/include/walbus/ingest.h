// walbus/ingest.h: taking events from elsewhere (Bus::IngestEvent,
// Bus::IngestEnvelope): where they came from, how repeats are recognised,
// and a sender's per-key order.
#ifndef WALBUS_INGEST_H_
#define WALBUS_INGEST_H_

#include <cstdint>
#include <string>

#include "walbus/event.h"

namespace walbus {

// Where ingested input came from, and how repeats are recognised
// (Bus::IngestEvent, Bus::IngestEnvelope).
struct IngestOptions {
  // Where the input came from, for the quarantine and the log
  // ("jetstream:ORDERS/cloud", "file:import.bin").
  std::string source;
  // When not empty: take each event id at most once within this scope (a
  // name as for subscribers: letters, digits, '.', '_', '-'). Use one scope
  // per inbound channel, e.g. per JetStream consumer.
  std::string dedup_scope;
  // A sender's per-key order, kept within dedup_scope (required with it):
  // `position` is the event's place among the sender's events of
  // `order_key`, 1, 2, 3, ... without gaps. An event is taken only when
  // every position before it was; one that comes early is refused with
  // IngestDisposition::kAhead and nothing is written, so the caller can
  // hold it until the missing ones arrive. Empty order_key: no order kept.
  // @{
  std::string order_key;
  uint64_t position = 0;
  // Take an early event anyway and skip the missing positions (the caller
  // waited for them long enough). A skipped event that arrives later is
  // still taken once, as kLate.
  bool accept_gap = false;
  // @}
};

// What an ingest did with an event.
enum class IngestDisposition : uint8_t {
  kTaken,      // committed, in its sender's order
  kDuplicate,  // the scope had taken this event id before; nothing written
  kAhead,      // positions before it are missing; nothing written
  kLate,       // committed after later positions (its gap had been skipped)
};

// What an ingest did.
struct IngestResult {
  Receipt receipt;                                            // The committed event; empty unless taken or late.
  IngestDisposition disposition = IngestDisposition::kTaken;  // See above.
  // With an order key: the position the key waits for next, after this
  // ingest (kAhead: the first missing one).
  uint64_t next_position = 0;
  // accept_gap only: how many positions the ingest skipped.
  uint64_t skipped_positions = 0;
};

}  // namespace walbus

#endif  // WALBUS_INGEST_H_
