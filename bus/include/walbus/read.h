// walbus/read.h: reading the application's column families: ordered scans
// with paging, values with their versions, and ReadView, a snapshot of
// committed state for a thread outside any unit of work (a UI, a report).
#ifndef WALBUS_READ_H_
#define WALBUS_READ_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/export.h"
#include "walbus/status.h"

namespace walbus {

namespace internal {
struct ViewRep;
struct ScopeAccess;
}  // namespace internal

// The longest application key a write takes (Put, Delete, ExpectVersion,
// DeleteRange bounds). Bounding keys lets Clear() and an open-ended range
// be one range deletion; reads take keys of any length.
inline constexpr size_t kMaxKeyBytes = 4096;

// Which rows a scan returns, ordered by key bytes (unsigned, shorter first
// on a tie: "a" < "a\0" < "b"). Every bound set must hold; keys are never
// empty, so an empty string is no bound.
struct ScanOptions {
  std::string start;     // the first key taken (inclusive); empty: from the first
  std::string end;       // the first key not taken (exclusive); empty: to the last
  std::string prefix;    // only keys that start with these bytes
  size_t limit = 0;      // at most this many rows; 0: no limit
  bool reverse = false;  // descending key order
  // Paging: a page's resume_after. The scan continues strictly after that
  // key in its direction. Empty: from the start of the range.
  std::string resume_after;
};

// One row of a scan.
struct KeyValue {
  std::string key;    // the row's key
  std::string value;  // its value
  // Rows are equal when their keys and values are.
  bool operator==(const KeyValue&) const = default;
};

// One page of a scan.
struct ScanPage {
  std::vector<KeyValue> rows;  // in scan order
  // The last row's key when rows beyond this page remain (pass it as
  // ScanOptions::resume_after for the next page); empty at the end.
  std::string resume_after;
};

// A value and its version, as one snapshot saw both.
struct VersionedValue {
  std::optional<std::string> value;  // nullopt: no such key
  uint64_t version = 0;              // 0: no commit ever asserted one
};

// Called once per row, in scan order; the views are valid during the call
// only. Return false to stop.
using RowVisitor = std::function<bool(std::string_view key, std::string_view value)>;

// A snapshot of the application's committed state, made by Bus::Read():
// every read of one view sees the database as it stood when the view was
// made, whatever commits meanwhile.
//
// Cost: making one takes a RocksDB snapshot (no I/O). While it lives,
// storage keeps every value it can see, even after later commits overwrite
// or delete it (compaction cannot drop them), so disk use and read cost
// grow with how long a view stays open under writes. Hold one for a
// screen or a report, not for the life of the process.
//
// Lifetime: destroy it before its Bus. After Bus::Close() its reads return
// Closed (the snapshot is released at Close).
//
// Threading: its reads may run on several threads at once.
class WALBUS_EXPORT ReadView {
 public:
  // Movable; a moved-from ReadView may only be destroyed or assigned to.
  // @{
  ReadView(ReadView&&) noexcept;
  ReadView& operator=(ReadView&&) noexcept;
  // @}
  // Releases the snapshot.
  ~ReadView();

  // A missing key is an OK result holding nullopt. InvalidArgument for an
  // unknown column family or an empty key.
  Result<std::optional<std::string>> Get(std::string_view column_family, std::string_view key) const;
  // The value and the version of a key, both as of this view.
  Result<VersionedValue> GetWithVersion(std::string_view column_family, std::string_view key) const;
  // One page of rows (ScanOptions). InvalidArgument for an unknown column
  // family.
  Result<ScanPage> Scan(std::string_view column_family, const ScanOptions& options) const;
  // The same rows, visited without copies; limit and resume_after apply.
  Status Scan(std::string_view column_family, const ScanOptions& options, const RowVisitor& visit) const;

 private:
  explicit ReadView(std::unique_ptr<internal::ViewRep> rep);
  std::unique_ptr<internal::ViewRep> rep_;
  friend struct internal::ScopeAccess;
};

}  // namespace walbus

#endif  // WALBUS_READ_H_
