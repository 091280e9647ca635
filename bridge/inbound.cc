// The inbound consumer: a durable pull consumer feeding Bus::IngestEvent.

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "bridge/bridge_log.h"
#include "bridge/bridge_metrics.h"
#include "bridge/cloudevents.h"
#include "bridge/nats_link.h"
#include "bridge/relay_journal.h"
#include "bus/util/bounds.h"
#include "bus/util/log_limiter.h"
#include "bus/util/mutex.h"
#include "walbus/jetstream.h"

namespace walbus::jetstream {
namespace {

using internal::CondVar;
using internal::Mutex;
using internal::MutexLock;

using bridge::NatsLink;
using namespace std::chrono_literals;

bool TypeAllowed(const std::vector<std::string>& allowed, const std::string& type) {
  for (const std::string& a : allowed) {
    if (a == type) return true;
    if (a.size() >= 2 && a.ends_with(".*") && type.starts_with(std::string_view(a).substr(0, a.size() - 1))) {
      return true;
    }
  }
  return false;
}

// What an inbound consumer counts, in this process.
struct InboundCounters {
  std::atomic<bool> connected{false};
  std::atomic<uint64_t> received{0}, ingested{0}, duplicates{0}, skipped{0}, quarantined{0}, naks{0};
  std::atomic<uint64_t> held{0}, gaps_taken{0}, skipped_positions{0}, late{0}, consumer_resets{0};
  std::atomic<uint64_t> in_progress_marks{0};

  InboundStats Read() const {
    InboundStats s;
    s.connected = connected.load(std::memory_order_relaxed);
    s.received = received.load(std::memory_order_relaxed);
    s.ingested = ingested.load(std::memory_order_relaxed);
    s.duplicates = duplicates.load(std::memory_order_relaxed);
    s.skipped = skipped.load(std::memory_order_relaxed);
    s.quarantined = quarantined.load(std::memory_order_relaxed);
    s.naks = naks.load(std::memory_order_relaxed);
    s.held = held.load(std::memory_order_relaxed);
    s.gaps = gaps_taken.load(std::memory_order_relaxed);
    s.skipped_positions = skipped_positions.load(std::memory_order_relaxed);
    s.late = late.load(std::memory_order_relaxed);
    s.consumer_resets = consumer_resets.load(std::memory_order_relaxed);
    s.in_progress_marks = in_progress_marks.load(std::memory_order_relaxed);
    return s;
  }
};

// walbus_inbound_*, one series per durable consumer.
class InboundMetrics final : public MetricsSource {
 public:
  InboundMetrics(std::shared_ptr<const InboundCounters> counters, std::string durable)
      : counters_(std::move(counters)), durable_(std::move(durable)) {}

  void CollectMetrics(std::vector<MetricFamily>* out) const override {
    const InboundStats s = counters_->Read();
    const MetricLabel label{"consumer", durable_};
    bridge::AddSeries(out, "walbus_inbound_connected", MetricType::kGauge, "1 while the consumer is connected to NATS.",
                      label, s.connected ? 1 : 0);
    const struct {
      const char* name;
      const char* help;
      uint64_t value;
    } counters[] = {
        {"walbus_inbound_received_total", "Messages fetched.", s.received},
        {"walbus_inbound_ingested_total", "Messages committed into the bus.", s.ingested},
        {"walbus_inbound_duplicates_total", "Messages already taken, acknowledged without effect.", s.duplicates},
        {"walbus_inbound_skipped_total", "The bus's own events, acknowledged without effect.", s.skipped},
        {"walbus_inbound_quarantined_total", "Messages refused, quarantined and terminated.", s.quarantined},
        {"walbus_inbound_naks_total", "Local failures; the message comes again later.", s.naks},
        {"walbus_inbound_held_total", "Messages early in their sender's order, delivered again later.", s.held},
        {"walbus_inbound_gaps_total", "Gaps in a sender's order given up on after gap_timeout.", s.gaps},
        {"walbus_inbound_skipped_positions_total", "Positions skipped by those gaps.", s.skipped_positions},
        {"walbus_inbound_late_total", "Skipped messages taken after all, out of order.", s.late},
        {"walbus_inbound_consumer_resets_total", "Times the consumer was found ahead of its stream and made again.",
         s.consumer_resets},
        {"walbus_inbound_in_progress_marks_total",
         "Times a batch taking long marked its waiting messages in progress (their ack_wait restarts).",
         s.in_progress_marks},
    };
    for (const auto& c : counters) {
      bridge::AddSeries(out, c.name, MetricType::kCounter, c.help, label, static_cast<double>(c.value));
    }
  }

 private:
  const std::shared_ptr<const InboundCounters> counters_;
  const std::string durable_;
};

class InboundImpl final : public Inbound {
 public:
  InboundImpl(Bus* bus, InboundOptions options, std::unique_ptr<NatsLink> link)
      : bus_(bus),
        options_(std::move(options)),
        link_(std::move(link)),
        source_label_("jetstream:" + options_.stream + "/" + options_.durable) {
    thread_ = std::thread([this] { Run(); });
  }
  ~InboundImpl() override { Stop(); }

  void Stop() override {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.NotifyAll();
    if (thread_.joinable()) thread_.join();
    // Destroy, never Unsubscribe: that would delete the durable consumer.
    if (sub_ != nullptr) natsSubscription_Destroy(sub_);
    sub_ = nullptr;
    link_.reset();
  }

  InboundStats Stats() const override { return counters_->Read(); }

  std::string MetricsText() const override { return bridge::TextOf(*metrics_); }
  std::shared_ptr<const MetricsSource> metrics() const { return metrics_; }

 private:
  bool Sleep(std::chrono::milliseconds d) {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + d;
    while (!stopping_ && std::chrono::steady_clock::now() < deadline) wake_.WaitUntil(&lock, deadline);
    return !stopping_;
  }
  bool stopping() {
    MutexLock lock(&mu_);
    return stopping_;
  }

  // Owned thread: subscribes once connected, then fetches until Stop().
  void Run() {
    while (!stopping()) {
      LogLinkChanges(bus_, *link_, "inbound", options_.durable);
      counters_->connected.store(link_->connected(), std::memory_order_relaxed);
      if (!link_->connected()) {
        Sleep(50ms);
        continue;
      }
      if (const uint64_t epoch = link_->connection_epoch(); epoch != checked_epoch_) {
        Status s = LoadCursor();
        if (s.ok()) s = CheckConsumer();
        if (!s.ok()) {
          Warn("check the consumer", s);
          Sleep(500ms);
          continue;
        }
        checked_epoch_ = epoch;
      }
      if (sub_ == nullptr) {
        if (Status s = Subscribe(0); !s.ok()) {
          Warn("subscribe", s);
          Sleep(500ms);
          continue;
        }
      }
      natsMsgList list{};
      jsErrCode err = static_cast<jsErrCode>(0);
      natsStatus s = natsSubscription_Fetch(&list, sub_, options_.fetch_batch, options_.fetch_wait.count(), &err);
      if (s == NATS_TIMEOUT) continue;
      if (s != NATS_OK) {
        Warn("fetch", bridge::FromNats(s, "fetch from " + options_.durable));
        Sleep(100ms);
        continue;
      }
      ProcessBatch(list);
      KeepCursor();
      natsMsgList_Destroy(&list);
    }
  }

  // Binds to the durable consumer as it is on the server (made again from
  // another start by CheckConsumer, say), creating it when missing: from
  // the stream's start, or from `start_seq` when not 0.
  Status Subscribe(uint64_t start_seq) {
    jsErrCode err = static_cast<jsErrCode>(0);
    if (start_seq == 0) {
      jsSubOptions bind;
      jsSubOptions_Init(&bind);
      bind.Stream = options_.stream.c_str();
      bind.Consumer = options_.durable.c_str();
      natsStatus s = js_PullSubscribe(&sub_, link_->js(), options_.filter_subject.c_str(), options_.durable.c_str(),
                                      nullptr, &bind, &err);
      if (s == NATS_OK) return KeepAckWait();
      sub_ = nullptr;
      if (s != NATS_NOT_FOUND && err != JSConsumerNotFoundErr) {
        return bridge::FromNats(s, "bind to consumer " + options_.durable + " on " + options_.stream);
      }
    }
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = options_.stream.c_str();
    so.Config.Durable = options_.durable.c_str();
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ack_wait).count();
    so.Config.MaxAckPending = options_.max_ack_pending;
    so.Config.DeliverPolicy = start_seq == 0 ? js_DeliverAll : js_DeliverByStartSequence;
    so.Config.OptStartSeq = start_seq;
    natsStatus s = js_PullSubscribe(&sub_, link_->js(), options_.filter_subject.c_str(), options_.durable.c_str(),
                                    nullptr, &so, &err);
    if (s != NATS_OK) {
      sub_ = nullptr;
      return bridge::FromNats(s, "pull subscribe " + options_.durable + " on " + options_.stream);
    }
    return Status::OK();
  }

  // A consumer made by an earlier start keeps the ack_wait it was made
  // with (the old default was 30 s): messages the killed process had
  // fetched would wait that long. It is set to this start's, which applies
  // to the messages pending too.
  Status KeepAckWait() {
    jsConsumerInfo* ci = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    natsStatus s =
        js_GetConsumerInfo(&ci, link_->js(), options_.stream.c_str(), options_.durable.c_str(), nullptr, &err);
    if (s != NATS_OK) return bridge::FromNats(s, "look up consumer " + options_.durable);
    const int64_t want = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ack_wait).count();
    Status result = Status::OK();
    if (ci->Config != nullptr && ci->Config->AckWait != want) {
      const int64_t was = ci->Config->AckWait;
      ci->Config->AckWait = want;
      jsConsumerInfo* updated = nullptr;
      s = js_UpdateConsumer(&updated, link_->js(), options_.stream.c_str(), ci->Config, nullptr, &err);
      if (s == NATS_OK) {
        jsConsumerInfo_Destroy(updated);
        BridgeLog(bus_, LogLevel::kInfo, "walbus inbound {}: consumer's ack_wait set from {} ms to {} ms",
                  options_.durable, was / 1000000, want / 1000000);
      } else {
        result = bridge::FromNats(s, "set the ack_wait of consumer " + options_.durable);
      }
    }
    jsConsumerInfo_Destroy(ci);
    return result;
  }

  // When the stream stored message `seq` (ns since the epoch); 0 when it
  // holds no such message.
  int64_t StoredTime(uint64_t seq) {
    natsMsg* msg = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    if (js_GetMsg(&msg, link_->js(), options_.stream.c_str(), seq, nullptr, &err) != NATS_OK) return 0;
    const int64_t t = natsMsg_GetTime(msg);
    natsMsg_Destroy(msg);
    return t;
  }

  // The first sequence in [lo, hi] stored after `t`, hi + 1 when none (a
  // stream's times grow with its sequences). A sequence the stream does
  // not hold counts as stored after: the search errs towards the start.
  uint64_t FirstStoredAfter(int64_t t, uint64_t lo, uint64_t hi) {
    while (lo <= hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      const int64_t stored = StoredTime(mid);
      if (stored == 0 || stored > t) {
        if (mid == lo) return lo;
        hi = mid - 1;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }

  // After every (re)connection. A server killed and restarted may keep a
  // consumer's state but lose the tail of its stream: the consumer then
  // counts as delivered the sequences the stream stores next (the
  // sender's republished messages among them) and would skip them. Such a
  // consumer is made again from the first sequence it has not truly
  // taken: past its ack floor, or the first one stored after its last
  // delivery, whichever comes first. Redelivered messages are duplicates.
  Status CheckConsumer() {
    jsConsumerInfo* ci = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    natsStatus s =
        js_GetConsumerInfo(&ci, link_->js(), options_.stream.c_str(), options_.durable.c_str(), nullptr, &err);
    if (s == NATS_NOT_FOUND) return Status::OK();  // Subscribe creates it
    if (s != NATS_OK) return bridge::FromNats(s, "look up consumer " + options_.durable);
    const jsSequenceInfo delivered = ci->Delivered;
    // Every sequence at or below it is settled: the ack floor, or for a
    // consumer made from a start sequence that settled nothing yet, the one
    // before its start.
    uint64_t settled = ci->AckFloor.Stream;
    if (ci->Config != nullptr && ci->Config->OptStartSeq > 0) settled = std::max(settled, ci->Config->OptStartSeq - 1);
    jsConsumerInfo_Destroy(ci);
    jsStreamInfo* si = nullptr;
    s = js_GetStreamInfo(&si, link_->js(), options_.stream.c_str(), nullptr, &err);
    if (s != NATS_OK) return bridge::FromNats(s, "look up stream " + options_.stream);
    const uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    // From where the stream holds messages this consumer never took: past
    // its end, or, when it no longer holds the newest message this consumer
    // took where it was (it lost its tail and stored new ones there), from
    // the first one stored after that message.
    const bool lost_tail =
        cursor_ && (cursor_->seq > last || (cursor_->seq >= first && StoredTime(cursor_->seq) != cursor_->time));
    const uint64_t new_from = lost_tail ? FirstStoredAfter(cursor_->time, first, last) : last + 1;
    // Ahead: it counts as delivered some of those, and would skip them.
    if (delivered.Stream < new_from) return Status::OK();
    uint64_t start = std::min(settled + 1, new_from);
    if (!cursor_ && delivered.Stream > last) {
      start = first;  // nothing kept: read the stream again (the dedup records make repeats duplicates)
    }
    start = std::max(start, std::max<uint64_t>(first, 1));
    const uint64_t floor_stream = settled;
    if (sub_ != nullptr) natsSubscription_Destroy(sub_);
    sub_ = nullptr;
    s = js_DeleteConsumer(link_->js(), options_.stream.c_str(), options_.durable.c_str(), nullptr, &err);
    if (s != NATS_OK && s != NATS_NOT_FOUND) return bridge::FromNats(s, "delete consumer " + options_.durable);
    if (Status made = Subscribe(start); !made.ok()) return made;
    counters_->consumer_resets.fetch_add(1, std::memory_order_relaxed);
    BridgeLog(bus_, LogLevel::kWarning,
              "walbus inbound {}: consumer was ahead of stream {} after a server restart (delivered up to {}, settled "
              "up to {}, stream holds {}..{}, newest taken {}); made again from sequence {}",
              options_.durable, options_.stream, delivered.Stream, floor_stream, first, last,
              cursor_ ? cursor_->seq : 0, start);
    return Status::OK();
  }

  // Why a message must not be trusted; empty when it may be.
  std::string Refusal(const bridge::Headers& headers, size_t bytes, const Event& event) const {
    if (bytes > options_.max_message_bytes) {
      return "message of " + std::to_string(bytes) + " bytes exceeds the cap of " +
             std::to_string(options_.max_message_bytes);
    }
    const std::string* signature = bridge::FindHeader(headers, bridge::kSignatureHeader);
    if (signature == nullptr) {
      if (options_.require_signature) return "unsigned message; a signature is required";
    } else {
      const std::string* key_id = bridge::FindHeader(headers, bridge::kKeyIdHeader);
      if (key_id == nullptr) return "signature without a key id";
      auto key = options_.keys.find(*key_id);
      if (key == options_.keys.end()) return "signed with unknown key '" + *key_id + "'";
      auto bound = options_.key_id_by_source.find(event.source);
      if (bound != options_.key_id_by_source.end() && bound->second != *key_id) {
        return "key '" + *key_id + "' may not sign for source '" + event.source + "'";
      }
      if (!bridge::SignatureMatches(event, key->second, *signature)) return "signature does not match";
    }
    if (!options_.allowed_types_by_source.empty()) {
      auto allowed = options_.allowed_types_by_source.find(event.source);
      if (allowed == options_.allowed_types_by_source.end()) return "source '" + event.source + "' is not authorized";
      if (!TypeAllowed(allowed->second, event.type)) {
        return "source '" + event.source + "' may not publish type '" + event.type + "'";
      }
    }
    return {};
  }

  // Takes a fetched batch in, message by message. The server redelivers a
  // message not acknowledged within ack_wait, so while the batch takes
  // longer than a third of it, the messages still waiting are marked in
  // progress (their ack_wait starts again): ack_wait can stay short, which
  // is what a crashed process's messages wait before they come again.
  void ProcessBatch(const natsMsgList& list) {
    auto marked = std::chrono::steady_clock::now();
    for (int i = 0; i < list.Count; ++i) {
      Process(list.Msgs[i]);
      const auto now = std::chrono::steady_clock::now();
      if (now - marked < options_.ack_wait / 3) continue;
      for (int j = i + 1; j < list.Count; ++j) natsMsg_InProgress(list.Msgs[j], nullptr);
      counters_->in_progress_marks.fetch_add(1, std::memory_order_relaxed);
      marked = now;
    }
  }

  void Process(natsMsg* msg) {
    counters_->received.fetch_add(1, std::memory_order_relaxed);
    const bridge::Headers headers = bridge::ReadHeaders(msg);
    const char* data = natsMsg_GetData(msg);
    const std::string body(data == nullptr ? "" : data, static_cast<size_t>(natsMsg_GetDataLength(msg)));
    size_t bytes = body.size();
    for (const auto& [name, value] : headers) bytes += name.size() + value.size() + 4;

    Event event;
    std::string refusal;
    Result<std::optional<bridge::SenderPosition>> position = std::optional<bridge::SenderPosition>();
    // An oversized message is refused unread; a readable one by the rules.
    if (bytes <= options_.max_message_bytes) {
      if (Status parsed = bridge::FromHeaders(headers, body, &event); !parsed.ok()) {
        refusal = parsed.message();
      } else if (position = bridge::ReadPosition(headers); !position.ok()) {
        refusal = position.status().message();
      }
    }
    if (refusal.empty()) refusal = Refusal(headers, bytes, event);
    if (!refusal.empty()) {
      const std::string raw = bridge::MessageBytes(headers, body.substr(0, std::min(body.size(), size_t{64} << 10)));
      if (Status q = bus_->Quarantine(raw, source_label_, refusal); !q.ok()) {
        Nak(msg, q);  // Keep it on the server until it can be recorded.
        return;
      }
      counters_->quarantined.fetch_add(1, std::memory_order_relaxed);
      Settle(msg, /*terminate=*/true);
      return;
    }
    if (!options_.skip_source.empty() && event.source == options_.skip_source) {
      counters_->skipped.fetch_add(1, std::memory_order_relaxed);
      Settle(msg, /*terminate=*/false);
      return;
    }
    Take(msg, event, *position);
  }

  // The key of a sender's order on this side: its relay's origin, then
  // the event's source and subject.
  static std::string OrderKey(const bridge::SenderPosition& position, const Event& event) {
    std::string key = position.origin;
    key.push_back('\0');
    key += event.source;
    key.push_back('\0');
    key += event.subject;
    return key;
  }

  // Whether the gap before `next_position` of `key` has been waited for
  // long enough. Remembers when it was first met (in memory: a restart
  // waits again).
  bool GapTimedOut(const std::string& key, uint64_t next_position) {
    const auto now = std::chrono::steady_clock::now();
    if (gaps_.size() > kMaxTrackedGaps) gaps_.clear();  // bound: start waiting again
    auto [it, fresh] = gaps_.try_emplace(key, Gap{next_position, now});
    if (!fresh && it->second.waiting_for != next_position) it->second = Gap{next_position, now};
    return now - it->second.since >= options_.gap_timeout;
  }

  // Commits a verified event into the bus in its sender's order, then
  // acknowledges it; an early one is held.
  void Take(natsMsg* msg, const Event& event, const std::optional<bridge::SenderPosition>& position) {
    IngestOptions ingest;
    ingest.source = source_label_;
    ingest.dedup_scope = options_.durable;
    if (position) {
      ingest.order_key = OrderKey(*position, event);
      ingest.position = position->position;
    }
    Result<IngestResult> r = bus_->IngestEvent(event, ingest);
    if (r.ok() && r->disposition == IngestDisposition::kAhead) {
      if (!GapTimedOut(ingest.order_key, r->next_position)) {
        counters_->held.fetch_add(1, std::memory_order_relaxed);
        natsMsg_NakWithDelay(msg, options_.hold_delay.count(), nullptr);
        return;
      }
      ingest.accept_gap = true;
      r = bus_->IngestEvent(event, ingest);
      if (r.ok() && r->skipped_positions > 0) ReportGap(event, *position, r->skipped_positions);
    }
    if (r.ok()) {
      if (position) gaps_.erase(ingest.order_key);
      switch (r->disposition) {
        case IngestDisposition::kDuplicate: counters_->duplicates.fetch_add(1, std::memory_order_relaxed); break;
        case IngestDisposition::kLate:
          counters_->late.fetch_add(1, std::memory_order_relaxed);
          counters_->ingested.fetch_add(1, std::memory_order_relaxed);
          BridgeLog(bus_, LogLevel::kWarning,
                    "walbus inbound {}: event {} of subject '{}' (position {}) arrived after its gap was skipped; "
                    "taken out of order",
                    options_.durable, event.id.ToString(), event.subject, position ? position->position : 0);
          break;
        default: counters_->ingested.fetch_add(1, std::memory_order_relaxed); break;
      }
      // A lost ack only brings the message back, and the dedup record
      // makes that a duplicate.
      Settle(msg, /*terminate=*/false);
    } else if (r.status().IsInvalidArgument()) {
      counters_->quarantined.fetch_add(1, std::memory_order_relaxed);  // the bus quarantined it
      Settle(msg, /*terminate=*/true);
    } else {
      Nak(msg, r.status());
    }
  }

  void ReportGap(const Event& event, const bridge::SenderPosition& position, uint64_t skipped) {
    counters_->gaps_taken.fetch_add(1, std::memory_order_relaxed);
    counters_->skipped_positions.fetch_add(skipped, std::memory_order_relaxed);
    BridgeLog(bus_, LogLevel::kError,
              "walbus inbound {}: source '{}' subject '{}' (origin {}): positions {}..{} did not arrive within {} ms; "
              "skipped, and position {} taken",
              options_.durable, event.source, event.subject, position.origin, position.position - skipped,
              position.position - 1, options_.gap_timeout.count(), position.position);
  }

  // Acknowledges (or terminates) a message this consumer is done with, and
  // notes it for the cursor.
  void Settle(natsMsg* msg, bool terminate) {
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
      if (!batch_cursor_ || meta->Sequence.Stream > batch_cursor_->seq) {
        batch_cursor_ = Cursor{meta->Sequence.Stream, meta->Timestamp};
      }
      jsMsgMetaData_Destroy(meta);
    }
    if (terminate) {
      natsMsg_Term(msg, nullptr);
    } else {
      natsMsg_Ack(msg, nullptr);
    }
  }

  // After each fetched batch: the newest message taken, kept in the column
  // family (one small commit a batch) for CheckConsumer.
  void KeepCursor() {
    if (!batch_cursor_) return;
    if (!cursor_ || batch_cursor_->seq > cursor_->seq) {
      cursor_ = batch_cursor_;
      if (!options_.column_family.empty()) {
        Transaction tx = bus_->Begin();
        Status s = tx.Put(options_.column_family, bridge::InboundCursorKey(options_.durable),
                          bridge::EncodeU64(cursor_->seq) + bridge::EncodeU64(static_cast<uint64_t>(cursor_->time)));
        if (s.ok()) s = tx.Commit().status();
        if (!s.ok()) Warn("keep the consumer's cursor", s);
      }
    }
    batch_cursor_.reset();
  }

  // The cursor an earlier process kept; an error when it cannot be read.
  Status LoadCursor() {
    if (options_.column_family.empty() || cursor_) return Status::OK();
    Transaction tx = bus_->Begin();
    Result<std::optional<std::string>> got = tx.Get(options_.column_family, bridge::InboundCursorKey(options_.durable));
    if (!got.ok()) return got.status();
    if (got->has_value() && (*got)->size() == 16) {
      cursor_ = Cursor{*bridge::DecodeU64(std::string_view(**got).substr(0, 8)),
                       static_cast<int64_t>(*bridge::DecodeU64(std::string_view(**got).substr(8)))};
    }
    return Status::OK();
  }

  void Nak(natsMsg* msg, const Status& why) {
    counters_->naks.fetch_add(1, std::memory_order_relaxed);
    Warn("take a message in", why);
    natsMsg_NakWithDelay(msg, options_.nak_delay.count(), nullptr);
  }

  void Warn(const char* what, const Status& why) {
    static internal::LogLimiter limiter(1);
    uint64_t held = 0;
    if (limiter.Allow(&held)) {
      BridgeLog(bus_, LogLevel::kWarning, "walbus inbound {}: could not {}: {} ({} similar lines held back)",
                options_.durable, what, why.ToString(), held);
    }
  }

  Bus* const bus_;
  const InboundOptions options_;
  std::unique_ptr<NatsLink> link_;
  const std::string source_label_;
  natsSubscription* sub_ = nullptr;  // used by thread_ alone, then by Stop()
  Mutex mu_;
  CondVar wake_;
  bool stopping_ GUARDED_BY(mu_) = false;
  // Shared with the bus's metrics, which may read them after this is gone.
  const std::shared_ptr<InboundCounters> counters_ = std::make_shared<InboundCounters>();
  const std::shared_ptr<const MetricsSource> metrics_ = std::make_shared<InboundMetrics>(counters_, options_.durable);
  // Used by thread_ alone.
  // @{
  struct Gap {
    uint64_t waiting_for;  // the first missing position
    std::chrono::steady_clock::time_point since;
  };
  static constexpr size_t kMaxTrackedGaps = 100000;
  std::unordered_map<std::string, Gap> gaps_;
  uint64_t checked_epoch_ = 0;  // the connection whose consumer was checked
  struct Cursor {
    uint64_t seq;  // stream sequence of the newest message taken
    int64_t time;  // when the stream stored it, ns since the epoch
  };
  std::optional<Cursor> cursor_;        // as kept in the column family
  std::optional<Cursor> batch_cursor_;  // the newest of the batch being processed
  // @}
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace

Inbound::~Inbound() = default;

Status Inbound::Start(Bus* bus, InboundOptions options, std::unique_ptr<Inbound>* out) {
  out->reset();
  if (bus == nullptr) return Status::InvalidArgument("no bus given");
  if (options.stream.empty() || options.durable.empty()) {
    return Status::InvalidArgument("an inbound consumer needs a stream and a durable name");
  }
  if (options.filter_subject.empty()) return Status::InvalidArgument("an inbound consumer needs a filter subject");
  using std::chrono::milliseconds;
  if (Status s = internal::CheckBounds(
          "InboundOptions",
          {
              {"fetch_batch", options.fetch_batch, 1, 1 << 16},
              {"max_ack_pending", options.max_ack_pending, options.fetch_batch, internal::kNoMax},
              {"max_message_bytes", internal::CountValue(options.max_message_bytes), 1, int64_t{64} << 20},
          },
          {
              {"ack_wait", options.ack_wait, milliseconds(1), internal::kDay},
              {"fetch_wait", options.fetch_wait, milliseconds(1), std::chrono::hours(1)},
              {"nak_delay", options.nak_delay, milliseconds(0), internal::kDay},
              {"hold_delay", options.hold_delay, milliseconds(1), internal::kDay},
              {"gap_timeout", options.gap_timeout, milliseconds(0), internal::kNoLongest},
          });
      !s.ok()) {
    return s;
  }
  if (Status s = bridge::CheckConnection(options.connection); !s.ok()) return s;
  if (!options.column_family.empty()) {
    Transaction tx = bus->Begin();
    if (Result<std::optional<std::string>> got =
            tx.Get(options.column_family, bridge::InboundCursorKey(options.durable));
        !got.ok()) {
      return bridge::ColumnFamilyReadError("inbound", options.column_family, got.status());
    }
  }
  std::unique_ptr<NatsLink> link;
  if (Status s = NatsLink::Open(options.connection, &link); !s.ok()) return s;
  auto inbound = std::make_unique<InboundImpl>(bus, std::move(options), std::move(link));
  if (Status s = bus->AddMetricsSource(inbound->metrics()); !s.ok()) return s;
  *out = std::move(inbound);
  return Status::OK();
}

}  // namespace walbus::jetstream
