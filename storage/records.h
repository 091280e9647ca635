// Records of the failure paths: retry state, dead letters and quarantined
// input, as stored in their column families (docs/design.md).
//
// Every record starts with a format byte. Decoders take bytes read back
// from disk and check every length before reading, returning false on
// anything malformed (they are fuzzed).
#ifndef WALBUS_STORAGE_RECORDS_H_
#define WALBUS_STORAGE_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace walbus::storage {

// retries: be32(subscriber id) + be64(seq) -> RetryRecord. Written when a
// handler attempt fails, and before a handler runs again on an event that
// may have been in flight when the process died; deleted with the event's
// completion.
struct RetryRecord {
  uint32_t attempts = 0;             // attempts made so far
  uint64_t first_failure_ms = 0;     // unix ms of the first failed attempt
  uint64_t last_failure_ms = 0;
  std::string last_error;            // capped at kMaxErrorBytes
};

// dead_letters: be32(subscriber id) + be64(seq) -> DeadLetterRecord.
struct DeadLetterRecord {
  uint32_t attempts = 0;
  uint64_t first_failure_ms = 0;
  uint64_t last_failure_ms = 0;
  std::string error;            // capped at kMaxErrorBytes
  std::string handler_version;  // the subscriber's, when it gave up
  std::string envelope;         // the original event, as in the outbox
};

// quarantine: be64(arrival seq) -> QuarantineRecord.
struct QuarantineRecord {
  uint64_t arrived_ms = 0;
  uint64_t original_bytes = 0;  // size before capping
  std::string source;           // where the bytes came from
  std::string reason;           // the first verification rule broken
  std::string raw;              // the bytes, capped at kMaxQuarantineRawBytes
};

inline constexpr size_t kMaxErrorBytes = 1024;
inline constexpr size_t kMaxQuarantineRawBytes = 64 * 1024;

std::string EncodeRetry(const RetryRecord& r);
bool DecodeRetry(std::string_view in, RetryRecord* r);
std::string EncodeDeadLetter(const DeadLetterRecord& r);
bool DecodeDeadLetter(std::string_view in, DeadLetterRecord* r);
std::string EncodeQuarantine(const QuarantineRecord& r);
bool DecodeQuarantine(std::string_view in, QuarantineRecord* r);

// Keys: be32(subscriber id) + be64(seq) for retries and dead letters.
std::string SubscriberSeqKey(uint32_t subscriber_id, uint64_t seq);
bool ParseSubscriberSeqKey(std::string_view key, uint32_t* subscriber_id, uint64_t* seq);
std::string QuarantineKey(uint64_t arrival);
bool ParseQuarantineKey(std::string_view key, uint64_t* arrival);

}  // namespace walbus::storage

#endif  // WALBUS_STORAGE_RECORDS_H_
