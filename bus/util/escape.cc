#include "bus/util/escape.h"

#include <cstdint>
#include <cstdio>

#include "bus/util/utf8.h"

namespace walbus::internal {

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8SequenceAt(s, i, &cp);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else {
          out.append(s.substr(i, n));
        }
    }
    i += n;
  }
  return out + "\"";
}

namespace {

void AppendEscapedByte(unsigned char c, std::string* out) {
  switch (c) {
    case '\n': *out += "\\n"; return;
    case '\t': *out += "\\t"; return;
    case '\r': *out += "\\r"; return;
    default: {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      *out += buf;
    }
  }
}

}  // namespace

std::string TextSafe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8SequenceAt(s, i, &cp);
    if (n == 0 || IsControlCodePoint(cp)) {
      const size_t bad = n == 0 ? 1 : n;
      for (size_t k = 0; k < bad; ++k) AppendEscapedByte(static_cast<unsigned char>(s[i + k]), &out);
      i += bad;
      continue;
    }
    if (cp == '\\') {
      out += "\\\\";
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string LogfmtQuoted(std::string_view s) {
  std::string out = "\"";
  for (char c : TextSafe(s)) {
    if (c == '"') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

std::string QuotedForMessage(std::string_view s) {
  constexpr size_t kShown = 64;
  return "'" + TextSafe(s.substr(0, kShown)) + (s.size() > kShown ? "'..." : "'");
}

}  // namespace walbus::internal
