// The CloudEvents NATS binding in binary mode, as walbus speaks it: an
// event's attributes as `ce-*` headers and its data as the body, plus an
// optional HMAC-SHA256 signature. Pure functions of bytes: the NATS client
// stays in bridge/nats_link.*.
#ifndef WALBUS_BRIDGE_CLOUDEVENTS_H_
#define WALBUS_BRIDGE_CLOUDEVENTS_H_

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "walbus/event.h"
#include "walbus/status.h"

namespace walbus::bridge {

using Headers = std::map<std::string, std::string>;

inline constexpr std::string_view kMsgIdHeader = "Nats-Msg-Id";
inline constexpr std::string_view kKeyIdHeader = "walbus-key-id";
inline constexpr std::string_view kSignatureHeader = "walbus-signature";
// The sender's per-subject position (CloudEvents extension attributes):
// ce-subjectseq is the event's place among the events of its source and
// subject that one relay sent, 1, 2, 3, ... without gaps; ce-seqorigin
// names that relay's counter (a database made anew starts a new one).
inline constexpr std::string_view kSubjectSeqHeader = "ce-subjectseq";
inline constexpr std::string_view kSeqOriginHeader = "ce-seqorigin";

// Where a relayed event stands in its sender's order.
struct SenderPosition {
  std::string origin;     // ce-seqorigin
  uint64_t position = 0;  // ce-subjectseq, 1 or more
};
// Sets both headers.
void SetPosition(const SenderPosition& position, Headers* headers);
// The position a message carries: nullopt when it carries none; an
// InvalidArgument when it carries a malformed one (or only one header).
Result<std::optional<SenderPosition>> ReadPosition(const Headers& headers);

// The headers of an event (ce-specversion, ce-id, ce-source, ce-type,
// ce-subject, ce-time, and when set ce-datacontenttype, ce-traceparent,
// ce-subjectversion, ce-correlationid, ce-causationid, and ce-dataschema
// when `dataschema` is not empty), plus Nats-Msg-Id. Values are
// percent-encoded as the binding requires (PercentEncode), so every byte
// of a subject, control characters included, arrives as sent.
Headers ToHeaders(const Event& event, std::string_view dataschema = {});

// The event a message carries. Header names match in any case; values are
// percent-decoded. The data's media type is ce-datacontenttype, else
// content-type. A CloudEvent without a subject takes its source as its
// subject, so its source orders it. InvalidArgument naming what is wrong:
// a missing or malformed required attribute (id, source, type, time,
// specversion), an unsupported specversion, a malformed percent escape.
// The rules of the bus (type format, sizes) are checked by Bus::IngestEvent.
Status FromHeaders(const Headers& headers, std::string body, Event* out);

// The value of header `name`, matched in any case (header names are
// case-insensitive); nullptr when absent.
const std::string* FindHeader(const Headers& headers, std::string_view name);

// The binding's encoding of a header value: a space, '"', '%' and every
// byte outside printable ASCII become %XX (UTF-8 bytes, uppercase hex).
std::string PercentEncode(std::string_view value);
// Its inverse; InvalidArgument for a '%' not followed by two hex digits.
Result<std::string> PercentDecode(std::string_view value);

// Hex HMAC-SHA256 with `secret` over the length-prefixed id, type, source,
// subject, time (RFC 3339 as in the ce-time header) and data of `event`.
std::string Sign(const Event& event, std::string_view secret);
// Whether `signature` (hex) is Sign(event, secret); constant time.
bool SignatureMatches(const Event& event, std::string_view secret, std::string_view signature);

// A message as bytes, for the quarantine: "name: value" header lines ending
// in CRLF, a blank line, the body.
std::string MessageBytes(const Headers& headers, std::string_view body);
// The inverse of MessageBytes: false when `bytes` has no blank line or a
// header line without ": ".
bool ParseMessageBytes(std::string_view bytes, Headers* headers, std::string* body);

// `text` as one NATS subject token, reversibly: '%', '.', '*', '>' and
// every byte outside printable ASCII (white space included) become %XX
// (uppercase hex), so PercentDecode gives `text` back. "_" for "".
std::string SubjectToken(std::string_view text);
// The default NATS subject of an event: prefix.SubjectToken(source).type;
// the type's words stay tokens of their own.
std::string DefaultSubject(std::string_view prefix, const Event& event);

// Whether a stream subject filter (NATS tokens, "*" and a final ">")
// matches every subject DefaultSubject makes with `prefix`.
bool FilterCoversPrefix(std::string_view filter, std::string_view prefix);

}  // namespace walbus::bridge

#endif  // WALBUS_BRIDGE_CLOUDEVENTS_H_
