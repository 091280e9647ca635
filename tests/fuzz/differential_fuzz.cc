// Payloads of a schema with every kind of field, checked by walbus and by
// the verifier flatc generates (fuzz_checks.h).

#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return walbus::fuzz::RunOrAbort(walbus::fuzz::CheckPayloadAgainstFlatc, data, size);
}
