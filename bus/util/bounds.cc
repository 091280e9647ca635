#include "bus/util/bounds.h"

#include <string>

namespace walbus::internal {
namespace {

std::string RangeText(int64_t min, int64_t max) {
  if (max == kNoMax) return ">= " + std::to_string(min);
  return std::to_string(min) + ".." + std::to_string(max);
}

std::string RangeText(std::chrono::milliseconds min, std::chrono::milliseconds max) {
  if (max == kNoLongest) return ">= " + std::to_string(min.count()) + " ms";
  return std::to_string(min.count()) + " ms.." + std::to_string(max.count()) + " ms";
}

}  // namespace

Status CheckBounds(std::string_view owner, std::initializer_list<CountBound> counts,
                   std::initializer_list<DurationBound> durations) {
  for (const CountBound& r : counts) {
    if (r.value < r.min || r.value > r.max) {
      return Status::InvalidArgument(std::string(owner) + "::" + r.name + " is " + std::to_string(r.value) +
                                     "; it must be " + RangeText(r.min, r.max));
    }
  }
  for (const DurationBound& r : durations) {
    if (r.value < r.min || r.value > r.max) {
      return Status::InvalidArgument(std::string(owner) + "::" + r.name + " is " + std::to_string(r.value.count()) +
                                     " ms; it must be " + RangeText(r.min, r.max));
    }
  }
  return Status::OK();
}

}  // namespace walbus::internal
