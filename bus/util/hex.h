// Hexadecimal digits: one place for the encoding event ids, percent-
// encoded headers and the tool's byte listings share.
#ifndef WALBUS_BUS_UTIL_HEX_H_
#define WALBUS_BUS_UTIL_HEX_H_

#include <string>
#include <string_view>

namespace walbus::internal {

// The value of one hex digit (either case), or -1 for any other byte.
int HexDigitValue(char c);
// Two lowercase digits per byte.
std::string HexEncode(std::string_view bytes);
// The bytes of an even number of hex digits; false (and *out unspecified)
// for anything else.
bool HexDecode(std::string_view hex, std::string* out);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_HEX_H_
