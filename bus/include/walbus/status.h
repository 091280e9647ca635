// Status and Result<T>: how every walbus call reports failure.
//
// No exception crosses the public API. A call that can fail returns a Status
// or a Result<T>; both are [[nodiscard]], so dropping an error is a visible
// act: write `status.IgnoreError()` where that is really meant.
//
// Threading: value types. Distinct objects may be used from distinct threads
// without synchronization; one object shared between threads needs the
// caller's locking, like any std::string.
#ifndef WALBUS_STATUS_H_
#define WALBUS_STATUS_H_

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "walbus/export.h"

namespace walbus {

// The outcome of a call: OK, or a code and a message saying what failed.
// Cheap to copy when OK (no allocation).
class [[nodiscard]] WALBUS_EXPORT Status {
 public:
  // What kind of failure; callers branch on it, people read the message.
  enum class Code : uint8_t {
    kOk = 0,             // Success.
    kInvalidArgument,    // The caller's input is wrong; nothing was written.
    kNotFound,           // A named thing (subscriber, column family) is absent.
    kConflict,           // An ExpectVersion precondition failed; nothing written.
    kBusy,               // The resource is held (e.g. another process's lock).
    kIOError,            // The operating system or the disk failed.
    kCorruption,         // Stored bytes fail verification.
    kNotSupported,       // Valid request this build or mode cannot do.
    kClosed,             // The bus is closed or closing.
    kTimedOut,           // A wait ran out of time; nothing was cancelled.
    kResourceExhausted,  // A configured bound was reached.
  };

  // An OK status. Never allocates.
  Status() = default;

  // A status of each code, with a message for people, e.g.
  // Status::NotFound("no subscriber named billing").
  // @{
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
  static Status Busy(std::string m) { return {Code::kBusy, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status NotSupported(std::string m) { return {Code::kNotSupported, std::move(m)}; }
  static Status Closed(std::string m) { return {Code::kClosed, std::move(m)}; }
  static Status TimedOut(std::string m) { return {Code::kTimedOut, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
  // @}

  // True for success.
  bool ok() const { return code_ == Code::kOk; }
  // The code; Code::kOk for success.
  Code code() const { return code_; }
  // Whether the code is the one named.
  // @{
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsConflict() const { return code_ == Code::kConflict; }
  bool IsBusy() const { return code_ == Code::kBusy; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsClosed() const { return code_ == Code::kClosed; }
  bool IsTimedOut() const { return code_ == Code::kTimedOut; }
  bool IsNotSupported() const { return code_ == Code::kNotSupported; }
  bool IsResourceExhausted() const { return code_ == Code::kResourceExhausted; }
  // @}

  // The message alone, without the code name.
  const std::string& message() const { return message_; }
  // "Conflict: orders/42 expected version 3, found 4".
  std::string ToString() const;

  // Marks a deliberately ignored error, so the choice is searchable.
  void IgnoreError() const {}

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// The name of a code, e.g. "Conflict".
WALBUS_EXPORT const char* CodeName(Status::Code code);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  // A result holding `value`; implicit, so a function returns a T as is.
  Result(T value) : rep_(std::move(value)) {}  // NOLINT: implicit by design
  // A failed result; implicit, so a function returns a Status as is.
  // REQUIRES: !status.ok(). An OK status is a bug in the code that made
  // the result: it asserts in debug builds, and in release builds the
  // result is still an error (InvalidArgument saying so), never a result
  // that claims a value it does not hold.
  Result(Status status)  // NOLINT: implicit by design
      : rep_(status.ok() ? Status::InvalidArgument("a Result was made from an OK status, without a value")
                         : std::move(status)) {
    assert(!status.ok());  // NOLINT: a move leaves a Status's code as it was
  }

  // True when a value is held.
  bool ok() const { return std::holds_alternative<T>(rep_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status::OK() : std::get<Status>(rep_); }

  // The value. REQUIRES: ok()
  // @{
  T& value() & {
    assert(ok());
    return std::get<T>(rep_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(rep_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(rep_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  // @}

  // Marks a deliberately ignored error, so the choice is searchable.
  void IgnoreError() const {}

 private:
  std::variant<T, Status> rep_;
};

}  // namespace walbus

#endif  // WALBUS_STATUS_H_
