// Untrusted strings written out: as a JSON string literal, or for one
// terminal line. Every JSON document walbus writes (admin replies, operator
// action records, the tool's --json views) quotes its strings here.
#ifndef WALBUS_BUS_UTIL_ESCAPE_H_
#define WALBUS_BUS_UTIL_ESCAPE_H_

#include <string>
#include <string_view>

namespace walbus::internal {

// A JSON string literal, quotes included. Invalid UTF-8 (a message cut at
// its byte cap, a corrupt record) becomes U+FFFD, so the output is always
// valid JSON.
std::string JsonString(std::string_view s);

// Untrusted bytes made safe for one terminal line: backslash, control
// characters and invalid UTF-8 are escaped (\\, \n, \t, \r, \xNN); the rest
// is kept as is.
std::string TextSafe(std::string_view s);

// A logfmt value in double quotes: TextSafe, with '"' escaped as \" too,
// so that a log reader finds where the value ends.
std::string LogfmtQuoted(std::string_view s);

// An untrusted value quoted for an error message: TextSafe, in single
// quotes, cut to its first 64 bytes ("..." after the quote when cut).
std::string QuotedForMessage(std::string_view s);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_ESCAPE_H_
