// The names nearest a mistyped one, for errors and warnings that suggest
// what was meant ("orders.order-placd.v1: did you mean
// orders.order-placed.v1?").
#ifndef WALBUS_BUS_UTIL_CLOSEST_H_
#define WALBUS_BUS_UTIL_CLOSEST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace walbus::internal {

// Up to `max` of `candidates` nearest `name` by edit distance (insertions,
// deletions and substitutions of bytes), nearest first, ties in the
// candidates' order; only those at most a third of `name`'s length (and
// at least 2) away. Thread-safe.
std::vector<std::string> ClosestNames(std::string_view name, const std::vector<std::string>& candidates, size_t max);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_CLOSEST_H_
