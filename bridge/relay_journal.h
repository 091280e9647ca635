// The bridge's records in its column family (RelayOptions::column_family,
// InboundOptions::column_family). A relay's keys start with "relay\0" and
// its subscriber name and a NUL:
//
//   <name>\0o                        the relay's origin id (ce-seqorigin)
//   <name>\0p<source>\0<subject>     the last position given to that
//                                    source and subject (ce-subjectseq)
//   <name>\0j<be64 event seq>        a journal entry: a relayed message the
//                                    relay does not yet trust the server to
//                                    hold, with its stream sequence
//   <name>\0l                        be64: every journal entry below it is
//                                    gone (confirmed)
//   <name>\0s                        present once the stream acknowledged a
//                                    publish of the relay's
//   <name>\0u                        be64 count + be64 unix ms: the stream
//                                    was found gone after that
//
// An inbound consumer's one key: "inbound\0" <durable> "\0cursor", be64
// stream sequence + be64 stored time (ns) of the newest message it took.
//
// Positions and journal entries commit with the relay's completion of the
// event (its handler's context), so a crash between PubAck and checkpoint
// republishes the same message with the same position.
#ifndef WALBUS_BRIDGE_RELAY_JOURNAL_H_
#define WALBUS_BRIDGE_RELAY_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/status.h"

namespace walbus::bridge {

class RelayKeys {
 public:
  explicit RelayKeys(std::string_view relay_name);
  std::string Origin() const;
  std::string Position(std::string_view source, std::string_view subject) const;
  std::string Journal(uint64_t event_seq) const;
  std::string LowMark() const;
  // be64 count + be64 unix ms of the last: times the stream was found gone
  // after this relay had published to it (messages lost for good).
  std::string Unrepairable() const;
  // Present once the relay has had a publish acknowledged by its stream:
  // a stream found missing after that (by this process or a later one) is
  // a loss.
  std::string Published() const;
  // Why the stream's subject filters do not take the relay's subjects, as
  // last found on connecting; absent when they do.
  std::string SubjectsProblem() const;
  // The relay's lane (RelayLane), written at each Relay::Attach.
  std::string Lane() const;

 private:
  std::string prefix_;  // name + '\0'
};

std::string InboundCursorKey(std::string_view durable);

// What one subscriber of a relay takes and how fast it may send, as the
// last Relay::Attach set it: a relay with priorities has a subscriber per
// level (RelayOptions::priorities), and `walbus bridge` counts each one's
// backlog by these.
struct RelayLane {
  uint32_t priority = 0;
  // The types it takes: these alone, or, with all_but, every type but
  // these (the lowest level takes what no higher one does).
  bool all_but = false;
  std::vector<std::string> types;
  uint64_t max_bytes_per_second = 0;  // the cap the levels share; 0: none
  uint64_t burst_bytes = 0;

  bool Takes(std::string_view type) const;
};
std::string EncodeRelayLane(const RelayLane& lane);
// nullopt when `bytes` is not a lane (a damaged record).
std::optional<RelayLane> DecodeRelayLane(std::string_view bytes);

// What a read of the bridge's column family at Relay::Attach or
// Inbound::Start failed with, as the call returns it: a column family the
// bus does not have is the option's mistake (InvalidArgument naming
// `role`'s column family); anything else (Closed, an I/O error) as it is.
Status ColumnFamilyReadError(std::string_view role, std::string_view column_family, const Status& read);

// Which run of a server: a NATS server takes a new id each time it
// starts, so a run is named by the id of the server connected to.
// kUnknownServerRun for no id (not connected).
inline constexpr uint64_t kUnknownServerRun = 0;
uint64_t ServerRunOf(std::string_view server_id);

// A relayed message kept until the relay trusts the server to hold it.
struct JournalEntry {
  uint64_t stream_seq = 0;  // the stream sequence JetStream acknowledged
  uint64_t acked_ms = 0;    // wall time of that acknowledgement, unix ms
  // The run of the server that acknowledged it; kUnknownServerRun when
  // the connection changed while the publish waited (the acknowledgement
  // may have come from either run), and for entries older releases wrote.
  uint64_t server_run = kUnknownServerRun;
  std::string msg_id;  // Nats-Msg-Id
  std::string nats_subject;
  std::string message;  // MessageBytes(headers, body)
};

std::string EncodeJournalEntry(const JournalEntry& entry);
// nullopt when `bytes` is not an entry (a damaged record).
std::optional<JournalEntry> DecodeJournalEntry(std::string_view bytes);

// Whether the stream still holds `entry` where it was acknowledged; an
// error when the server did not answer.
using StreamHoldsFn = std::function<Result<bool>(const JournalEntry& entry)>;

// Of `entries`, which the stream no longer holds (true at the same
// index). Entries of `current_run` are not looked at: the server that
// acknowledged them is still running, so it lost nothing of them.
//
// A server that crashes loses the tail of its stream, so of the messages
// one run acknowledged, those it still holds after any later crashes are
// the ones below some stream sequence: for each run, a binary search over
// its entries by stream sequence finds the end of what it kept in a few
// look-ups. That holds only within one run (each run's entries are cut by
// the crashes since it ran), so an entry of an unknown run is looked up
// on its own.
Result<std::vector<bool>> FindLostEntries(const std::vector<const JournalEntry*>& entries, uint64_t current_run,
                                          const StreamHoldsFn& stream_holds);

// Big-endian 8 bytes, as the records store counters.
std::string EncodeU64(uint64_t v);
std::optional<uint64_t> DecodeU64(std::string_view bytes);

}  // namespace walbus::bridge

#endif  // WALBUS_BRIDGE_RELAY_JOURNAL_H_
