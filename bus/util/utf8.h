// UTF-8, decoded and encoded in one place: every check of untrusted text
// (CloudEvents strings, JSON and terminal output) reads code points here.
#ifndef WALBUS_BUS_UTIL_UTF8_H_
#define WALBUS_BUS_UTIL_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace walbus::internal {

// The length (1..4) of the well-formed UTF-8 sequence at s[i], with its
// code point in *cp; 0 when the bytes there are not one: overlong forms,
// surrogates, code points above U+10FFFF and sequences cut short included.
// REQUIRES: i < s.size().
size_t Utf8SequenceAt(std::string_view s, size_t i, uint32_t* cp);

// Appends the UTF-8 encoding of `cp`; a surrogate or a value above
// U+10FFFF is written as U+FFFD.
void AppendUtf8(uint32_t cp, std::string* out);

// C0 and C1 control characters (U+0000-U+001F, U+007F-U+009F).
constexpr bool IsControlCodePoint(uint32_t cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_UTF8_H_
