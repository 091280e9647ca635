// The envelope: an Event as stored in the outbox (schemas/envelope.fbs),
// and the rules every published event must pass.
#ifndef WALBUS_BUS_CORE_ENVELOPE_H_
#define WALBUS_BUS_CORE_ENVELOPE_H_

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
// Process names (walbus/process.h): 1..64 bytes of [a-z0-9-], a word of
// event types (a process's timeout events are typed by its name).
Status ValidateProcessName(std::string_view name);
// The rules every stored event meets (sizes, type, no NUL in the subject):
// what an envelope read back from storage is checked against, so that
// events written under older, looser rules still read.
Status ValidateEvent(const Event& event, size_t max_payload_bytes);
// Every rule of EventSpec (event.h) for an event entering the bus (Publish,
// Ingest): ValidateEvent, and the CloudEvents rules on top, since every
// walbus event is a CloudEvent: the subject, content type and traceparent
// are strings in CloudEvents' sense (ValidateCloudEventString), the source
// is a URI-reference (ValidateUriReference).
Status ValidateNewEvent(const Event& event, size_t max_payload_bytes);
// Valid UTF-8 without the characters CloudEvents disallows in a String:
// controls U+0000..U+001F and U+007F..U+009F, surrogates (which valid
// UTF-8 cannot hold), and the noncharacters U+FDD0..U+FDEF and U+xFFFE,
// U+xFFFF. InvalidArgument naming `what` and the byte offset.
Status ValidateCloudEventString(std::string_view what, std::string_view value);
// A non-empty URI-reference (RFC 3986, section 4.1): ASCII only, the
// characters a URI allows, well-formed %XX escapes, and a first segment
// with a ':' only as the end of a valid scheme ("urn:dev:7",
// "https://example.com/dev/7", "/fleet/7", "dev-7"; not "dev 7", "bär",
// "1:x"). InvalidArgument naming `what`.
Status ValidateUriReference(std::string_view what, std::string_view value);

// Serializes everything but seq (seq is the outbox key).
std::string EncodeEnvelope(const Event& event);

// Verifies untrusted bytes (FlatBuffers Verifier with depth, table and size
// limits, then the envelope rules) and fills *event. Corruption names the
// first rule broken; *event is unspecified then.
Status DecodeEnvelope(std::string_view bytes, size_t max_payload_bytes, Event* event);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_ENVELOPE_H_
