#include "bus/util/utf8.h"

#include <cassert>

namespace walbus::internal {

size_t Utf8SequenceAt(std::string_view s, size_t i, uint32_t* cp) {
  assert(i < s.size());
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    *cp = lead;
    return 1;
  }
  size_t n = 0;
  uint32_t v = 0, min = 0;
  if ((lead & 0xe0) == 0xc0) {
    n = 2, v = lead & 0x1f, min = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    n = 3, v = lead & 0x0f, min = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    n = 4, v = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (byte(k) & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 0xfffd;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

}  // namespace walbus::internal
