#include "walbus/status.h"

namespace walbus {

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kInvalidArgument: return "InvalidArgument";
    case Status::Code::kNotFound: return "NotFound";
    case Status::Code::kConflict: return "Conflict";
    case Status::Code::kBusy: return "Busy";
    case Status::Code::kIOError: return "IOError";
    case Status::Code::kCorruption: return "Corruption";
    case Status::Code::kNotSupported: return "NotSupported";
    case Status::Code::kClosed: return "Closed";
    case Status::Code::kTimedOut: return "TimedOut";
    case Status::Code::kResourceExhausted: return "ResourceExhausted";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out = CodeName(code_);
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

}  // namespace walbus
