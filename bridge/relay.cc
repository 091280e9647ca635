// The relay: a subscriber whose effect is a JetStream publish.

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "bridge/bridge_log.h"
#include "bridge/bridge_metrics.h"
#include "bridge/byte_rate.h"
#include "bridge/cloudevents.h"
#include "bridge/nats_link.h"
#include "bridge/relay_journal.h"
#include "bus/util/bounds.h"
#include "bus/util/log_limiter.h"
#include "bus/util/mutex.h"
#include "bus/util/unix_time.h"
#include "walbus/jetstream.h"

namespace walbus::jetstream {
namespace {

using internal::CondVar;
using internal::Mutex;
using internal::MutexLock;

using bridge::DecodeJournalEntry;
using bridge::DecodeU64;
using bridge::EncodeJournalEntry;
using bridge::EncodeU64;
using bridge::JournalEntry;
using bridge::NatsLink;

// One level of a relay: its subscriber's options (their types are the
// level's), its priority, and the types that higher levels relay (for the
// lowest level when it takes every type: it completes those without a
// publish).
struct Lane {
  RelayOptions options;
  uint32_t priority = 0;
  std::set<std::string> relayed_above;
};

// What one level's handler needs; shared by the Relay and the subscriber's
// handler, so that either may go first. Owns the journal checker thread,
// stopped by StopChecker() (the Relay's destructor) or its own destructor.
// `rate` (null: no cap) is shared by the relay's levels.
class RelayCore {
 public:
  RelayCore(Bus* bus, Lane lane, std::shared_ptr<bridge::ByteRate> rate, std::unique_ptr<NatsLink> link,
            std::string origin)
      : bus_(bus),
        options_(std::move(lane.options)),
        priority_(lane.priority),
        relayed_above_(std::move(lane.relayed_above)),
        keys_(options_.subscriber_name),
        origin_(std::move(origin)),
        rate_(std::move(rate)),
        link_(std::move(link)) {
    link_->SetChangeListener([this](bool connected) { OnLinkChange(connected); });
    // Records of an earlier process are checked once connected.
    check_due_ = std::chrono::steady_clock::now();
    checker_ = std::thread([this] { RunChecker(); });
  }
  ~RelayCore() { StopChecker(); }

  void StopChecker() {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.NotifyAll();
    if (checker_.joinable()) checker_.join();
    link_->SetChangeListener(nullptr);
  }

  Outcome Handle(const Event& event, HandlerContext& ctx) {
    if (!options_.only_source.empty() && event.source != options_.only_source) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return Outcome::Done();
    }
    if (relayed_above_.contains(event.type)) return Outcome::Done();  // a higher level's subscriber relays it
    // Offline: wait rather than queue publishes in the client. Not the
    // event's failure: logged at debug level, counted as a wait.
    if (!link_->connected()) return Outcome::Wait(options_.connection.reconnect_wait, "not connected to NATS");
    WaitForReconnectCheck();
    if (Status s = EnsureStreamOnce(); !s.ok()) return Failed(event, s);
    const std::string position_key = keys_.Position(event.source, event.subject);
    Result<std::optional<std::string>> last = ctx.Get(options_.column_family, position_key);
    if (!last.ok()) return Failed(event, last.status());
    const uint64_t position = (last->has_value() ? DecodeU64(**last).value_or(0) : 0) + 1;
    if (JournalFull()) {
      journal_waits_.fetch_add(1, std::memory_order_relaxed);
      return Outcome::Wait(UntilNextCheck(), "the relay's journal is full (max_journal_bytes)");
    }
    JournalEntry entry;
    const bridge::Headers headers = MakeMessage(event, position, &entry);
    if (rate_ != nullptr) {
      const auto wait = rate_->Take(WireBytes(entry.nats_subject, headers, event.data), Clock::now(), priority_);
      if (wait.count() > 0) {
        rate_waits_.fetch_add(1, std::memory_order_relaxed);
        return Outcome::Wait(std::chrono::ceil<std::chrono::milliseconds>(wait), "over the relay's bandwidth cap");
      }
    }
    Status published = PublishMessage(entry.nats_subject, headers, event.data, &entry);
    if (!published.ok()) return Failed(event, published);
    Status kept = ctx.Put(options_.column_family, position_key, EncodeU64(position));
    const std::string journaled = EncodeJournalEntry(entry);
    if (kept.ok()) kept = ctx.Put(options_.column_family, keys_.Journal(event.seq), journaled);
    // With every completion (a few bytes in the same batch): a completion
    // that failed to commit cannot leave it unwritten.
    if (kept.ok()) kept = ctx.Put(options_.column_family, keys_.Published(), "1");
    if (!kept.ok()) return Failed(event, kept);
    NoteJournaled(event.seq, journaled.size());
    ScheduleCheck(std::chrono::steady_clock::now() + options_.confirm_after);
    return Outcome::Done();
  }

  RelayStats Stats() const {
    RelayStats s;
    s.connected = link_->connected();
    s.published = published_.load(std::memory_order_relaxed);
    s.duplicates = duplicates_.load(std::memory_order_relaxed);
    s.skipped = skipped_.load(std::memory_order_relaxed);
    s.publish_errors = errors_.load(std::memory_order_relaxed);
    s.sent_bytes = sent_bytes_.load(std::memory_order_relaxed);
    s.rate_waits = rate_waits_.load(std::memory_order_relaxed);
    s.journal_waits = journal_waits_.load(std::memory_order_relaxed);
    s.journal_bytes = journal_bytes_.load(std::memory_order_relaxed);
    s.disconnects = link_->disconnects();
    s.offline_seconds = link_->offline_seconds();
    s.server_loss_detected = loss_detected_.load(std::memory_order_relaxed);
    s.repaired = repaired_.load(std::memory_order_relaxed);
    s.journal_checks = checks_.load(std::memory_order_relaxed);
    s.unrepairable_losses = unrepairable_.load(std::memory_order_relaxed);
    return s;
  }

  const RelayOptions& options() const { return options_; }
  uint32_t priority() const { return priority_; }

 private:
  using Clock = std::chrono::steady_clock;

  // The run of the server connected to now (kUnknownServerRun when none).
  uint64_t ServerRun() const { return bridge::ServerRunOf(link_->server_id()); }

  // The client's thread, after a (re)connection: the stream is looked up
  // again (the server may have forgotten it) and the journal checked
  // before new messages go out, so that what is republished comes first.
  // On the client's thread: the checker logs the change (the bus may not
  // be touched from there) and, after a (re)connection, checks the journal.
  void OnLinkChange(bool connected) {
    if (connected) stream_ready_.store(false, std::memory_order_release);
    {
      MutexLock lock(&mu_);
      link_changed_ = true;
      if (connected) {
        reconnect_check_pending_ = true;
        check_due_ = Clock::now();
      }
    }
    cv_.NotifyAll();
  }

  bool JournalFull() const {
    return options_.max_journal_bytes > 0 &&
           journal_bytes_.load(std::memory_order_relaxed) >= options_.max_journal_bytes;
  }

  // Until the journal's next check may confirm entries (at least 1 ms;
  // confirm_after when none is due).
  std::chrono::milliseconds UntilNextCheck() {
    // A check under way frees room as it ends.
    constexpr std::chrono::milliseconds kCheckUnderWay{50};
    MutexLock lock(&mu_);
    if (!check_due_) return kCheckUnderWay;
    return std::max(std::chrono::ceil<std::chrono::milliseconds>(*check_due_ - Clock::now()),
                    std::chrono::milliseconds(1));
  }

  // The completion of the event at `seq` journals `bytes` (counted before
  // it commits; a retried completion replaces the count). Only under a
  // bound: the count costs a map entry per journaled message.
  void NoteJournaled(uint64_t seq, size_t bytes) {
    if (options_.max_journal_bytes == 0) return;
    MutexLock lock(&journal_mu_);
    const JournaledSize entry{bytes, Clock::now()};
    auto [it, fresh] = journal_sizes_.try_emplace(seq, entry);
    if (!fresh) {
      journal_bytes_.fetch_sub(it->second.bytes, std::memory_order_relaxed);
      it->second = entry;
    }
    journal_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }

  // When entries journaled above the checkpoint the last check read up
  // to are due to be confirmed (not before `soonest`); nullopt when there
  // are none. Without it, a relay whose journal is full would journal
  // nothing more, so schedule no check, and wait for ever.
  std::optional<Clock::time_point> OldestUncheckedDue(Clock::time_point soonest) {
    MutexLock lock(&journal_mu_);
    if (journal_sizes_.empty()) return std::nullopt;
    return std::max(soonest, journal_sizes_.begin()->second.at + options_.confirm_after);
  }

  // The highest event seq this process journaled and has not confirmed
  // (under a bound; 0 without).
  uint64_t LastJournaledSeq() {
    MutexLock lock(&journal_mu_);
    return journal_sizes_.empty() ? 0 : journal_sizes_.rbegin()->first;
  }

  // The entries of `seqs` left the journal.
  void NoteJournalConfirmed(const std::vector<uint64_t>& seqs) {
    if (options_.max_journal_bytes == 0) return;
    MutexLock lock(&journal_mu_);
    for (uint64_t seq : seqs) {
      auto it = journal_sizes_.find(seq);
      if (it == journal_sizes_.end()) continue;  // an earlier process's
      journal_bytes_.fetch_sub(it->second.bytes, std::memory_order_relaxed);
      journal_sizes_.erase(it);
    }
  }

  void ScheduleCheck(Clock::time_point due) {
    MutexLock lock(&mu_);
    if (check_due_ && *check_due_ <= due) return;
    check_due_ = due;
    cv_.NotifyAll();
  }

  // A handler that comes while the journal check after a reconnection is
  // pending waits for it, at most one request timeout: per-subject order
  // on the receiver does not depend on it, only the number of messages it
  // must hold.
  void WaitForReconnectCheck() {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + options_.connection.request_timeout;
    while (reconnect_check_pending_ && !stopping_ && std::chrono::steady_clock::now() < deadline) {
      cv_.WaitUntil(&lock, deadline);
    }
  }

  // Owned thread: sleeps until a check is due (a reconnection, or the
  // oldest young journal entry growing old enough), never on a fixed rate.
  void RunChecker() {
    MutexLock lock(&mu_);
    while (!stopping_) {
      if (link_changed_) {
        // Said when it happens, not with the next event: an idle relay too.
        link_changed_ = false;
        lock.Unlock();
        LogLinkChanges(bus_, *link_, "relay", options_.subscriber_name);
        lock.Lock();
        continue;
      }
      if (!check_due_ || !link_->connected()) {
        cv_.Wait(&lock);
        continue;
      }
      if (Clock::now() < *check_due_) {
        cv_.WaitUntil(&lock, *check_due_);
        continue;
      }
      check_due_.reset();
      lock.Unlock();
      std::optional<Clock::time_point> next = CheckJournal();
      lock.Lock();
      if (next && (!check_due_ || *next < *check_due_)) check_due_ = next;
      if (!next || *next > Clock::now()) reconnect_check_pending_ = false;
      cv_.NotifyAll();
    }
    reconnect_check_pending_ = false;
  }

  uint64_t RelayCheckpoint() const {
    for (const SubscriberStats& st : bus_->Stats().subscribers) {
      if (st.name == options_.subscriber_name) return st.checkpoint;
    }
    return 0;
  }

  // Whether the stream still holds `entry` where it was acknowledged.
  // OK(false) when it does not; an error when the server did not answer.
  Result<bool> StreamHolds(const JournalEntry& entry, uint64_t last_seq) {
    if (entry.stream_seq > last_seq) return false;
    natsMsg* msg = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = options_.connection.request_timeout.count();
    natsStatus s = js_GetMsg(&msg, link_->js(), options_.stream.name.c_str(), entry.stream_seq, &o, &err);
    if (s == NATS_NOT_FOUND || err == JSNoMessageFoundErr) return false;
    if (s != NATS_OK) return bridge::FromNats(s, "look up stream sequence " + std::to_string(entry.stream_seq));
    const char* id = nullptr;
    const bool same = natsMsgHeader_Get(msg, std::string(bridge::kMsgIdHeader).c_str(), &id) == NATS_OK &&
                      id != nullptr && entry.msg_id == id;
    natsMsg_Destroy(msg);
    return same;
  }

  Result<uint64_t> StreamLastSeq() {
    jsStreamInfo* info = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    natsStatus s = js_GetStreamInfo(&info, link_->js(), options_.stream.name.c_str(), nullptr, &err);
    if (s != NATS_OK) return bridge::FromNats(s, "look up stream " + options_.stream.name);
    const uint64_t last = info->State.LastSeq;
    jsStreamInfo_Destroy(info);
    return last;
  }

  struct Journaled {
    uint64_t seq;  // the event's
    std::string key;
    JournalEntry entry;  // without its message, read again only to republish
  };

  // What one check of the journal found.
  struct CheckReport {
    std::vector<uint64_t> lost_seqs;  // event seqs, in order
    std::set<std::string> subjects;   // of the lost ones
    uint64_t first_stream_seq = UINT64_MAX, last_stream_seq = 0;
  };

  // The journal's entries of seqs [low, *until] into *journal, in seq
  // order, stopping early (and lowering *until to the last seq read) once
  // they hold kMaxJournalBytesPerCheck: memory stays bounded however fast
  // the relay sent within confirm_after. The messages are not held: only
  // a lost entry needs its own, and a check that held them took 4 MiB of
  // heap at each pass of a drain. A damaged entry is deleted in `tx`
  // (nothing to trust or republish). False when a read failed.
  static constexpr size_t kMaxJournalBytesPerCheck = size_t{1} << 20;
  bool ReadJournal(Transaction& tx, uint64_t low, uint64_t* until, std::vector<Journaled>* journal) {
    size_t bytes = 0;
    for (uint64_t seq = low; seq <= *until; ++seq) {
      if (bytes >= kMaxJournalBytesPerCheck) {
        *until = seq - 1;
        break;
      }
      std::string key = keys_.Journal(seq);
      Result<std::optional<std::string>> got = tx.Get(options_.column_family, key);
      if (!got.ok()) return false;
      if (!got->has_value()) continue;
      std::optional<JournalEntry> entry = DecodeJournalEntry(**got);
      if (!entry) {
        (void)tx.Delete(options_.column_family, key);
        continue;
      }
      entry->message = std::string();
      bytes += sizeof(Journaled) + key.size() + entry->msg_id.size() + entry->nats_subject.size();
      journal->push_back(Journaled{seq, std::move(key), std::move(*entry)});
    }
    return true;
  }

  // Counts the lost entry `j` in *report and, when `try_now` (every lost
  // one before it was repaired: each subject's order), republishes it from
  // the journal, its message read again, and stores in `tx` what the
  // server acknowledged. Returns when that was (unix ms); nullopt when it
  // was not repaired (a later check tries again).
  std::optional<uint64_t> RepairLost(Transaction& tx, const Journaled& j, bool try_now, CheckReport* report) {
    report->lost_seqs.push_back(j.seq);
    report->first_stream_seq = std::min(report->first_stream_seq, j.entry.stream_seq);
    report->last_stream_seq = std::max(report->last_stream_seq, j.entry.stream_seq);
    Result<std::optional<std::string>> got = tx.Get(options_.column_family, j.key);
    std::optional<JournalEntry> again;
    if (got.ok() && got->has_value()) again = DecodeJournalEntry(**got);
    if (!again) return std::nullopt;
    if (const auto subject = SubjectOf(*again)) report->subjects.insert(*subject);
    if (!try_now || !Republish(&*again).ok()) return std::nullopt;
    (void)tx.Put(options_.column_family, j.key, EncodeJournalEntry(*again));
    return again->acked_ms;
  }

  // Which entries of `journal` the stream no longer holds (true at the
  // same index).
  Result<std::vector<bool>> LostEntries(const std::vector<Journaled>& journal) {
    Result<uint64_t> last_seq = StreamLastSeq();
    if (!last_seq.ok()) return last_seq.status();
    std::vector<const JournalEntry*> entries;
    entries.reserve(journal.size());
    for (const Journaled& j : journal) entries.push_back(&j.entry);
    return bridge::FindLostEntries(entries, ServerRun(),
                                   [&](const JournalEntry& entry) { return StreamHolds(entry, *last_seq); });
  }

  // Walks the journal from the low mark to the relay's checkpoint (every
  // entry at or below it has committed): confirms what may be trusted,
  // republishes in order what the server lost, and moves the low mark.
  // Returns when the next check is due (nullopt: nothing left to check).
  std::optional<Clock::time_point> CheckJournal() {
    const Clock::time_point retry_soon = Clock::now() + std::chrono::milliseconds(200);
    if (Status s = EnsureStreamOnce(); !s.ok()) return retry_soon;
    checks_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t checkpoint = RelayCheckpoint();
    Transaction tx = bus_->Begin();
    Result<std::optional<std::string>> mark = tx.Get(options_.column_family, keys_.LowMark());
    if (!mark.ok()) return retry_soon;
    const uint64_t low = mark->has_value() ? DecodeU64(**mark).value_or(1) : 1;
    constexpr uint64_t kMaxSeqsPerCheck = 200000;
    // Past the checkpoint too, what this process journaled: an event that
    // waits for room in a full journal holds the checkpoint below the
    // entries of later ones, which must leave for it to go. The low mark
    // stays at or below the checkpoint's next seq, as an entry above it
    // may not have committed yet.
    const uint64_t last = std::max(checkpoint, LastJournaledSeq());
    uint64_t until = std::min(last, low + kMaxSeqsPerCheck);
    std::vector<Journaled> journal;
    if (!ReadJournal(tx, low, &until, &journal)) return retry_soon;
    Result<std::vector<bool>> found_lost = LostEntries(journal);
    if (!found_lost.ok()) return retry_soon;
    const std::vector<bool>& lost = *found_lost;
    const uint64_t now_ms = NowMs();
    const uint64_t confirm_ms = static_cast<uint64_t>(options_.confirm_after.count());
    CheckReport report;
    std::optional<uint64_t> kept_low;
    std::optional<uint64_t> next_due_ms;
    auto keep = [&](const Journaled& j, uint64_t acked_ms) {
      if (!kept_low) kept_low = j.seq;
      next_due_ms = std::min(next_due_ms.value_or(UINT64_MAX), acked_ms + confirm_ms);
    };
    bool all_repaired = true;
    std::vector<uint64_t> confirmed;
    for (size_t i = 0; i < journal.size(); ++i) {  // in event seq order: each subject's order
      const Journaled& j = journal[i];
      if (!lost[i]) {
        // Found after a reconnection or not, an entry stays confirm_after:
        // a server that comes back with a message may still lose it to a
        // power loss before its next sync.
        if (now_ms >= j.entry.acked_ms + confirm_ms) {
          (void)tx.Delete(options_.column_family, j.key);
          confirmed.push_back(j.seq);
        } else {
          keep(j, j.entry.acked_ms);
        }
        continue;
      }
      const std::optional<uint64_t> repaired_ms = RepairLost(tx, j, all_repaired, &report);
      if (!repaired_ms) all_repaired = false;
      keep(j, repaired_ms.value_or(j.entry.acked_ms));
    }
    const uint64_t new_low = std::min(kept_low.value_or(until + 1), std::max(low, checkpoint + 1));
    if (new_low != low) (void)tx.Put(options_.column_family, keys_.LowMark(), EncodeU64(new_low));
    if (Result<Receipt> done = tx.Commit(); !done.ok()) return retry_soon;
    NoteJournalConfirmed(confirmed);
    ReportLoss(report, all_repaired);
    if (!all_repaired || until < last) return retry_soon;
    if (!next_due_ms) return OldestUncheckedDue(retry_soon);
    const uint64_t wait_ms = *next_due_ms > now_ms ? *next_due_ms - now_ms : 0;
    return Clock::now() + std::chrono::milliseconds(wait_ms);
  }

  static uint64_t NowMs() { return internal::ToUnixMillisUnsigned(std::chrono::system_clock::now()); }

  static std::optional<std::string> SubjectOf(const JournalEntry& entry) {
    bridge::Headers headers;
    std::string body;
    if (!bridge::ParseMessageBytes(entry.message, &headers, &body)) return std::nullopt;
    const std::string* subject = bridge::FindHeader(headers, "ce-subject");
    if (subject == nullptr) return std::nullopt;
    Result<std::string> decoded = bridge::PercentDecode(*subject);
    if (!decoded.ok()) return std::nullopt;
    return *decoded;
  }

  void ReportLoss(const CheckReport& report, bool all_repaired) {
    if (report.lost_seqs.empty()) return;
    loss_detected_.fetch_add(report.lost_seqs.size(), std::memory_order_relaxed);
    std::string subjects;
    size_t shown = 0;
    for (const std::string& subject : report.subjects) {
      if (shown++ == 8) {
        subjects += ", ...";
        break;
      }
      subjects += (subjects.empty() ? "" : ", ") + subject;
    }
    BridgeLog(bus_, LogLevel::kError,
              "walbus relay {}: stream {} lost {} acknowledged messages (stream sequences {}..{}, event seqs {}..{}, "
              "subjects {}); {}",
              options_.subscriber_name, options_.stream.name, report.lost_seqs.size(), report.first_stream_seq,
              report.last_stream_seq, report.lost_seqs.front(), report.lost_seqs.back(), subjects,
              all_repaired ? "republished in order from the journal" : "republishing; the rest at the next try");
  }

  Status EnsureStreamOnce() {
    if (stream_ready_.load(std::memory_order_acquire)) return Status::OK();
    MutexLock lock(&stream_mu_);
    if (stream_ready_.load(std::memory_order_relaxed)) return Status::OK();
    bool created = false;
    std::vector<std::string> subjects;
    Status s = link_->EnsureStream(options_.stream, &created, &subjects);
    if (s.ok()) CheckSubjectsCovered(subjects);
    if (s.ok() && created && PublishedBefore()) {
      unrepairable_.fetch_add(1, std::memory_order_relaxed);
      RecordUnrepairable();
      BridgeLog(bus_, LogLevel::kError,
                "walbus relay {}: stream {} was gone from the server after this relay had published to it; it was "
                "created anew. Messages the journal no longer kept (confirmed earlier) are lost on the server and "
                "cannot be republished; the journal's are republished.",
                options_.subscriber_name, options_.stream.name);
    }
    if (s.ok()) stream_ready_.store(true, std::memory_order_release);
    return s;
  }

  // The stream takes only the subjects its filters match: a prefix they do
  // not cover fails every publish (JetStream error 10076), which no retry
  // mends. Said once as an error naming the option, and kept in the
  // relay's records for `walbus bridge`; cleared once covered.
  void CheckSubjectsCovered(const std::vector<std::string>& filters) {
    if (options_.subject_for) return;  // the application's subjects: unknown here
    const bool covered = std::any_of(filters.begin(), filters.end(), [&](const std::string& f) {
      return bridge::FilterCoversPrefix(f, options_.subject_prefix);
    });
    std::string problem;
    if (!covered) {
      std::string list;
      for (const std::string& f : filters) list += (list.empty() ? "" : ", ") + f;
      problem = "stream " + options_.stream.name + " takes subjects [" + list +
                "], which do not cover RelayOptions::subject_prefix \"" + options_.subject_prefix + "\" (" +
                options_.subject_prefix + ".>): publishes fail until the stream takes " + options_.subject_prefix +
                ".> or the prefix changes";
      if (!subjects_warned_.exchange(true)) {
        BridgeLog(bus_, LogLevel::kError, "walbus relay {}: {}", options_.subscriber_name, problem);
      }
    }
    // Written only when it changes: no commit per connection otherwise.
    Transaction tx = bus_->Begin();
    Result<std::optional<std::string>> stored = tx.Get(options_.column_family, keys_.SubjectsProblem());
    Status kept = stored.status();
    if (kept.ok() && stored->value_or(std::string()) == problem) return;
    if (kept.ok()) {
      kept = problem.empty() ? tx.Delete(options_.column_family, keys_.SubjectsProblem())
                             : tx.Put(options_.column_family, keys_.SubjectsProblem(), problem);
    }
    if (kept.ok()) kept = tx.Commit().status();
    if (!kept.ok()) {
      BridgeLog(bus_, LogLevel::kError, "walbus relay {}: could not record the stream's subjects: {}",
                options_.subscriber_name, kept.ToString());
    }
  }

  // Whether the stream held this relay's messages before: a publish of this
  // process, or the record a publish of an earlier one left.
  bool PublishedBefore() {
    if (published_to_stream_.load(std::memory_order_relaxed)) return true;
    Transaction tx = bus_->Begin();
    Result<std::optional<std::string>> got = tx.Get(options_.column_family, keys_.Published());
    return got.ok() && got->has_value();
  }

  // Counts the incident in the relay's records too, where `walbus bridge`
  // shows it after this process is gone.
  void RecordUnrepairable() {
    Transaction tx = bus_->Begin();
    Result<std::optional<std::string>> got = tx.Get(options_.column_family, keys_.Unrepairable());
    uint64_t count = 0;
    if (got.ok() && got->has_value() && (*got)->size() == 16) count = *DecodeU64(std::string_view(**got).substr(0, 8));
    Status s = tx.Put(options_.column_family, keys_.Unrepairable(), EncodeU64(count + 1) + EncodeU64(NowMs()));
    if (s.ok()) s = tx.Commit().status();
    if (!s.ok())
      BridgeLog(bus_, LogLevel::kError, "walbus relay {}: could not record the loss: {}", options_.subscriber_name,
                s.ToString());
  }

  // The cap's measure of a message: its subject, the NATS header block
  // ("NATS/1.0", a line per header, Nats-Msg-Id among them, an empty line)
  // and the payload.
  static uint64_t WireBytes(const std::string& subject, const bridge::Headers& headers, std::string_view body) {
    uint64_t bytes = subject.size() + sizeof("NATS/1.0\r\n\r\n") - 1 + body.size();
    for (const auto& [name, value] : headers) bytes += name.size() + value.size() + sizeof(": \r\n") - 1;
    return bytes;
  }

  // The event's message: its NATS subject and journal copy in *entry, its
  // headers returned.
  bridge::Headers MakeMessage(const Event& event, uint64_t position, JournalEntry* entry) {
    entry->nats_subject =
        options_.subject_for ? options_.subject_for(event) : bridge::DefaultSubject(options_.subject_prefix, event);
    // The schema the payload was checked against when it was published;
    // for an event that predates that record, the type's latest, which
    // reads what every earlier one wrote.
    const Result<SchemaVersion> schema = event.schema_version != 0
                                             ? bus_->Contracts().Schema(event.type, event.schema_version)
                                             : bus_->Contracts().LatestSchema(event.type);
    bridge::Headers headers = bridge::ToHeaders(event, schema.ok() ? DataSchemaUri(event.type, *schema) : "");
    bridge::SetPosition(bridge::SenderPosition{origin_, position}, &headers);
    if (!options_.signing.secret.empty()) {
      headers[std::string(bridge::kKeyIdHeader)] = options_.signing.key_id;
      headers[std::string(bridge::kSignatureHeader)] = bridge::Sign(event, options_.signing.secret);
    }
    entry->msg_id = event.id.ToString();
    entry->message = bridge::MessageBytes(headers, event.data);
    return headers;
  }

  Status Republish(JournalEntry* entry) {
    bridge::Headers headers;
    std::string body;
    if (!bridge::ParseMessageBytes(entry->message, &headers, &body)) {
      return Status::Corruption("journal entry of " + entry->msg_id);
    }
    if (rate_ != nullptr) rate_->Charge(WireBytes(entry->nats_subject, headers, body), Clock::now());
    Status s = PublishMessage(entry->nats_subject, headers, body, entry);
    if (s.ok()) repaired_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }

  // Publishes and fills the journal entry of what JetStream acknowledged,
  // naming the run of the server that acknowledged it only when the
  // connection stayed on one run while the publish waited: a publish the
  // client resent after a reconnection is acknowledged by the next run.
  Status PublishMessage(const std::string& subject, const bridge::Headers& headers, std::string_view body,
                        JournalEntry* entry) {
    const uint64_t run_before = ServerRun();
    natsMsg* msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
    if (s != NATS_OK) return bridge::FromNats(s, "make a message on " + subject);
    for (const auto& [name, value] : headers) {
      if (s == NATS_OK) s = natsMsgHeader_Set(msg, name.c_str(), value.c_str());
    }
    jsPubOptions publish;
    jsPubOptions_Init(&publish);
    publish.MsgId = entry->msg_id.c_str();
    publish.MaxWait = options_.connection.request_timeout.count();
    jsPubAck* ack = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    if (s == NATS_OK) s = js_PublishMsg(&ack, link_->js(), msg, &publish, &err);
    natsMsg_Destroy(msg);
    if (s != NATS_OK) {
      const std::string what = "publish " + entry->msg_id + " to " + subject;
      if (err != 0) return Status::IOError(what + ": JetStream error " + std::to_string(err));
      return bridge::FromNats(s, what);
    }
    published_.fetch_add(1, std::memory_order_relaxed);
    sent_bytes_.fetch_add(WireBytes(entry->nats_subject, headers, body), std::memory_order_relaxed);
    published_to_stream_.store(true, std::memory_order_relaxed);
    if (ack->Duplicate) duplicates_.fetch_add(1, std::memory_order_relaxed);
    entry->stream_seq = ack->Sequence;
    entry->acked_ms = NowMs();
    entry->server_run = ServerRun() == run_before ? run_before : bridge::kUnknownServerRun;
    jsPubAck_Destroy(ack);
    return Status::OK();
  }

  Outcome Failed(const Event& event, const Status& why) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    static internal::LogLimiter limiter(1);
    uint64_t held = 0;
    if (limiter.Allow(&held)) {
      BridgeLog(bus_, LogLevel::kWarning, "walbus relay: event {} waits: {} ({} similar lines held back)",
                event.id.ToString(), why.ToString(), held);
    }
    return Outcome::RetryAfter(std::chrono::milliseconds(0));
  }

  Bus* const bus_;
  const RelayOptions options_;
  const uint32_t priority_;
  const std::set<std::string> relayed_above_;
  const bridge::RelayKeys keys_;
  const std::string origin_;
  Mutex stream_mu_;
  std::atomic<bool> stream_ready_{false};
  std::atomic<bool> published_to_stream_{false};
  std::atomic<bool> subjects_warned_{false};
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> skipped_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> loss_detected_{0};
  std::atomic<uint64_t> repaired_{0};
  std::atomic<uint64_t> checks_{0};
  std::atomic<uint64_t> unrepairable_{0};
  std::atomic<uint64_t> sent_bytes_{0};
  std::atomic<uint64_t> rate_waits_{0};
  std::atomic<uint64_t> journal_waits_{0};
  // Under max_journal_bytes: the bytes of each journal entry this process
  // relayed and has not confirmed, by event seq, and their sum.
  Mutex journal_mu_;
  struct JournaledSize {
    size_t bytes;
    Clock::time_point at;
  };
  std::map<uint64_t, JournaledSize> journal_sizes_ GUARDED_BY(journal_mu_);
  std::atomic<uint64_t> journal_bytes_{0};
  const std::shared_ptr<bridge::ByteRate> rate_;  // null: no bandwidth cap
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool reconnect_check_pending_ GUARDED_BY(mu_) = false;
  bool link_changed_ GUARDED_BY(mu_) = false;  // a change of the link not logged yet
  std::optional<Clock::time_point> check_due_ GUARDED_BY(mu_);
  // Destroyed before the state its callbacks touch: its destructor waits
  // for the client's last callback.
  const std::unique_ptr<NatsLink> link_;
  std::thread checker_;  // last: starts once the rest is built
};

// walbus_relay_*, one series per relay level.
class RelayMetrics final : public MetricsSource {
 public:
  explicit RelayMetrics(std::vector<std::shared_ptr<RelayCore>> cores) : cores_(std::move(cores)) {}

  void CollectMetrics(std::vector<MetricFamily>* out) const override {
    for (const auto& core : cores_) Collect(*core, out);
  }

 private:
  static void Collect(const RelayCore& core, std::vector<MetricFamily>* out) {
    const RelayStats s = core.Stats();
    const MetricLabel label{"relay", core.options().subscriber_name};
    const struct {
      const char* name;
      MetricType type;
      const char* help;
      double value;
    } series[] = {
        {"walbus_relay_connected", MetricType::kGauge, "1 while the relay is connected to NATS.",
         s.connected ? 1.0 : 0.0},
        {"walbus_relay_published_total", MetricType::kCounter, "Events JetStream acknowledged.", double(s.published)},
        {"walbus_relay_duplicates_total", MetricType::kCounter, "Republished events JetStream recognised by their id.",
         double(s.duplicates)},
        {"walbus_relay_publish_errors_total", MetricType::kCounter, "Publishes that failed and wait for a retry.",
         double(s.publish_errors)},
        {"walbus_relay_disconnects_total", MetricType::kCounter, "Times the connection to NATS was lost.",
         double(s.disconnects)},
        {"walbus_relay_offline_seconds_total", MetricType::kCounter, "Time spent without a connection to NATS.",
         s.offline_seconds},
        {"walbus_relay_server_loss_detected_total", MetricType::kCounter,
         "Acknowledged messages the server no longer held, found by a journal check.", double(s.server_loss_detected)},
        {"walbus_relay_server_loss_repaired_total", MetricType::kCounter, "Lost messages republished from the journal.",
         double(s.repaired)},
        {"walbus_relay_server_loss_unrepairable_total", MetricType::kCounter,
         "Times the stream was gone after the relay had published to it.", double(s.unrepairable_losses)},
        {"walbus_relay_journal_checks_total", MetricType::kCounter, "Journal checks run.", double(s.journal_checks)},
        {"walbus_relay_sent_bytes_total", MetricType::kCounter,
         "Bytes of the messages sent (subject, headers, payload), as the bandwidth cap counts them.",
         double(s.sent_bytes)},
        {"walbus_relay_rate_waits_total", MetricType::kCounter, "Times an event waited for the bandwidth cap.",
         double(s.rate_waits)},
        {"walbus_relay_journal_waits_total", MetricType::kCounter,
         "Times an event waited for room in the journal (max_journal_bytes).", double(s.journal_waits)},
        {"walbus_relay_journal_bytes", MetricType::kGauge,
         "Bytes of relayed messages in the journal, not yet confirmed.", double(s.journal_bytes)},
        {"walbus_relay_max_bytes_per_second", MetricType::kGauge,
         "The bandwidth cap, which a relay's levels share; 0: none.", double(core.options().max_bytes_per_second)},
        {"walbus_relay_priority", MetricType::kGauge, "The priority level this subscriber relays (0: the lowest).",
         double(core.priority())},
    };
    for (const auto& m : series) bridge::AddSeries(out, m.name, m.type, m.help, label, m.value);
  }

  const std::vector<std::shared_ptr<RelayCore>> cores_;
};

// Adds what one level did to the relay's totals.
void AddStats(const RelayStats& level, RelayStats* total) {
  total->connected = total->connected && level.connected;
  total->published += level.published;
  total->duplicates += level.duplicates;
  total->skipped += level.skipped;
  total->publish_errors += level.publish_errors;
  total->sent_bytes += level.sent_bytes;
  total->rate_waits += level.rate_waits;
  total->journal_waits += level.journal_waits;
  total->journal_bytes += level.journal_bytes;
  total->disconnects += level.disconnects;
  total->offline_seconds += level.offline_seconds;
  total->server_loss_detected += level.server_loss_detected;
  total->repaired += level.repaired;
  total->journal_checks += level.journal_checks;
  total->unrepairable_losses += level.unrepairable_losses;
}

class RelayImpl final : public Relay {
 public:
  explicit RelayImpl(std::vector<std::shared_ptr<RelayCore>> cores)
      : cores_(std::move(cores)), metrics_(std::make_shared<RelayMetrics>(cores_)) {}
  // The handlers may outlive the Relay (the bus holds them); the journal
  // checkers do not: the next Attach checks what is left.
  ~RelayImpl() override {
    for (const auto& core : cores_) core->StopChecker();
  }
  RelayStats Stats() const override {
    RelayStats total;
    total.connected = true;
    for (const auto& core : cores_) AddStats(core->Stats(), &total);
    return total;
  }
  std::vector<RelayLevelStats> Levels() const override {
    std::vector<RelayLevelStats> levels;
    for (const auto& core : cores_) {
      levels.push_back(RelayLevelStats{core->priority(), core->options().subscriber_name, core->Stats()});
    }
    return levels;
  }

  std::string MetricsText() const override { return bridge::TextOf(*metrics_); }
  std::shared_ptr<const MetricsSource> metrics() const { return metrics_; }

 private:
  const std::vector<std::shared_ptr<RelayCore>> cores_;  // lowest level first
  const std::shared_ptr<const MetricsSource> metrics_;
};

// The relay's levels, lowest first (RelayOptions::priorities): the lowest
// under the relay's own name, unless `types` names only prioritized ones.
Result<std::vector<Lane>> MakeLanes(RelayOptions options) {
  std::map<uint32_t, std::vector<std::string>> by_level;
  for (const auto& [type, level] : options.priorities) {
    const std::string named = "RelayOptions::priorities gives type '" + type + "' priority " + std::to_string(level);
    if (level < 1 || level > kMaxRelayPriority) {
      return Status::InvalidArgument(named + ": levels are 1 to " + std::to_string(kMaxRelayPriority) +
                                     " (0, the lowest, is every type not named)");
    }
    if (!options.types.empty() && std::find(options.types.begin(), options.types.end(), type) == options.types.end()) {
      return Status::InvalidArgument(named + ", but RelayOptions::types does not relay it");
    }
    by_level[level].push_back(type);
  }
  std::vector<Lane> lanes(1);  // the lowest first, made last from what is left of `options`
  for (auto& [level, types] : by_level) {
    Lane lane{options, level, {}};
    lane.options.subscriber_name = options.subscriber_name + ".p" + std::to_string(level);
    lane.options.types = std::move(types);
    lanes.push_back(std::move(lane));
  }
  Lane& lowest = lanes.front();
  const bool every_type = options.types.empty();
  lowest.options = std::move(options);
  if (every_type) {
    for (const auto& [type, level] : lowest.options.priorities) lowest.relayed_above.insert(type);
  } else {
    std::erase_if(lowest.options.types, [&](const std::string& t) { return lowest.options.priorities.contains(t); });
    if (lowest.options.types.empty()) lanes.erase(lanes.begin());  // every type it relays has a level above
  }
  return lanes;
}

// What `walbus bridge` reads of a level.
bridge::RelayLane LaneRecord(const Lane& lane) {
  bridge::RelayLane record;
  record.priority = lane.priority;
  record.all_but = lane.options.types.empty();
  record.types = record.all_but ? std::vector<std::string>(lane.relayed_above.begin(), lane.relayed_above.end())
                                : lane.options.types;
  record.max_bytes_per_second = lane.options.max_bytes_per_second;
  record.burst_bytes = lane.options.burst_bytes;
  return record;
}

// The level's origin id, made on its first Attach, and its lane record,
// written at each.
Result<std::string> LoadLane(Bus* bus, const Lane& lane) {
  const RelayOptions& options = lane.options;
  const bridge::RelayKeys keys(options.subscriber_name);
  Transaction tx = bus->Begin();
  Result<std::optional<std::string>> got = tx.Get(options.column_family, keys.Origin());
  if (!got.ok()) return bridge::ColumnFamilyReadError("relay", options.column_family, got.status());
  const std::string origin = got->has_value() ? **got : EventId::Generate().ToString();
  if (!got->has_value()) {
    if (Status s = tx.Put(options.column_family, keys.Origin(), origin); !s.ok()) return s;
  }
  if (Status s = tx.Put(options.column_family, keys.Lane(), bridge::EncodeRelayLane(LaneRecord(lane))); !s.ok()) {
    return s;
  }
  if (Result<Receipt> r = tx.Commit(); !r.ok()) return r.status();
  return origin;
}

std::shared_ptr<bridge::ByteRate> MakeRate(const RelayOptions& o) {
  if (o.max_bytes_per_second == 0) return nullptr;
  const uint64_t burst = o.burst_bytes != 0 ? o.burst_bytes : o.max_bytes_per_second;
  return std::make_shared<bridge::ByteRate>(o.max_bytes_per_second, burst, std::chrono::steady_clock::now());
}

// Where a priority level new to the database starts: just after the
// lowest level's checkpoint, when the lowest level (the relay's own name)
// is known. Every event at or below it was completed by the lowest level
// in a run where the level did not exist, so it was published then; above
// it, the lowest level will complete the new level's types without a
// publish, so the new level must take them. Without a known lowest
// level, with the events committed from now on, as any new subscriber.
// REQUIRES: the lowest level is not subscribed in this process yet (its
// checkpoint is the durable one).
StartPosition WhereTheLowestResumes(Bus& bus, const std::string& lowest) {
  for (const SubscriberStats& s : bus.Stats().subscribers) {
    if (s.name == lowest) return StartPosition::AtSeq(s.checkpoint + 1);
  }
  return StartPosition::Now();
}

// Checks what Attach can check before anything is written.
Status CheckRelayOptions(const RelayOptions& options) {
  if (options.stream.name.empty()) return Status::InvalidArgument("no stream name given");
  if (options.subject_prefix.empty() && !options.subject_for) {
    return Status::InvalidArgument("no subject prefix and no subject mapping given");
  }
  // A bad address would be tried forever.
  if (Status s = bridge::CheckConnection(options.connection); !s.ok()) return s;
  using std::chrono::milliseconds;
  if (Status s = internal::CheckBounds(
          "RelayOptions", {},
          {
              {"confirm_after", options.confirm_after, milliseconds(0), internal::kDay},
              {"stream.duplicate_window", options.stream.duplicate_window, milliseconds(0), internal::kNoLongest},
          });
      !s.ok()) {
    return s;
  }
  if (options.burst_bytes != 0 && options.max_bytes_per_second == 0) {
    return Status::InvalidArgument("RelayOptions::burst_bytes is " + std::to_string(options.burst_bytes) +
                                   " with no max_bytes_per_second: a burst needs a rate");
  }
  return Status::OK();
}

}  // namespace

Relay::~Relay() = default;

Status Relay::Attach(Bus* bus, RelayOptions options, std::unique_ptr<Relay>* out) {
  out->reset();
  if (bus == nullptr) return Status::InvalidArgument("no bus given");
  if (Status s = CheckRelayOptions(options); !s.ok()) return s;
  const std::shared_ptr<bridge::ByteRate> rate = MakeRate(options);
  const std::string lowest = options.subscriber_name;
  Result<std::vector<Lane>> lanes = MakeLanes(std::move(options));
  if (!lanes.ok()) return lanes.status();
  // Every level's records and connection before any subscribes: a failure
  // leaves no level half attached.
  std::vector<std::shared_ptr<RelayCore>> cores;
  for (Lane& lane : *lanes) {
    Result<std::string> origin = LoadLane(bus, lane);
    if (!origin.ok()) return origin.status();
    std::unique_ptr<NatsLink> link;
    if (Status s = NatsLink::Open(lane.options.connection, &link); !s.ok()) return s;
    LogLinkChanges(bus, *link, "relay", lane.options.subscriber_name);  // connected, or no server yet
    cores.push_back(std::make_shared<RelayCore>(bus, std::move(lane), rate, std::move(link), std::move(*origin)));
  }
  // Highest level first, the lowest last: the lowest completes the higher
  // levels' types without a publish, so each level new to this database
  // starts where the lowest resumes, before the lowest runs.
  const StartPosition new_level_start = WhereTheLowestResumes(*bus, lowest);
  for (auto it = cores.rbegin(); it != cores.rend(); ++it) {
    const std::shared_ptr<RelayCore>& core = *it;
    SubscriberOptions subscriber;
    subscriber.name = core->options().subscriber_name;
    subscriber.types = core->options().types;
    subscriber.retry = core->options().retry;
    if (core->priority() > 0) subscriber.start = new_level_start;
    subscriber.handler = [core](const Event& event, HandlerContext& ctx) { return core->Handle(event, ctx); };
    if (Status s = bus->Subscribe(std::move(subscriber)); !s.ok()) {
      // A level subscribed before keeps its handler (the bus holds it),
      // not its checker: the next Attach checks what is left.
      for (const auto& started : cores) started->StopChecker();
      return s;
    }
  }
  auto relay = std::make_unique<RelayImpl>(std::move(cores));
  if (Status s = bus->AddMetricsSource(relay->metrics()); !s.ok()) return s;
  *out = std::move(relay);
  return Status::OK();
}

}  // namespace walbus::jetstream
