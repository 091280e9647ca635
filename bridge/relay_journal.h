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
#include <optional>
#include <string>
#include <string_view>

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

 private:
  std::string prefix_;  // name + '\0'
};

std::string InboundCursorKey(std::string_view durable);

// What a read of the bridge's column family at Relay::Attach or
// Inbound::Start failed with, as the call returns it: a column family the
// bus does not have is the option's mistake (InvalidArgument naming
// `role`'s column family); anything else (Closed, an I/O error) as it is.
Status ColumnFamilyReadError(std::string_view role, std::string_view column_family, const Status& read);

// A relayed message kept until the relay trusts the server to hold it.
struct JournalEntry {
  uint64_t stream_seq = 0;  // the stream sequence JetStream acknowledged
  uint64_t acked_ms = 0;    // wall time of that acknowledgement, unix ms
  uint64_t connection = 0;  // which connection it was acknowledged on
  std::string msg_id;       // Nats-Msg-Id
  std::string nats_subject;
  std::string message;  // MessageBytes(headers, body)
};

std::string EncodeJournalEntry(const JournalEntry& entry);
// nullopt when `bytes` is not an entry (a damaged record).
std::optional<JournalEntry> DecodeJournalEntry(std::string_view bytes);

// Big-endian 8 bytes, as the records store counters.
std::string EncodeU64(uint64_t v);
std::optional<uint64_t> DecodeU64(std::string_view bytes);

}  // namespace walbus::bridge

#endif  // WALBUS_BRIDGE_RELAY_JOURNAL_H_
