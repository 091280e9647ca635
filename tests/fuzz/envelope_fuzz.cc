// DecodeEnvelope on arbitrary bytes: envelopes are read back from the outbox
// and from dead letters, and may be corrupt. Accepted envelopes must
// round-trip through EncodeEnvelope (fuzz_checks.h).

#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return walbus::fuzz::RunOrAbort(walbus::fuzz::CheckEnvelopeBytes, data, size);
}
