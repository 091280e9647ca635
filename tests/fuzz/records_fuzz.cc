// The failure-path records (retries, dead letters, quarantine), replay
// records, and the keys
// they are stored under, as read back from disk, and their inspect views
// (fuzz_checks.h).

#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return walbus::fuzz::RunOrAbort(walbus::fuzz::CheckRecordBytes, data, size);
}
