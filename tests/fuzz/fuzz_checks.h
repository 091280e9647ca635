// Properties checked on untrusted bytes, shared by the libFuzzer targets
// (tests/fuzz/*_fuzz.cc) and fuzz_regression_test, which replays the seed
// corpus and every crash input ever found (tests/fuzz/regressions/).
//
// Each check feeds the bytes to the parsers and returns false when a
// property is broken (a decoded value that does not survive re-encoding, a
// validator that disagrees with its documented rules), writing what broke
// to *why when it is given. Memory errors and undefined behaviour are left
// to the sanitizers.
#ifndef WALBUS_TESTS_FUZZ_FUZZ_CHECKS_H_
#define WALBUS_TESTS_FUZZ_FUZZ_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace walbus::fuzz {

// Inputs above this are ignored by every check.
inline constexpr size_t kMaxInputBytes = 1 << 20;
// max_payload_bytes given to DecodeEnvelope.
inline constexpr size_t kEnvelopeMaxPayloadBytes = 1 << 20;

// DecodeEnvelope; when it accepts, EncodeEnvelope of the event decodes
// again to an equal event.
bool CheckEnvelopeBytes(std::string_view bytes, std::string* why = nullptr);

// DecodeRetry, DecodeDeadLetter, DecodeQuarantine, DecodeCounter and the key
// parsers (ParseSubscriberSeqKey, ParseQuarantineKey, ParseOutboxKey), all on
// the same bytes; whatever one accepts re-encodes to the same bytes and
// decodes again to an equal value.
bool CheckRecordBytes(std::string_view bytes, std::string* why = nullptr);

// Values an operator types: EventId::Parse (ToString and Parse round trip,
// acceptance equal to the canonical 8-4-4-4-12 hex form),
// ValidateEventType and ValidateSubscriberName (acceptance equal to their
// documented rules).
bool CheckCliValue(std::string_view text, std::string* why = nullptr);

// A message as the bridge's inbound consumer reads it, in the form the
// quarantine stores (ParseMessageBytes): FromHeaders either refuses it or
// yields an event whose headers (ToHeaders) parse back to an equal event;
// the signature of an accepted event verifies; its ce-time survives
// FormatRfc3339 and ParseRfc3339 to the microsecond.
bool CheckInboundMessage(std::string_view bytes, std::string* why = nullptr);

// A binary schema as an application registers it (BinarySchema::FromBytes):
// whatever it accepts, reflection reads without leaving the buffer; it is
// compatible with itself; and it compares with another schema both ways.
bool CheckSchemaBytes(std::string_view bytes, std::string* why = nullptr);

// A payload checked against a schema with every kind of field
// (PayloadContract): whatever passes renders as JSON (PayloadReader) or
// falls back to none, and JSON that renders parses back to a payload that
// renders the same.
bool CheckPayloadBytes(std::string_view bytes, std::string* why = nullptr);

// A payload of tests/fuzz/differential_payload.fbs (or, from "G" and an
// eight-byte seed, one the generated object API builds, then mutated):
// whatever PayloadContract accepts, the verifier flatc generates accepts
// too, and reading it through the generated accessors (nested FlatBuffers
// and FlexBuffers included) is clean under the sanitizers, and what the
// tools show of it is JSON; whatever it refuses that flatc accepts is
// refused for a documented reason.
bool CheckPayloadAgainstFlatc(std::string_view bytes, std::string* why = nullptr);

// For the checks: writes `what` to *why when given; false.
bool Fail(std::string* why, std::string what);

// Whether `text` is one JSON value (RFC 8259), strictly.
bool IsJsonDocument(std::string_view text);

// The check of a fuzz target by name ("envelope_fuzz", "records_fuzz",
// "cli_values_fuzz", "inbound_fuzz", "schema_fuzz", "payload_fuzz",
// "differential_fuzz"); nullptr for an unknown name.
using CheckFn = bool (*)(std::string_view, std::string*);
CheckFn CheckForTarget(std::string_view target);

// For LLVMFuzzerTestOneInput: runs `check` and aborts, after printing why,
// when a property is broken.
int RunOrAbort(CheckFn check, const uint8_t* data, size_t size);

}  // namespace walbus::fuzz

#endif  // WALBUS_TESTS_FUZZ_FUZZ_CHECKS_H_
