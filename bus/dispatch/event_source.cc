#include "bus/dispatch/event_source.h"

#include <cassert>
#include <memory>
#include <string>
#include <utility>

#include "bus/core/envelope.h"

namespace walbus::internal {

EventSource::EventSource(Parts parts, size_t window_events, size_t window_bytes, size_t max_payload_bytes)
    : parts_(parts), max_payload_bytes_(max_payload_bytes), backlog_(window_events, window_bytes) {
  assert(parts_.db != nullptr && parts_.committer != nullptr && parts_.tail != nullptr &&
         parts_.quarantine != nullptr && parts_.log != nullptr);
}

bool EventSource::Read(uint64_t from, size_t limit, std::vector<BacklogWindow::Slot>* out) {
  if (parts_.tail->Read(from, limit, out) != 0 || backlog_.Read(from, limit, out) != 0) return true;
  return ReadFromOutbox(from, limit, out);
}

void EventSource::DropBelow(uint64_t lowest) {
  backlog_.DropBelow(lowest);
  // The tail's lock is the committer's too: taken only when there is more
  // to drop, not on every pass.
  if (lowest <= tail_dropped_below_) return;
  tail_dropped_below_ = lowest;
  // What is below `lowest` is in the subscribers' queues already (the
  // queues hold it until handled): the tail would hold it only until its
  // bounds pushed it out, a default 64 MiB of heap no reader asks for.
  parts_.tail->DropBelow(lowest);
}

void EventSource::Forget(uint64_t seq) {
  backlog_.Forget(seq);
  parts_.tail->Forget(seq);
}

bool EventSource::ReadFromOutbox(uint64_t from, size_t limit, std::vector<BacklogWindow::Slot>* out) {
  const size_t first = out->size();
  auto room = [&] { return out->size() - first < limit; };
  auto hold = [&](uint64_t seq, BacklogWindow::Slot slot) {
    backlog_.Put(seq, slot);
    out->push_back(std::move(slot));
  };
  // Read before the scan: a seq up to it that the scan does not find was
  // trimmed below every checkpoint or dropped (Options::
  // drop_oldest_types); its slot is null, so the watermark can pass it.
  const uint64_t committed = parts_.committer->last_seq();
  uint64_t expected = from;
  Status s = parts_.db->ScanOutbox(from, limit, [&](uint64_t seq, std::string_view bytes) {
    // Gaps count against the limit like events: after days of drops one
    // gap spans most of the outbox, and the caller reads on from where
    // this read stopped.
    for (; expected < seq && room(); ++expected) hold(expected, nullptr);
    if (!room()) return false;
    expected = seq + 1;
    auto event = std::make_shared<Event>();
    Status d = DecodeEnvelope(bytes, max_payload_bytes_, event.get());
    event->seq = seq;
    if (!d.ok()) {
      // Stored bytes that fail verification reach no handler, of any
      // subscriber that takes this read.
      parts_.log->logger().error("walbus: outbox entry seq={} is unreadable and is skipped: {}", seq, d.ToString());
      Status q = parts_.quarantine->Add(bytes, "outbox seq " + std::to_string(seq), d.message());
      if (!q.ok()) parts_.log->logger().error("walbus: quarantining outbox seq={} failed: {}", seq, q.ToString());
      hold(seq, nullptr);
      return true;
    }
    hold(seq, std::move(event));
    return true;
  });
  if (s.ok()) {
    // Room left: the scan reached the outbox's end, and what is missing up
    // to the committed seq is a gap too.
    for (; room() && expected <= committed; ++expected) hold(expected, nullptr);
    return true;
  }
  parts_.log->logger().error("walbus: reading the outbox from seq {} failed (retried): {}", from, s.ToString());
  return false;
}

}  // namespace walbus::internal
