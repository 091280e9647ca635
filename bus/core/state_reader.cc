#include "bus/core/state_reader.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "storage/keys.h"

namespace walbus::internal {
namespace {

// The keys ScanOptions select: [lower, upper), an empty upper being open.
struct Range {
  std::string lower;
  std::string upper;
  bool empty() const { return !upper.empty() && lower >= upper; }
  bool Contains(std::string_view key) const { return key >= lower && (upper.empty() || key < upper); }
};

// The first key above every key that starts with `prefix`; empty (open)
// when none is, as for a prefix of 0xff bytes only.
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

void LowerTo(std::string* upper, std::string candidate) {
  if (!candidate.empty() && (upper->empty() || candidate < *upper)) *upper = std::move(candidate);
}

Range RangeOf(const ScanOptions& options) {
  Range range{std::max(options.start, options.prefix), options.end};
  LowerTo(&range.upper, PrefixEnd(options.prefix));
  if (!options.resume_after.empty()) {
    if (options.reverse) {
      LowerTo(&range.upper, options.resume_after);
    } else {
      // The smallest key above resume_after.
      range.lower = std::max(range.lower, options.resume_after + std::string(1, '\0'));
    }
  }
  return range;
}

// A unit of work's own writes to one column family within a range: the
// latest state of each key it wrote, and the ranges it deleted. Every key
// kept is newer than every deleted range over it (a range deletion drops
// the keys written before it), so a key's own state wins over the ranges.
class OwnRows {
 public:
  // `layers`: write sets oldest first, each laid over the ones before.
  OwnRows(std::span<const WriteSet* const> layers, storage::CfHandle* cf, const Range& range) {
    for (const WriteSet* writes : layers) Add(*writes, cf, range);
    MergeDeletedRanges();
  }

  // The rows in scan order.
  std::vector<std::pair<const std::string*, const std::optional<std::string>*>> InOrder(bool reverse) const {
    std::vector<std::pair<const std::string*, const std::optional<std::string>*>> out;
    out.reserve(rows_.size());
    for (const auto& [key, value] : rows_) out.emplace_back(&key, &value);
    if (reverse) std::reverse(out.begin(), out.end());
    return out;
  }

  bool InDeletedRange(std::string_view key) const {
    auto after = std::upper_bound(deleted_.begin(), deleted_.end(), key,
                                  [](std::string_view k, const auto& range) { return k < range.first; });
    return after != deleted_.begin() && key < std::prev(after)->second;
  }

 private:
  void Add(const WriteSet& writes, storage::CfHandle* cf, const Range& range) {
    for (const Op& op : writes.ops) {
      if (op.cf != cf) continue;
      switch (op.kind) {
        case Op::Kind::kPut:
          if (range.Contains(op.key)) rows_[op.key] = op.value;
          break;
        case Op::Kind::kDelete:
          if (range.Contains(op.key)) rows_[op.key] = std::nullopt;
          break;
        case Op::Kind::kDeleteRange:
          rows_.erase(rows_.lower_bound(op.key), rows_.lower_bound(op.value));
          deleted_.emplace_back(op.key, op.value);
          break;
        case Op::Kind::kAddCounter: break;  // not on application column families
      }
    }
  }

  void MergeDeletedRanges() {
    std::sort(deleted_.begin(), deleted_.end());
    std::vector<std::pair<std::string, std::string>> merged;
    for (auto& range : deleted_) {
      if (!merged.empty() && range.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, range.second);
      } else {
        merged.push_back(std::move(range));
      }
    }
    deleted_ = std::move(merged);
  }

  std::map<std::string, std::optional<std::string>, std::less<>> rows_;
  std::vector<std::pair<std::string, std::string>> deleted_;  // sorted, disjoint
};

}  // namespace

AppColumnFamilies::AppColumnFamilies(const storage::Db& db, const std::vector<std::string>& listed) {
  for (const std::string& name : listed) {
    storage::CfHandle* handle = db.AppCf(name);
    assert(handle != nullptr && "storage::Db::Open creates every listed family");
    handles_.emplace(name, handle);
  }
}

Result<storage::CfHandle*> AppColumnFamilies::Find(std::string_view name) const {
  auto it = handles_.find(name);
  if (it == handles_.end()) {
    return Status::InvalidArgument("unknown column family '" + std::string(name) +
                                   "': list it in Options::column_families");
  }
  return it->second;
}

Status CheckKey(std::string_view column_family, std::string_view key, bool for_write) {
  if (key.empty()) return Status::InvalidArgument("empty key in column family '" + std::string(column_family) + "'");
  if (for_write && key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes in column family '" +
                                   std::string(column_family) + "': at most " + std::to_string(kMaxKeyBytes));
  }
  return Status::OK();
}

std::string DescribeKey(std::string_view column_family, std::string_view key) {
  std::string out(column_family);
  out += '/';
  for (char c : key.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (key.size() > 64) out += "...";
  return out;
}

const std::string& EndOfKeys() {
  static const std::string* const end = new std::string(kMaxKeyBytes + 1, '\xff');
  return *end;
}

Op ClearAll(storage::CfHandle* cf) {
  // "\0" is the smallest key there is (keys are never empty).
  return Op{Op::Kind::kDeleteRange, cf, std::string(1, '\0'), EndOfKeys()};
}

OwnWrite LatestOwnWrite(const WriteSet& writes, storage::CfHandle* cf, std::string_view key) {
  for (auto it = writes.ops.rbegin(); it != writes.ops.rend(); ++it) {
    if (it->cf != cf) continue;
    switch (it->kind) {
      case Op::Kind::kPut:
        if (it->key == key) return OwnWrite{OwnWrite::State::kValue, &it->value};
        break;
      case Op::Kind::kDelete:
        if (it->key == key) return OwnWrite{OwnWrite::State::kDeleted, nullptr};
        break;
      case Op::Kind::kDeleteRange:
        if (key >= it->key && key < it->value) return OwnWrite{OwnWrite::State::kDeleted, nullptr};
        break;
      case Op::Kind::kAddCounter: break;
    }
  }
  return OwnWrite{};
}

OwnWrite StateReader::LatestLaidOver(const WriteSet* own, storage::CfHandle* cf, std::string_view key) const {
  if (own != nullptr) {
    if (OwnWrite w = LatestOwnWrite(*own, cf, key); w.state != OwnWrite::State::kNone) return w;
  }
  for (auto it = earlier_.rbegin(); it != earlier_.rend(); ++it) {
    if (OwnWrite w = LatestOwnWrite(**it, cf, key); w.state != OwnWrite::State::kNone) return w;
  }
  return OwnWrite{};
}

void StateReader::TakeSnapshot(storage::Db* db) {
  if (snapshot_ == nullptr) snapshot_ = db->NewSnapshot();
}

Result<std::optional<std::string>> StateReader::Get(storage::Db* db, storage::CfHandle* cf, std::string_view key,
                                                    const WriteSet* own) {
  const OwnWrite w = LatestLaidOver(own, cf, key);
  if (w.state == OwnWrite::State::kDeleted) return std::optional<std::string>();
  if (w.state == OwnWrite::State::kValue) return std::optional<std::string>(*w.value);
  TakeSnapshot(db);
  std::string value;
  bool found = false;
  if (Status s = db->Get(cf, key, &value, &found, snapshot_.get()); !s.ok()) return s;
  if (!found) return std::optional<std::string>();
  return std::optional<std::string>(std::move(value));
}

namespace {
Result<uint64_t> VersionAt(const storage::Db& db, const storage::Snapshot* snapshot, storage::CfHandle* cf,
                           std::string_view column_family, std::string_view key) {
  std::string value;
  bool found = false;
  Status s =
      db.Get(db.cf(storage::Cf::kVersions), storage::VersionKey(storage::Db::CfId(cf), key), &value, &found, snapshot);
  if (!s.ok()) return s;
  if (!found) return uint64_t{0};
  if (value.size() != 8) return Status::Corruption("version record of " + DescribeKey(column_family, key));
  return storage::GetBe64(value);
}
}  // namespace

Result<uint64_t> StateReader::Version(storage::Db* db, storage::CfHandle* cf, std::string_view column_family,
                                      std::string_view key) {
  if (!earlier_.empty()) {
    const std::string version_key = storage::VersionKey(storage::Db::CfId(cf), key);
    for (auto it = earlier_.rbegin(); it != earlier_.rend(); ++it) {
      const std::vector<Expectation>& expects = (*it)->expects;
      auto e = std::find_if(expects.rbegin(), expects.rend(),
                            [&](const Expectation& x) { return x.version_key == version_key; });
      if (e != expects.rend()) return e->Next();
    }
  }
  TakeSnapshot(db);
  return VersionAt(*db, snapshot_.get(), cf, column_family, key);
}

Result<uint64_t> CommittedVersion(const storage::Db& db, storage::CfHandle* cf, std::string_view column_family,
                                  std::string_view key) {
  return VersionAt(db, nullptr, cf, column_family, key);
}

namespace {

// The rows `options` selects as `snapshot` saw them (the latest state when
// null), `layers` (oldest first) laid over them.
Status ScanMerged(const storage::Db& db, const storage::Snapshot* snapshot, storage::CfHandle* cf,
                  const ScanOptions& options, std::span<const WriteSet* const> layers, const RowVisitor& visit,
                  bool* more) {
  if (more != nullptr) *more = false;
  const Range range = RangeOf(options);
  if (range.empty()) return Status::OK();
  const OwnRows own_rows(layers, cf, range);
  const auto own_in_order = own_rows.InOrder(options.reverse);
  size_t next_own = 0, emitted = 0;
  bool stopped = false;
  // Hands one row to the visitor; false once the scan must stop.
  auto emit = [&](std::string_view key, std::string_view value) {
    if (options.limit != 0 && emitted == options.limit) {
      if (more != nullptr) *more = true;
      stopped = true;
      return false;
    }
    ++emitted;
    stopped = !visit(key, value);
    return !stopped;
  };
  auto before = [&](std::string_view a, std::string_view b) { return options.reverse ? a > b : a < b; };
  // Own rows up to `key` (all when null), in order; false once stopped.
  auto emit_own_before = [&](const std::string_view* key) {
    for (; next_own < own_in_order.size() && (key == nullptr || before(*own_in_order[next_own].first, *key));
         ++next_own) {
      const auto& [own_key, own_value] = own_in_order[next_own];
      if (own_value->has_value() && !emit(*own_key, **own_value)) return false;
    }
    return true;
  };
  Status s = db.ScanRange(cf, snapshot, storage::KeyBounds{range.lower, range.upper}, options.reverse,
                          [&](std::string_view key, std::string_view value) {
                            if (!emit_own_before(&key)) return false;
                            if (next_own < own_in_order.size() && *own_in_order[next_own].first == key) {
                              const std::optional<std::string>& mine = *own_in_order[next_own++].second;
                              return !mine.has_value() || emit(key, *mine);
                            }
                            return own_rows.InDeletedRange(key) || emit(key, value);
                          });
  if (!s.ok()) return s;
  if (!stopped) emit_own_before(nullptr);
  return Status::OK();
}

}  // namespace

Status StateReader::Scan(storage::Db* db, storage::CfHandle* cf, const ScanOptions& options, const WriteSet* own,
                         const RowVisitor& visit, bool* more) {
  TakeSnapshot(db);
  if (own == nullptr) return ScanMerged(*db, snapshot_.get(), cf, options, earlier_, visit, more);
  std::vector<const WriteSet*> layers = earlier_;
  layers.push_back(own);
  return ScanMerged(*db, snapshot_.get(), cf, options, layers, visit, more);
}

Status ScanCommitted(const storage::Db& db, storage::CfHandle* cf, const ScanOptions& options, const RowVisitor& visit,
                     bool* more) {
  return ScanMerged(db, nullptr, cf, options, {}, visit, more);
}

Result<ScanPage> StateReader::ScanPageOf(storage::Db* db, storage::CfHandle* cf, const ScanOptions& options,
                                         const WriteSet* own) {
  ScanPage page;
  bool more = false;
  Status s = Scan(
      db, cf, options, own,
      [&](std::string_view key, std::string_view value) {
        page.rows.push_back(KeyValue{std::string(key), std::string(value)});
        return true;
      },
      &more);
  if (!s.ok()) return s;
  if (more) page.resume_after = page.rows.back().key;
  return page;
}

}  // namespace walbus::internal
