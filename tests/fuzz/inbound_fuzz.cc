// The bridge's inbound messages on arbitrary bytes (in the quarantine's
// message form): FromHeaders refuses them or accepts an event that must
// round-trip through its headers (fuzz_checks.h).

#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return walbus::fuzz::RunOrAbort(walbus::fuzz::CheckInboundMessage, data, size);
}
