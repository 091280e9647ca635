// The envelope: an Event as stored in the outbox (schemas/envelope.fbs),
// and the rules every published event must pass.
#ifndef WALBUS_BUS_ENVELOPE_H_
#define WALBUS_BUS_ENVELOPE_H_

#include <string>
#include <string_view>

#include "walbus/event.h"
#include "walbus/status.h"

namespace walbus::internal {

inline constexpr size_t kMaxTypeBytes = 200;
inline constexpr size_t kMaxSubjectBytes = 512;
inline constexpr size_t kMaxSourceBytes = 256;
inline constexpr size_t kMaxTraceparentBytes = 128;
inline constexpr size_t kMaxContentTypeBytes = 128;
// Envelope bytes beyond the payload: generous room for the attributes.
inline constexpr size_t kEnvelopeOverheadBytes = 4096;

// "orders.order-approved.v1": lowercase dotted words of [a-z0-9-], at least
// two words before the version, ending in ".v<N>" with N >= 1.
Status ValidateEventType(std::string_view type);
// Subscriber names: 1..128 bytes of [A-Za-z0-9._-] (stored in the meta key
// "sub/<name>").
Status ValidateSubscriberName(const std::string& name);
// Every rule of EventSpec (event.h); `source` is the effective source.
Status ValidateEvent(const Event& event, size_t max_payload_bytes);

// Serializes everything but seq (seq is the outbox key).
std::string EncodeEnvelope(const Event& event);

// Verifies untrusted bytes (FlatBuffers Verifier with depth, table and size
// limits, then the envelope rules) and fills *event. Corruption names the
// first rule broken; *event is unspecified then.
Status DecodeEnvelope(std::string_view bytes, size_t max_payload_bytes, Event* event);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_ENVELOPE_H_
