// A payload that passed its schema's check (PayloadContract::Verify), as
// one line of JSON (RFC 8259) laid out as FlatBuffers' text generator lays
// it out: fields in id order, those present only, enums by name, bit
// flags as "A B", union types by name before their value, structs and
// tables as objects, nested FlatBuffers as their table and FlexBuffers as
// their JSON value. Where FlatBuffers' generator is not JSON or loses data
// it differs:
//   - floats and doubles are written as the shortest text that reads back
//     to the same value (FlatBuffers rounds to 6 and 12 digits);
//   - NaN and the infinities, which JSON has no number for, are the strings
//     "NaN", "Infinity" and "-Infinity" (as protobuf's JSON mapping has
//     them; FlatBuffers' JSON parser reads them back);
//   - text other than ASCII is escaped (\uXXXX), as FlatBuffers does.
// Threading: a free function over immutable inputs.
#ifndef WALBUS_TOOLS_WALBUS_PAYLOAD_TEXT_H_
#define WALBUS_TOOLS_WALBUS_PAYLOAD_TEXT_H_

#include <string>
#include <string_view>

namespace reflection {
struct Schema;
}  // namespace reflection

namespace walbus::internal {

// The JSON text of `payload`, a buffer of `schema`'s root table that passed
// PayloadContract::Verify with that schema, read from an address aligned
// to 8 bytes. Empty when it cannot be shown as JSON: a string that is not
// UTF-8, a union member the schema does not know, or text longer than
// kMaxPayloadTextPerByte times the payload (offsets that share data many
// times).
inline constexpr size_t kMaxPayloadTextPerByte = 64;
std::string PayloadText(const reflection::Schema& schema, std::string_view payload);

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_PAYLOAD_TEXT_H_
