// The dispatcher's side of an operator's dead-letter actions
// (OperatorActions::RedriveDeadLetters, SkipDeadLetters): the dead letters go back to
// the front of their subjects, in seq order, once each subject is idle,
// and a parked subject is released with them.
#include <algorithm>
#include <cassert>

#include "bus/core/envelope.h"
#include "bus/dispatch/dispatcher.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {

void Dispatcher::Redrive(const std::string& subscriber, std::vector<uint64_t> seqs, std::vector<std::string> release,
                         bool rerun) {
  Message m;
  m.kind = Message::Kind::kRedrive;
  m.control = std::make_unique<Message::Control>();
  m.control->subscriber = subscriber;
  m.control->seqs = std::move(seqs);
  m.control->release = std::move(release);
  m.control->rerun = rerun;
  Send(std::move(m));
}

namespace {

// Reads dead letters of `sub` back as events: the listed seqs, or (with
// `subject`) every one of that subject. Unreadable ones are logged and
// left where they are.
void LoadDeadLetters(const storage::Db& db, const Subscriber& sub, const std::vector<uint64_t>& seqs,
                     const std::string* subject, size_t max_payload_bytes, const BusLog& log,
                     std::vector<std::shared_ptr<const Event>>* out) {
  auto take = [&](uint64_t seq, std::string_view value) {
    storage::DeadLetterRecord record;
    auto event = std::make_shared<Event>();
    if (!storage::DecodeDeadLetter(value, &record) ||
        !DecodeEnvelope(record.envelope, max_payload_bytes, event.get()).ok()) {
      log.logger().error("walbus: dead letter {}/{} is unreadable and cannot be redriven", sub.name, seq);
      return;
    }
    event->seq = seq;
    if (subject == nullptr || event->subject == *subject) out->push_back(std::move(event));
  };
  if (subject == nullptr) {
    for (uint64_t seq : seqs) {
      std::string value;
      bool found = false;
      Status s = db.Get(db.cf(storage::Cf::kDeadLetters), storage::SubscriberSeqKey(sub.id, seq), &value, &found);
      if (s.ok() && found) take(seq, value);
    }
    return;
  }
  std::string prefix;
  storage::PutBe32(&prefix, sub.id);
  Status s = db.Scan(storage::Cf::kDeadLetters, prefix, SIZE_MAX, [&](std::string_view key, std::string_view value) {
    uint32_t id = 0;
    uint64_t seq = 0;
    if (storage::ParseSubscriberSeqKey(key, &id, &seq)) take(seq, value);
    return true;
  });
  if (!s.ok()) log.logger().error("walbus: reading the dead letters of {} failed: {}", sub.name, s.ToString());
}

}  // namespace

void Dispatcher::HandleRedrive(Message& m) {
  const Message::Control& c = *m.control;
  auto it = std::find_if(subs_.begin(), subs_.end(), [&](const auto& s) { return s->name == c.subscriber; });
  if (it == subs_.end()) return;
  Subscriber* sub = it->get();
  if (!c.rerun) {
    for (const std::string& subject : c.release) sub->holds.Unpark(subject);
    return;
  }
  std::vector<std::shared_ptr<const Event>> events;
  LoadDeadLetters(*db_, *sub, c.seqs, nullptr, config_.max_payload_bytes, *config_.log, &events);
  for (auto& e : events) sub->holds.QueueBack(std::move(e));
  for (const std::string& subject : c.release) sub->holds.ReleaseWhenIdle(subject);
  for (const std::string& subject : sub->holds.WaitingSubjects()) {
    auto key = sub->keys.find(subject);
    if (key == sub->keys.end() || !key->second.head_busy) ApplyRedrive(sub, subject);
  }
}

void Dispatcher::ApplyRedrive(Subscriber* sub, const std::string& subject) {
  bool release = false;
  std::vector<std::shared_ptr<const Event>> events = sub->holds.TakeWaiting(subject, &release);
  if (release) {
    // Everything held behind the parked subject goes back in line too,
    // including what was held while this redrive waited.
    LoadDeadLetters(*db_, *sub, {}, &subject, config_.max_payload_bytes, *config_.log, &events);
    sub->holds.Unpark(subject);
  }
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a->seq < b->seq; });
  events.erase(std::unique(events.begin(), events.end(), [](const auto& a, const auto& b) { return a->seq == b->seq; }),
               events.end());
  KeyQueue& key = sub->keys[subject];
  assert(!key.head_busy);
  for (auto e = events.rbegin(); e != events.rend(); ++e) {
    sub->out_of_line.StartRedrive((*e)->seq);
    key.events.push_front(*e);
  }
  if (key.events.empty()) {
    sub->keys.erase(subject);
  } else {
    Submit(sub, key);
  }
}

}  // namespace walbus::internal
