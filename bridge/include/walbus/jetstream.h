// walbus/jetstream.h: the bridge between a bus and NATS JetStream.
//
// Relay (out): a subscriber of the bus that publishes chosen events to
// JetStream in the CloudEvents NATS binding's binary mode (every attribute
// a `ce-*` header, the data as body) with `Nats-Msg-Id` = event id. A
// PubAck completes the event like any handler effect, so the stream's
// duplicate window removes the republish that follows a crash between the
// PubAck and the checkpoint. No connection, a timeout or a full stream is a
// retry with backoff while the subject waits: per-subject order holds across
// disconnects and restarts, and while the server is unreachable the outbox
// simply grows on disk.
//
// Inbound (in): a durable pull consumer whose messages are verified before
// they are trusted (attribute rules, size cap, an optional HMAC-SHA256
// signature per source key, which sources may publish which types), then
// taken into the local bus in one commit with a dedup record of the
// consumer (Bus::IngestEvent), and only then acknowledged. Invalid,
// unsigned (when signatures are required) or unauthorized messages are
// quarantined (Bus::Quarantine) and terminated; duplicates are acknowledged
// without effect; a local failure is a delayed negative acknowledgement.
//
// Threading: Relay and Inbound are thread-safe. A Relay works on the bus's
// worker threads; an Inbound owns one thread, stopped by Stop() or its
// destructor. The bus must outlive an Inbound; a Relay may be destroyed
// before or after the bus (its subscriber keeps what it needs).
#ifndef WALBUS_JETSTREAM_H_
#define WALBUS_JETSTREAM_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "walbus/bus.h"
#include "walbus/event.h"
#include "walbus/status.h"

namespace walbus::jetstream {

// The highest priority a relayed type may have (RelayOptions::priorities).
inline constexpr uint32_t kMaxRelayPriority = 3;

// Where the NATS server is and how to keep talking to it.
struct ConnectionOptions {
  // Default "nats://127.0.0.1:4222".
  std::string url = "nats://127.0.0.1:4222";
  // The client name the server shows. Default: none.
  std::string name;
  // How long one request (a publish's PubAck, a stream lookup) may take.
  std::chrono::milliseconds request_timeout{2000};
  // Pause between reconnect attempts; attempts never stop.
  std::chrono::milliseconds reconnect_wait{250};
};

// The stream the relay publishes into; created when missing.
struct StreamOptions {
  // Stream name, e.g. "ORDERS". Required.
  std::string name;
  // Subjects it stores, e.g. {"walbus.>"}. Required when it is created.
  std::vector<std::string> subjects;
  // How long JetStream remembers a Nats-Msg-Id to drop a republish. It must
  // cover a crash and restart of a device. Default 10 minutes.
  std::chrono::milliseconds duplicate_window{std::chrono::minutes(10)};
  // In-memory storage (tests); default false: file storage.
  bool memory_storage = false;
};

// Signing of relayed events: HMAC-SHA256 over id, type, source, subject,
// time and data, with the key named by key_id (headers walbus-key-id and
// walbus-signature). Empty key: not signed.
struct SigningKey {
  std::string key_id;  // Sent in walbus-key-id; the receiver looks the key up by it.
  std::string secret;  // The HMAC key; empty: messages are not signed.
};

// How a relay publishes (Relay::Attach).
struct RelayOptions {
  ConnectionOptions connection;  // Where the NATS server is.
  StreamOptions stream;          // The stream published into.
  // The relay's subscriber name (its checkpoint). Default "jetstream-relay".
  std::string subscriber_name = "jetstream-relay";
  // Event types relayed; empty: every type.
  std::vector<std::string> types;
  // When not empty, only events with this source are relayed (the others,
  // say events taken in from elsewhere, complete without a publish): a
  // device relays its own events, not the ones it received.
  std::string only_source;
  // NATS subject of an event. Default "<subject_prefix>.<source>.<type>",
  // the source one token by a reversible rule: '%', '.', '*', '>' and any
  // byte outside printable ASCII become %XX ("https://fleet.example/7" is
  // "https://fleet%2Eexample/7"; percent-decoding gives the source back);
  // the type's dotted words are tokens of their own.
  std::string subject_prefix = "walbus";
  // Maps an event to its NATS subject instead of the default; it must
  // match the stream's subjects. Called on worker threads.
  std::function<std::string(const Event&)> subject_for;
  SigningKey signing;  // Signing of the relayed events; default: unsigned.
  // The application column family (listed in Options::column_families)
  // where the bridge keeps its records; for a relay, each subject's
  // position and the journal of relayed messages not yet trusted to the
  // server. Required to exist. Relays and inbound consumers may share it
  // (their keys start with their kind and name).
  std::string column_family = "jetstream";
  // How long a relayed message stays in the journal after its PubAck.
  // Within that time, a server found to have lost it after a reconnection
  // gets it again (republished in order); after it, the relay trusts the
  // server. nats-server 2.9 writes an acknowledged message to its files a
  // moment after the PubAck (a SIGKILL loses that moment) and syncs them
  // every 2 minutes (a power loss loses those): set 2 minutes or more to
  // cover a power loss of the server's host too. The journal holds this
  // long's worth of relayed messages.
  std::chrono::milliseconds confirm_after{std::chrono::seconds(10)};
  // The most bytes of messages the journal may hold. Past it, the relay
  // sends nothing more until entries leave it after confirm_after
  // (Outcome::Wait: not a failure, counted in RelayStats::journal_waits):
  // the journal's disk use stays bounded, and a drain after days offline
  // goes at most this much per confirm_after. Under Options::disk_budget,
  // which does not count the journal, keep the two within the disk
  // (docs/devices.md sizes them). Each level of a relay with priorities
  // has a journal of its own, with this bound. 0 (the default): none.
  uint64_t max_journal_bytes = 0;
  // The bandwidth cap, for a metered or slow link: on average at most
  // this many bytes per second of messages (subject, NATS headers and
  // payload) go out. An event over the cap waits (Outcome::Wait: not a
  // failure, counted in RelayStats::rate_waits), and its subject with it;
  // other subjects go as the cap allows. 0 (the default): no cap.
  // Republishes from the journal after a server loss go at once and count
  // against the cap.
  uint64_t max_bytes_per_second = 0;
  // What may go out at once, above the rate, after a quiet spell. 0: one
  // second's worth. A message larger than this still goes, alone. Over
  // any interval of T seconds the relay sends at most burst_bytes +
  // max_bytes_per_second x T + one message. Requires max_bytes_per_second.
  uint64_t burst_bytes = 0;
  // Priority per event type, 1 to kMaxRelayPriority (the highest); types
  // not named go at 0. After days offline, a command's acknowledgement
  // should not wait behind a day of readings: each level is relayed by a
  // subscriber of its own ("<subscriber_name>" at 0, "<subscriber_name>.pN"
  // at level N), which reads the outbox past the lower levels' backlog,
  // and under the bandwidth cap a level that waits takes the next bytes
  // before any lower one. Each level has a connection and a journal of its
  // own. Order holds per subject within a level: each level is a sender of
  // its own across the bridge (its own origin and positions), so a subject
  // whose events have types on different levels is ordered within each
  // level only; give such types one level to keep one order. A level new
  // to the database starts where the lowest level resumes, so it takes
  // the waiting events of its types; a level taken away keeps its
  // subscriber registered (and the events it had not sent) until removed.
  // With `types` set, every type named here must be among them. Default:
  // none (one level).
  std::map<std::string, uint32_t> priorities;
  // Retries while unreachable: unlimited attempts, backoff up to 5 s.
  RetryPolicy retry{
      .max_attempts = UINT32_MAX, .base = std::chrono::milliseconds(50), .cap = std::chrono::milliseconds(5000)};
};

// What a relay did in this process.
struct RelayStats {
  bool connected = false;       // connected to NATS now
  uint64_t published = 0;       // PubAcks received (duplicates included)
  uint64_t duplicates = 0;      // PubAcks that said "duplicate": a republish
  uint64_t skipped = 0;         // events completed without a publish (only_source)
  uint64_t publish_errors = 0;  // failed publishes (each retried)
  uint64_t sent_bytes = 0;      // bytes of the messages sent (as the bandwidth cap counts them)
  uint64_t rate_waits = 0;      // times an event waited for the bandwidth cap
  uint64_t journal_waits = 0;   // times an event waited for room in the journal (max_journal_bytes)
  // Under max_journal_bytes, the bytes of messages in the journal that
  // this process relayed and has not confirmed yet (0 without a bound).
  uint64_t journal_bytes = 0;
  uint64_t disconnects = 0;    // connections lost
  double offline_seconds = 0;  // total time without a connection
  // Relayed messages JetStream had acknowledged and no longer held, found
  // when the relay checked its journal after a reconnection: counted at
  // each check that finds them missing, so a message whose republish was
  // cut short (the server went away again) counts again at the next one.
  uint64_t server_loss_detected = 0;
  uint64_t repaired = 0;        // of those, republished from the journal
  uint64_t journal_checks = 0;  // journal checks run
  // Times the stream itself was gone (created anew) after the relay had
  // published to it: messages confirmed before that are lost on the
  // server and cannot be republished (logged as an error).
  uint64_t unrepairable_losses = 0;
};

// One level of a relay with priorities (Relay::Levels).
struct RelayLevelStats {
  uint32_t priority = 0;        // the level: 0 (the lowest) to kMaxRelayPriority
  std::string subscriber_name;  // the subscriber that relays this level
  RelayStats stats;             // what this level's subscriber did
};

// A relay from one bus to JetStream (see the top of this file).
class Relay {
 public:
  // Subscribes a relay to `bus` (before or after Bus::Start) and connects;
  // when the server is unreachable it keeps trying in the background and
  // events wait in the outbox. InvalidArgument for bad options; IOError
  // when the NATS client cannot be set up.
  [[nodiscard]] static Status Attach(Bus* bus, RelayOptions options, std::unique_ptr<Relay>* out);

  virtual ~Relay();
  // What it did so far, in this process, all levels together (connected:
  // every level's connection is up). Thread-safe.
  virtual RelayStats Stats() const = 0;
  // The same per priority level, lowest first; one entry without
  // priorities. Thread-safe.
  virtual std::vector<RelayLevelStats> Levels() const = 0;
  // Prometheus text: walbus_relay_*, a series per level labelled with its
  // subscriber's name (lag is the subscriber's lag metrics).
  // Attach adds the same to the bus's metrics (Bus::Metrics, the
  // Options::metrics_http endpoint) for as long as the Relay lives.
  virtual std::string MetricsText() const = 0;
};

// How an inbound consumer fetches, verifies and takes messages in
// (Inbound::Start).
struct InboundOptions {
  ConnectionOptions connection;  // Where the NATS server is.
  // The stream and the durable consumer (created when missing; never
  // deleted by walbus). The durable name is also the dedup scope.
  // @{
  std::string stream;
  std::string durable;
  // @}
  // Subject filter of the consumer, e.g. "walbus.cloud.>". Required.
  std::string filter_subject;
  // A message not acknowledged within ack_wait is delivered again: what
  // the messages a killed process had fetched wait before they come to
  // the next one. While a fetched batch takes longer than a third of it,
  // its waiting messages are marked in progress, so a slow batch is not
  // delivered twice. Set on the durable consumer at every Start (one an
  // earlier start made keeps its messages that long otherwise).
  std::chrono::milliseconds ack_wait{std::chrono::seconds(5)};
  // Messages per fetch, and how long a fetch waits for the first one.
  // @{
  int fetch_batch = 64;
  std::chrono::milliseconds fetch_wait{500};
  // @}
  // Bigger messages (body and headers) are refused.
  size_t max_message_bytes = 1 << 20;
  // Verification keys by key id. With require_signature, a message without
  // a valid signature is refused; without it, a signature present must
  // still be valid.
  // @{
  std::map<std::string, std::string> keys;
  bool require_signature = false;
  // @}
  // Which key ids may sign for which source; empty: any known key.
  std::map<std::string, std::string> key_id_by_source;
  // Which event types each source may publish; a type ending in ".*"
  // allows every type under that prefix. Empty map: any source, any type.
  std::map<std::string, std::vector<std::string>> allowed_types_by_source;
  // Events with this source are acknowledged without effect: the bus's own
  // events coming back from the stream.
  std::string skip_source;
  // Delay of the redelivery after a local failure.
  std::chrono::milliseconds nak_delay{1000};
  // Per-subject order: a message carrying its sender's position
  // (ce-subjectseq) that comes before the ones ahead of it in that order is
  // held (negatively acknowledged with hold_delay, so the server delivers it
  // again) until they arrive. Once a gap has been waited for gap_timeout,
  // the held message is taken and the missing positions are skipped
  // (walbus_inbound_gaps_total, an error in the log); a skipped message
  // that arrives afterwards is still taken once, out of order, as late.
  // @{
  std::chrono::milliseconds hold_delay{250};
  std::chrono::milliseconds gap_timeout{std::chrono::minutes(5)};
  // @}
  // Messages delivered and not yet acknowledged, held ones included; the
  // server stops delivering at this bound.
  int max_ack_pending = 20000;
  // The application column family (listed in Options::column_families)
  // where the consumer keeps the stream sequence and time of the newest
  // message it took, written once per fetched batch: after a server
  // restart, a stream that no longer holds that message at that sequence
  // lost its tail, and a consumer ahead of it is made again (see
  // InboundStats::consumer_resets). Empty: kept in memory only, so a
  // restart of this process finds only a consumer past the stream's end.
  std::string column_family = "jetstream";
};

// What an inbound consumer did in this process.
struct InboundStats {
  bool connected = false;          // connected to NATS now
  uint64_t received = 0;           // messages fetched
  uint64_t ingested = 0;           // committed into the bus
  uint64_t duplicates = 0;         // acknowledged without effect: already taken
  uint64_t skipped = 0;            // acknowledged without effect: skip_source
  uint64_t quarantined = 0;        // refused, quarantined and terminated
  uint64_t naks = 0;               // local failures, delivered again later
  uint64_t held = 0;               // early in their sender's order: delivered again later
  uint64_t gaps = 0;               // gaps given up on after gap_timeout
  uint64_t skipped_positions = 0;  // positions those gaps skipped
  uint64_t late = 0;               // skipped messages taken after all, out of order
  // Times the durable consumer was found ahead of its stream after the
  // server restarted (it would skip what the stream stores next) and made
  // again from the newest message this consumer had taken.
  uint64_t consumer_resets = 0;
  // Times a batch taking longer than a third of ack_wait marked its
  // waiting messages in progress.
  uint64_t in_progress_marks = 0;
};

// A durable JetStream consumer feeding one bus (see the top of this file).
class Inbound {
 public:
  // Creates the durable consumer when missing and starts fetching on a
  // thread of its own. Offline-first: an unreachable server is retried.
  [[nodiscard]] static Status Start(Bus* bus, InboundOptions options, std::unique_ptr<Inbound>* out);

  // Stops fetching and closes the connection; the durable consumer stays on
  // the server. Idempotent; the destructor calls it.
  virtual void Stop() = 0;
  virtual ~Inbound();
  // What it did so far, in this process. Thread-safe.
  virtual InboundStats Stats() const = 0;
  // Prometheus text: walbus_inbound_*. Start adds the same to the bus's
  // metrics (Bus::Metrics, the Options::metrics_http endpoint) for as long
  // as the Inbound lives.
  virtual std::string MetricsText() const = 0;
};

}  // namespace walbus::jetstream

#endif  // WALBUS_JETSTREAM_H_
