#include <chrono>
#include <random>

#include "bus/util/hex.h"
#include "bus/util/unix_time.h"

#include "walbus/event.h"

namespace walbus {
namespace {

// Per-thread generator state. The 12-bit rand_a field carries a counter
// within one millisecond so ids from one thread are strictly increasing
// (RFC 9562, method 1); rand_b is random.
struct IdGenerator {
  std::mt19937_64 rng{std::random_device{}()};
  uint64_t last_ms = 0;
  uint16_t counter = 0;
};

}  // namespace

EventId EventId::Generate() {
  thread_local IdGenerator gen;
  uint64_t ms = internal::ToUnixMillisUnsigned(std::chrono::system_clock::now());
  if (ms > gen.last_ms) {
    gen.last_ms = ms;
    gen.counter = static_cast<uint16_t>(gen.rng() & 0x3ff);  // leave headroom
  } else {
    // Same millisecond, or the clock went back: keep the id increasing.
    ms = gen.last_ms;
    if (++gen.counter > 0xfff) {
      gen.counter = 0;
      gen.last_ms = ++ms;
    }
  }
  EventId id;
  for (int i = 0; i < 6; ++i) id.bytes[i] = static_cast<uint8_t>(ms >> (40 - 8 * i));
  id.bytes[6] = static_cast<uint8_t>(0x70 | ((gen.counter >> 8) & 0x0f));
  id.bytes[7] = static_cast<uint8_t>(gen.counter & 0xff);
  uint64_t r = gen.rng();
  for (int i = 8; i < 16; ++i) id.bytes[i] = static_cast<uint8_t>(r >> (8 * (i - 8)));
  id.bytes[8] = static_cast<uint8_t>(0x80 | (id.bytes[8] & 0x3f));  // RFC 4122 variant
  return id;
}

std::optional<EventId> EventId::Parse(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  EventId id;
  size_t out = 0;
  for (size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return std::nullopt;
      ++i;
      continue;
    }
    int hi = internal::HexDigitValue(text[i]);
    int lo = internal::HexDigitValue(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id.bytes[out++] = static_cast<uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return id;
}

std::string EventId::ToString() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(36);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s.push_back(kHex[bytes[i] >> 4]);
    s.push_back(kHex[bytes[i] & 0xf]);
  }
  return s;
}

bool EventId::IsNil() const {
  for (uint8_t b : bytes)
    if (b != 0) return false;
  return true;
}

uint64_t EventId::UnixMillis() const {
  uint64_t ms = 0;
  for (int i = 0; i < 6; ++i) ms = ms << 8 | bytes[i];
  return ms;
}

}  // namespace walbus
