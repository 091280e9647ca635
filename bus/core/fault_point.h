// Fault points: named places in the commit path, the handler commit and
// recovery where a crash test can kill the process (SIGKILL) on purpose.
//
// Compiled in only when WALBUS_FAULT_POINTS is defined (the dev and tsan
// builds); elsewhere WALBUS_FAULT_POINT expands to nothing.
//
// Threading: Arm() before the points can be hit; Hit() is thread-safe.
#ifndef WALBUS_BUS_CORE_FAULT_POINT_H_
#define WALBUS_BUS_CORE_FAULT_POINT_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace walbus::internal::fault {

// Every fault point in the code, for crash tests to choose from.
const std::vector<std::string_view>& AllPoints();

#ifdef WALBUS_FAULT_POINTS
// Kills the process the `countdown`-th time (1 = the first) execution
// passes `point`. REQUIRES: point is one of AllPoints().
void Arm(std::string_view point, uint64_t countdown);
void Hit(std::string_view point);
inline constexpr bool kEnabled = true;
#define WALBUS_FAULT_POINT(point) ::walbus::internal::fault::Hit(point)
#else
inline void Arm(std::string_view, uint64_t) {}
inline constexpr bool kEnabled = false;
#define WALBUS_FAULT_POINT(point) \
  do {                            \
  } while (0)
#endif

}  // namespace walbus::internal::fault

#endif  // WALBUS_BUS_CORE_FAULT_POINT_H_
