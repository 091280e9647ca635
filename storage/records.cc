#include "storage/records.h"

#include "storage/keys.h"

namespace walbus::storage {
namespace {

constexpr char kFormat = 1;

// Appends a 32-bit length and the bytes.
void PutBytes(std::string* out, std::string_view s) {
  PutBe32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// A cursor over untrusted bytes: every read checks what is left.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U8(char* v) {
    if (in_.empty()) return false;
    *v = in_[0];
    in_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t* v) {
    if (in_.size() < 4) return false;
    *v = GetBe32(in_);
    in_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t* v) {
    if (in_.size() < 8) return false;
    *v = GetBe64(in_);
    in_.remove_prefix(8);
    return true;
  }
  bool Bytes(std::string* v, size_t cap) {
    uint32_t n = 0;
    if (!U32(&n) || n > in_.size() || n > cap) return false;
    v->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool Format() {
    char f = 0;
    return U8(&f) && f == kFormat;
  }
  bool AtEnd() const { return in_.empty(); }

 private:
  std::string_view in_;
};

std::string_view Capped(std::string_view s, size_t cap) { return s.substr(0, cap); }

constexpr size_t kMaxEnvelopeBytes = (64u << 20) + 4096;
constexpr size_t kMaxShortBytes = 1024;

}  // namespace

std::string EncodeRetry(const RetryRecord& r) {
  std::string out(1, kFormat);
  PutBe32(&out, r.attempts);
  PutBe64(&out, r.first_failure_ms);
  PutBe64(&out, r.last_failure_ms);
  PutBytes(&out, Capped(r.last_error, kMaxErrorBytes));
  return out;
}

bool DecodeRetry(std::string_view in, RetryRecord* r) {
  Reader rd(in);
  return rd.Format() && rd.U32(&r->attempts) && rd.U64(&r->first_failure_ms) && rd.U64(&r->last_failure_ms) &&
         rd.Bytes(&r->last_error, kMaxErrorBytes) && rd.AtEnd();
}

std::string EncodeDeadLetter(const DeadLetterRecord& r) {
  std::string out(1, kFormat);
  PutBe32(&out, r.attempts);
  PutBe64(&out, r.first_failure_ms);
  PutBe64(&out, r.last_failure_ms);
  PutBytes(&out, Capped(r.error, kMaxErrorBytes));
  PutBytes(&out, Capped(r.handler_version, kMaxShortBytes));
  PutBytes(&out, r.envelope);
  return out;
}

bool DecodeDeadLetter(std::string_view in, DeadLetterRecord* r) {
  Reader rd(in);
  return rd.Format() && rd.U32(&r->attempts) && rd.U64(&r->first_failure_ms) && rd.U64(&r->last_failure_ms) &&
         rd.Bytes(&r->error, kMaxErrorBytes) && rd.Bytes(&r->handler_version, kMaxShortBytes) &&
         rd.Bytes(&r->envelope, kMaxEnvelopeBytes) && rd.AtEnd();
}

std::string EncodeQuarantine(const QuarantineRecord& r) {
  std::string out(1, kFormat);
  PutBe64(&out, r.arrived_ms);
  PutBe64(&out, r.original_bytes);
  PutBytes(&out, Capped(r.source, kMaxShortBytes));
  PutBytes(&out, Capped(r.reason, kMaxErrorBytes));
  PutBytes(&out, Capped(r.raw, kMaxQuarantineRawBytes));
  return out;
}

bool DecodeQuarantine(std::string_view in, QuarantineRecord* r) {
  Reader rd(in);
  return rd.Format() && rd.U64(&r->arrived_ms) && rd.U64(&r->original_bytes) &&
         rd.Bytes(&r->source, kMaxShortBytes) && rd.Bytes(&r->reason, kMaxErrorBytes) &&
         rd.Bytes(&r->raw, kMaxQuarantineRawBytes) && rd.AtEnd();
}

std::string SubscriberSeqKey(uint32_t subscriber_id, uint64_t seq) {
  std::string k;
  k.reserve(12);
  PutBe32(&k, subscriber_id);
  PutBe64(&k, seq);
  return k;
}

bool ParseSubscriberSeqKey(std::string_view key, uint32_t* subscriber_id, uint64_t* seq) {
  if (key.size() != 12) return false;
  *subscriber_id = GetBe32(key);
  *seq = GetBe64(key.substr(4));
  return true;
}

std::string QuarantineKey(uint64_t arrival) { return OutboxKey(arrival); }
bool ParseQuarantineKey(std::string_view key, uint64_t* arrival) { return ParseOutboxKey(key, arrival); }

}  // namespace walbus::storage
