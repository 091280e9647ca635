// Event payloads checked against their type's schema, then shown as JSON
// (fuzz_checks.h).

#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return walbus::fuzz::RunOrAbort(walbus::fuzz::CheckPayloadBytes, data, size);
}
