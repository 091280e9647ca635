#include "bus/api/delivery_states.h"

#include <algorithm>

#include "bus/core/envelope.h"
#include "bus/util/mutex.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"

namespace walbus::internal {

Status DeliveryStates::SeqOfRetrying(uint32_t subscriber_id, const EventId& id, uint64_t* seq) const {
  // Only events with a retry record: few (at most in flight), each one
  // point read of the outbox.
  *seq = 0;
  std::string prefix;
  storage::PutBe32(&prefix, subscriber_id);
  Status inner;
  Status scan = db_->Scan(storage::Cf::kRetries, prefix, SIZE_MAX, [&](std::string_view key, std::string_view) {
    uint32_t sub_id = 0;
    uint64_t candidate = 0;
    if (!storage::ParseSubscriberSeqKey(key, &sub_id, &candidate)) return true;
    std::string envelope;
    bool found = false;
    inner = db_->Get(db_->cf(storage::Cf::kOutbox), storage::OutboxKey(candidate), &envelope, &found);
    Event e;
    if (inner.ok() && found && DecodeEnvelope(envelope, max_payload_bytes_, &e).ok() && e.id == id) {
      *seq = candidate;
      return false;
    }
    return inner.ok();
  });
  return scan.ok() ? inner : scan;
}

Status DeliveryStates::StateOf(std::string_view name, const Registry::Entry& entry, const EventId& id, uint64_t seq,
                               DeliveryState* out) const {
  *out = DeliveryState{};
  out->subscriber = name;
  out->id = id;
  out->seq = seq;
  const std::string_view id_bytes = storage::IdBytes(id);
  std::string value;
  bool found = false;
  Status s = db_->Get(db_->cf(storage::Cf::kInbox), storage::InboxKey(db_->inbox_layout(), entry.id, id_bytes), &value,
                      &found);
  if (!s.ok()) return s;
  if (found) {
    if (value.size() >= 8) out->seq = storage::GetBe64(value);
    s = db_->Get(db_->cf(storage::Cf::kDeadLetters), storage::SubscriberSeqKey(entry.id, out->seq), &value, &found);
    if (!s.ok()) return s;
    storage::DeadLetterRecord letter;
    if (found && storage::DecodeDeadLetter(value, &letter)) {
      out->attempts = letter.attempts;
      out->last_error = letter.error;
      return ParkedOrDeadLettered(entry.id, letter, out);
    }
    out->state = found ? Delivery::kDeadLettered : Delivery::kHandled;
    return Status::OK();
  }
  const uint64_t watermark = entry.active != nullptr ? entry.active->watermark.load() : entry.durable.checkpoint;
  if (seq != 0 && watermark >= seq) {
    out->state = Delivery::kNotDelivered;
    return Status::OK();
  }
  if (out->seq == 0) {
    if (Status r = SeqOfRetrying(entry.id, id, &out->seq); !r.ok()) return r;
  }
  if (entry.active != nullptr && entry.active->paused_now.load()) {
    out->state = Delivery::kPaused;
    MutexLock paused_lock(&entry.active->paused_mu);
    out->last_error = "paused: no upcaster brings " + entry.active->paused_on_type + " to a type it takes";
  }
  if (out->seq == 0) return Status::OK();
  s = db_->Get(db_->cf(storage::Cf::kRetries), storage::SubscriberSeqKey(entry.id, out->seq), &value, &found);
  if (!s.ok()) return s;
  storage::RetryRecord retry;
  if (found && storage::DecodeRetry(value, &retry)) {
    out->state = Delivery::kRetrying;
    out->attempts = retry.attempts;
    out->last_error = retry.last_error;
    if (retry.next_attempt_ms != 0) out->next_attempt = FromUnixMillis(static_cast<int64_t>(retry.next_attempt_ms));
  }
  return Status::OK();
}

Status DeliveryStates::ParkedOrDeadLettered(uint32_t subscriber_id, const storage::DeadLetterRecord& letter,
                                            DeliveryState* out) const {
  // Under PoisonPolicy::kParkKey the events behind a dead letter are kept
  // with it, in the dead-letter store, until an operator releases the
  // subject: parked, not given up on.
  out->state = Delivery::kDeadLettered;
  Event event;
  if (!DecodeEnvelope(letter.envelope, max_payload_bytes_, &event).ok()) return Status::OK();
  std::string value;
  bool found = false;
  Status s =
      db_->Get(db_->cf(storage::Cf::kCheckpoints),
               storage::CheckpointKey(subscriber_id, storage::CheckpointField::kParked, event.subject), &value, &found);
  if (!s.ok()) return s;
  if (found && value.size() >= 8 && storage::GetBe64(value) < out->seq) {
    out->state = Delivery::kParked;
    out->parked_behind = storage::GetBe64(value);
  }
  return Status::OK();
}

Result<std::vector<DeliveryState>> DeliveryStates::Pending(std::string_view name, const Registry::Entry& entry,
                                                           uint64_t limit) const {
  const uint64_t checkpoint = entry.active != nullptr ? entry.active->watermark.load() : entry.durable.checkpoint;
  const std::vector<std::string>* types = entry.active != nullptr ? &entry.active->types : nullptr;
  std::vector<DeliveryState> pending;
  Status inner;
  Status scan = db_->ScanOutbox(checkpoint + 1, SIZE_MAX, [&](uint64_t seq, std::string_view bytes) {
    Event e;
    if (!DecodeEnvelope(bytes, max_payload_bytes_, &e).ok()) return true;  // quarantined when read
    if (types != nullptr && !types->empty() && std::find(types->begin(), types->end(), e.type) == types->end()) {
      return true;
    }
    DeliveryState st;
    inner = StateOf(name, entry, e.id, seq, &st);
    if (!inner.ok()) return false;
    // Parked events come from the dead-letter store below, once each.
    if (st.state == Delivery::kPending || st.state == Delivery::kRetrying || st.state == Delivery::kPaused) {
      pending.push_back(std::move(st));
    }
    return limit == 0 || pending.size() < limit;
  });
  if (!scan.ok()) return scan;
  if (!inner.ok()) return inner;
  if (Status s = AddParked(name, entry.id, &pending); !s.ok()) return s;
  std::sort(pending.begin(), pending.end(),
            [](const DeliveryState& a, const DeliveryState& b) { return a.seq < b.seq; });
  if (limit != 0 && pending.size() > limit) pending.resize(limit);
  return pending;
}

Status DeliveryStates::AddParked(std::string_view name, uint32_t subscriber_id, std::vector<DeliveryState>* out) const {
  Status inner;
  std::string prefix;
  storage::PutBe32(&prefix, subscriber_id);
  Status scan =
      db_->Scan(storage::Cf::kDeadLetters, prefix, SIZE_MAX, [&](std::string_view key, std::string_view value) {
        uint32_t sub_id = 0;
        DeliveryState st;
        storage::DeadLetterRecord letter;
        Event e;
        if (!storage::ParseSubscriberSeqKey(key, &sub_id, &st.seq) || !storage::DecodeDeadLetter(value, &letter) ||
            !DecodeEnvelope(letter.envelope, max_payload_bytes_, &e).ok()) {
          return true;
        }
        st.subscriber = name;
        st.id = e.id;
        st.attempts = letter.attempts;
        st.last_error = letter.error;
        inner = ParkedOrDeadLettered(subscriber_id, letter, &st);
        if (inner.ok() && st.state == Delivery::kParked) out->push_back(std::move(st));
        return inner.ok();
      });
  return scan.ok() ? inner : scan;
}

}  // namespace walbus::internal
